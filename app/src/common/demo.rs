//! The demo study every command and the viewer open without a path: a phantom chest CT,
//! written once into the user's cache.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use tessera_core::phantom::{self, PhantomSpec};

/// The demo study's recipe. Bump `DEMO_VERSION` when the phantom's output changes.
pub fn demo_spec() -> PhantomSpec {
    PhantomSpec {
        seed: 7,
        size: [512, 512, 160],
        spacing_mm: [0.7, 0.7, 2.0],
        nodules: 6,
        noise_hu: 18.0,
        masses: 0,
    }
}
const DEMO_VERSION: u32 = 1;

/// `path`, or the demo study when there is none (every command's default).
pub fn study_or_demo(path: Option<&Path>) -> anyhow::Result<PathBuf> {
    match path {
        Some(p) => Ok(p.to_path_buf()),
        None => demo_study_dir().context("preparing the demo study"),
    }
}

/// The demo study as a DICOM folder in the user's cache, written on first use.
pub fn demo_study_dir() -> anyhow::Result<PathBuf> {
    let dir = cache_root().join(format!("demo-v{DEMO_VERSION}-seed{}", demo_spec().seed));
    if dir.join(phantom::TRUTH_FILE).is_file() {
        return Ok(dir);
    }
    eprintln!("writing the demo study to {} (once)...", dir.display());
    let phantom = phantom::generate(&demo_spec()).context("generating the demo study")?;
    match write_folder(&phantom, &dir) {
        Ok(()) => Ok(dir),
        // Another process finished first: theirs is identical (same seed), use it.
        Err(_) if dir.join(phantom::TRUTH_FILE).is_file() => Ok(dir),
        Err(e) => Err(e).with_context(|| format!("writing the demo study into {}", dir.display())),
    }
}

/// Refuses a folder that holds anything but a previous phantom (or nothing).
pub(crate) fn check_phantom_folder(dir: &Path) -> Result<(), tessera_dicom::io::OutputError> {
    let refuse = |reason: String| tessera_dicom::io::OutputError::NotOurFolder {
        path: dir.to_path_buf(),
        reason,
    };
    let Ok(meta) = std::fs::metadata(dir) else {
        return Ok(()); // does not exist yet
    };
    if !meta.is_dir() {
        return Err(tessera_dicom::io::OutputError::NotAFile {
            path: dir.to_path_buf(),
            kind: "not a folder",
        });
    }
    let entries = std::fs::read_dir(dir).map_err(|e| refuse(e.to_string()))?;
    let mut names = Vec::new();
    for entry in entries {
        names.push(entry.map_err(|e| refuse(e.to_string()))?.file_name());
    }
    if names.is_empty() {
        return Ok(());
    }
    let ours = |name: &std::ffi::OsStr| {
        let name = name.to_string_lossy();
        name == phantom::TRUTH_FILE || (name.starts_with("IMG") && name.ends_with(".dcm"))
    };
    if !names.iter().any(|n| n == phantom::TRUTH_FILE) {
        return Err(refuse(format!(
            "{} entries and no {}",
            names.len(),
            phantom::TRUTH_FILE
        )));
    }
    match names.iter().find(|n| !ours(n)) {
        Some(other) => Err(refuse(format!(
            "{} is not a phantom's file",
            other.to_string_lossy()
        ))),
        None => Ok(()),
    }
}

/// Writes the phantom into a staging folder beside `dir`, then swaps it in: a half-written
/// phantom is never seen, and a previous one is replaced as a whole.
pub(crate) fn write_folder(phantom: &phantom::Phantom, dir: &Path) -> anyhow::Result<()> {
    let staging = dir.with_extension(format!("tmp-{}", std::process::id()));
    let result = (|| -> anyhow::Result<()> {
        phantom::write_series(phantom, &staging)?;
        if dir.exists() {
            // Checked by `check_phantom_folder`: empty or a previous phantom.
            std::fs::remove_dir_all(dir).with_context(|| format!("replacing {}", dir.display()))?;
        }
        std::fs::rename(&staging, dir).with_context(|| format!("moving into {}", dir.display()))
    })();
    if result.is_err() && staging.exists() {
        let _ = std::fs::remove_dir_all(&staging);
    }
    result
}

/// `$TESSERA_CACHE_DIR`, else `$XDG_CACHE_HOME/tessera`, else `~/.cache/tessera`.
pub fn cache_root() -> PathBuf {
    let from_env = tessera_dicom::places::env_path;
    from_env("TESSERA_CACHE_DIR")
        .or_else(|| from_env("XDG_CACHE_HOME").map(|p| p.join("tessera")))
        .or_else(|| from_env("HOME").map(|p| Path::new(&p).join(".cache").join("tessera")))
        .unwrap_or_else(|| std::env::temp_dir().join("tessera-cache"))
}
