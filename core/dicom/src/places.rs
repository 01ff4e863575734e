//! Where Tessera's own files are (the ONNX Runtime library, the shipped models), looked for
//! from the running executable, never from where it was built: beside it, in its install
//! prefix (`PREFIX/bin/tessera` with `PREFIX/lib/tessera/`, as `scripts/install.sh` lays it
//! out), then in a checkout above it (a `target/` build). A copied or installed binary so
//! works wherever its files went, and a moved checkout takes its files with it.

use std::path::PathBuf;

/// The running executable's folder, when the platform says.
fn exe_dir() -> Option<PathBuf> {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(std::path::Path::to_path_buf))
}

/// Where to look for one of Tessera's files or folders, most preferred first: as installed
/// ([`installed`]), then in a checkout ([`in_checkouts`]).
pub fn candidates(beside: &str, installed_as: &str, in_checkout: &str) -> Vec<PathBuf> {
    let mut out = installed(beside, installed_as);
    out.extend(in_checkouts(in_checkout));
    out
}

/// `beside` the executable, then `PREFIX/lib/tessera/installed_as` (the executable in
/// `PREFIX/bin`).
pub fn installed(beside: &str, installed_as: &str) -> Vec<PathBuf> {
    let Some(dir) = exe_dir() else {
        return Vec::new();
    };
    let mut out = vec![dir.join(beside)];
    if let Some(prefix) = dir.parent() {
        out.push(prefix.join("lib/tessera").join(installed_as));
    }
    out
}

/// `in_checkout` in each folder above the executable (a build in a checkout's `target/`).
pub fn in_checkouts(in_checkout: &str) -> Vec<PathBuf> {
    exe_dir()
        .map(|dir| dir.ancestors().map(|a| a.join(in_checkout)).collect())
        .unwrap_or_default()
}

/// The user's data folder for Tessera: `$XDG_DATA_HOME/tessera` (default
/// `~/.local/share/tessera`); `None` without a home.
pub fn user_data_dir() -> Option<PathBuf> {
    env_path("XDG_DATA_HOME")
        .or_else(|| env_path("HOME").map(|h| h.join(".local/share")))
        .map(|d| d.join("tessera"))
}

/// The environment variable `name` as a path, when it is set and not empty (an empty
/// `XDG_*` variable means "unset" in the XDG specification).
pub fn env_path(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}
