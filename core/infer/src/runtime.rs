//! Finds and loads the ONNX Runtime shared library.
//!
//! `ort` is built with `load-dynamic`: the library comes from the PyPI wheel that the set-up
//! script unpacks into `.runtime/` (no CDN is reachable here). Resolution order: an explicit path
//! (CLI/GUI option), then `ORT_DYLIB_PATH`, then the runtime folders found from the executable
//! ([`project_runtime_candidates`]). Loading uses
//! `ort::init_from`, which returns an error; `ort`'s implicit loader would panic instead.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The ONNX Runtime version this build expects (ort 2.0.0-rc.15, API 31).
pub const EXPECTED_VERSION: &str = "1.31.1";

/// The library file name on this platform.
pub fn library_file_name() -> String {
    if cfg!(target_os = "windows") {
        "onnxruntime.dll".into()
    } else if cfg!(target_os = "macos") {
        format!("libonnxruntime.{EXPECTED_VERSION}.dylib")
    } else {
        format!("libonnxruntime.so.{EXPECTED_VERSION}")
    }
}

/// Where the library path came from, for messages and provenance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuntimeSource {
    Explicit,
    EnvVar,
    ProjectRuntime,
}

impl std::fmt::Display for RuntimeSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Explicit => "--ort-lib option",
            Self::EnvVar => "ORT_DYLIB_PATH",
            Self::ProjectRuntime => "the runtime folder found from the executable",
        })
    }
}

/// A loaded runtime.
#[derive(Debug, Clone)]
pub struct Runtime {
    pub path: PathBuf,
    pub source: RuntimeSource,
    /// As the library reports it, e.g. `1.31.1`.
    pub version: String,
    /// CUDA libraries preloaded from the GPU runtime folder (0 for the CPU build).
    pub cuda_libraries: usize,
    /// The process-wide ONNX Runtime environment that sessions are built in.
    pub environment: ort::environment::Environment,
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum RuntimeError {
    #[error(
        "ONNX Runtime library not found (looked in: {}). Fix: run ./scripts/setup.sh in the \
         checkout to fetch it into .runtime/ (./scripts/install.sh installs it beside an installed \
         binary), or set ORT_DYLIB_PATH (or --ort-lib) to a {} file",
        looked.join(", "),
        library_file_name()
    )]
    NotFound { looked: Vec<String> },
    #[error("ONNX Runtime at {} ({source_kind}) does not exist. Fix: correct the path, or unset it to use the project runtime from ./scripts/setup.sh", path.display())]
    Missing {
        path: PathBuf,
        source_kind: RuntimeSource,
    },
    #[error("cannot load ONNX Runtime from {} ({source_kind})", path.display())]
    Load {
        path: PathBuf,
        source_kind: RuntimeSource,
        /// Shared: the error is kept for every session of the process.
        #[source]
        source: std::sync::Arc<dyn std::error::Error + Send + Sync>,
    },
}

/// Which build of ONNX Runtime: the CPU one (`.runtime/onnxruntime`), or the GPU one with the
/// CUDA and TensorRT providers (`.runtime/onnxruntime-gpu`, from `scripts/setup.sh --gpu`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavour {
    Cpu,
    Gpu,
}

/// The runtime files `scripts/setup.sh` fetches, most preferred first: the GPU build when
/// asked for, then the CPU build. Each is looked for beside the executable, in its install
/// prefix (`lib/tessera/`, from `scripts/install.sh`), in the user's data folder
/// (`~/.local/share/tessera/runtime/`), then in a checkout above it (`.runtime/`): never
/// where the binary was built, so a copied binary or a moved checkout works.
pub fn project_runtime_candidates(flavour: Flavour) -> Vec<PathBuf> {
    let name = library_file_name();
    let folders: &[&str] = match flavour {
        Flavour::Gpu => &["onnxruntime-gpu", "onnxruntime"],
        Flavour::Cpu => &["onnxruntime"],
    };
    let mut out = Vec::new();
    for folder in folders {
        let user = tessera_dicom::places::user_data_dir().map(|u| u.join("runtime").join(folder));
        let dirs = tessera_dicom::places::installed(folder, folder)
            .into_iter()
            .chain(user)
            .chain(tessera_dicom::places::in_checkouts(&format!(
                ".runtime/{folder}"
            )));
        out.extend(dirs.map(|dir| dir.join(&name)));
    }
    out.dedup();
    out
}

/// Resolves the library path without loading it.
pub fn locate_runtime(
    explicit: Option<&Path>,
    flavour: Flavour,
) -> Result<(PathBuf, RuntimeSource), RuntimeError> {
    if let Some(path) = explicit {
        return checked(path.to_path_buf(), RuntimeSource::Explicit);
    }
    if let Some(path) = std::env::var_os("ORT_DYLIB_PATH").filter(|p| !p.is_empty()) {
        return checked(PathBuf::from(path), RuntimeSource::EnvVar);
    }
    let candidates = project_runtime_candidates(flavour);
    candidates
        .iter()
        .find(|p| p.is_file())
        .map(|p| (p.clone(), RuntimeSource::ProjectRuntime))
        .ok_or_else(|| RuntimeError::NotFound {
            looked: std::iter::once("--ort-lib (not given)".to_string())
                .chain(std::iter::once("ORT_DYLIB_PATH (not set)".to_string()))
                .chain(candidates.iter().map(|p| p.display().to_string()))
                .collect(),
        })
}

