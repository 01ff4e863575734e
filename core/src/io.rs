//! Writing files a user keeps: atomically, so a crash or cancel never leaves half a file.

use std::io::Write;
use std::path::Path;

/// Writes `bytes` to `path` through a temporary file in the same folder, then renames it.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "out".into());
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if result.is_err() {
        // Best effort: the temporary file is ours and worthless after a failure.
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