fn checked(path: PathBuf, source: RuntimeSource) -> Result<(PathBuf, RuntimeSource), RuntimeError> {
    if path.is_file() {
        Ok((path, source))
    } else {
        Err(RuntimeError::Missing {
            path,
            source_kind: source,
        })
    }
}

static LOADED: OnceLock<Result<Runtime, RuntimeError>> = OnceLock::new();

/// Loads ONNX Runtime once per process; later calls return the first outcome (so a process
/// that loaded the CPU build first cannot switch to the GPU one).
pub fn init_runtime(explicit: Option<&Path>, flavour: Flavour) -> Result<Runtime, RuntimeError> {
    LOADED
        .get_or_init(|| {
            let (path, source) = locate_runtime(explicit, flavour)?;
            // The CUDA provider finds its libraries among those already loaded.
            let cuda_libraries = match (flavour, path.parent()) {
                (Flavour::Gpu, Some(dir)) => preload_cuda_libraries(&dir.join("cuda")),
                _ => 0,
            };
            // Loads the library, checks its API version, and makes the one environment that
            // every session of this process shares.
            let load_error = |e: Box<dyn std::error::Error + Send + Sync>| RuntimeError::Load {
                path: path.clone(),
                source_kind: source.clone(),
                source: e.into(),
            };
            let environment = ort::init_from(&path)
                .map_err(|e| load_error(e.into()))?
                .with_name("tessera")
                .build()
                .map_err(|e| load_error(e.into()))?;
            let version = library_version(&path).unwrap_or_else(|| "unknown".into());
            Ok(Runtime {
                path,
                source,
                version,
                environment,
                cuda_libraries,
            })
        })
        .clone()
}

/// The version the library reports through `OrtGetApiBase()->GetVersionString()`.
///
/// `ort` reads it while loading but does not expose it, and the build-info string of the PyPI
/// build says only `git-branch=HEAD`; outputs must name the real version, so ask the library.
#[allow(unsafe_code)]
fn library_version(path: &Path) -> Option<String> {
    // SAFETY: the library was just loaded by `ort::init_from` from this same path, so opening it
    // again only takes another reference; `OrtGetApiBase` has this exact C signature in every
    // ONNX Runtime release, and `GetVersionString` returns a static NUL-terminated string.
    unsafe {
        let library = libloading::Library::new(path).ok()?;
        let get_api_base: libloading::Symbol<
            '_,
            unsafe extern "system" fn() -> *const ort::sys::OrtApiBase,
        > = library.get(b"OrtGetApiBase").ok()?;
        let base = get_api_base();
        if base.is_null() {
            return None;
        }
        let text = ((*base).GetVersionString)();
        if text.is_null() {
            return None;
        }
        Some(
            std::ffi::CStr::from_ptr(text)
                .to_string_lossy()
                .into_owned(),
        )
    }
}

/// Loads every CUDA library that `scripts/setup.sh --gpu` unpacked under `dir` (the pip
/// layout `nvidia/*/lib/*.so*`), retrying until no more load: each pass loads those whose
/// dependencies are already in, so the order sorts itself out. Returns how many loaded.
#[allow(unsafe_code)]
pub fn preload_cuda_libraries(dir: &Path) -> usize {
    let mut pending: Vec<PathBuf> = std::fs::read_dir(dir.join("nvidia"))
        .into_iter()
        .flatten()
        .filter_map(Result::ok)
        .flat_map(|component| {
            std::fs::read_dir(component.path().join("lib"))
                .into_iter()
                .flatten()
        })
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().contains(".so"))
        })
        .collect();
    pending.sort();
    let mut loaded = 0;
    loop {
        let before = pending.len();
        pending.retain(|path| {
            // SAFETY: these are the NVIDIA runtime libraries from their own wheels; loading one
            // runs only its initialisers. The handle is leaked on purpose: the libraries must
            // stay loaded for the CUDA provider, for the life of the process.
            match unsafe { libloading::Library::new(path) } {
                Ok(library) => {
                    std::mem::forget(library);
                    loaded += 1;
                    false
                }
                Err(_) => true,
            }
        });
        if pending.is_empty() || pending.len() == before {
            return loaded;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_missing_path_is_refused_with_the_path() {
        let err = locate_runtime(
            Some(Path::new("/nonexistent/libonnxruntime.so")),
            Flavour::Cpu,
        )
        .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("/nonexistent/libonnxruntime.so"), "{text}");
        assert!(text.contains("--ort-lib"), "{text}");
    }
}
