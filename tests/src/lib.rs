//! Helpers for Tessera's end-to-end tests: where the shared real data is, and how to say so
//! when it is missing.
//!
//! Real data lives in `../shared/data` beside the checkout (CI has it) and is never copied into
//! the repository. In CI (`CI` set) a missing folder fails the test with a clear message;
//! elsewhere the test prints why it is skipped and passes.

// Test helpers: failing loudly is their job.
#![allow(clippy::panic)]

use std::path::PathBuf;

pub mod bad_input;
pub mod fuzz;
pub mod orthanc;
pub mod slurm;
pub mod tls;

/// The shared data folder: `$TESSERA_DATA_DIR`, else `<workspace>/../shared/data`.
pub fn shared_data_dir() -> PathBuf {
    match std::env::var_os("TESSERA_DATA_DIR").filter(|v| !v.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/data"),
    }
}

/// `relative` under the shared data folder, or `None` (after saying why) outside CI.
///
/// # Panics
/// In CI, when the data is missing: a test that silently skips there would prove nothing.
pub fn shared_data(relative: &str) -> Option<PathBuf> {
    let path = shared_data_dir().join(relative);
    if path.exists() {
        return Some(path);
    }
    let message = format!(
        "real data {} is missing (set TESSERA_DATA_DIR or place ../shared/data beside the checkout)",
        path.display()
    );
    if std::env::var_os("CI").is_some() {
        panic!("{message}; CI must have it");
    }
    eprintln!("SKIPPED: {message}");
    None
}

/// Whether the project's ONNX Runtime is in place (the set-up script fetches it).
///
/// # Panics
/// In CI, when it is missing: the test command runs the set-up first, so it must be there.
pub fn runtime_available() -> bool {
    let found = tessera_infer::locate_runtime(None, tessera_infer::runtime::Flavour::Cpu).is_ok();
    if !found {
        let message = "ONNX Runtime not found: run ./scripts/setup.sh";
        if std::env::var_os("CI").is_some() {
            panic!("{message}; CI runs it before the tests");
        }
        eprintln!("SKIPPED: {message}");
    }
    found
}

/// The engine tests' small phantom (120x104x44 at 2.4/2.6/5.0 mm, seed 9, three nodules), on
/// which the test models find a handful of candidates.
///
/// # Panics
/// When the phantom cannot be generated (a bug in the generator).
pub fn small_phantom() -> tessera_dicom::volume::Volume {
    small_phantom_made().volume
}

/// [`small_phantom`] with its truth, to write as a series.
///
/// # Panics
/// When the phantom cannot be generated (a bug in the generator).
pub fn small_phantom_made() -> tessera_core::phantom::Phantom {
    let spec = tessera_core::phantom::PhantomSpec {
        seed: 9,
        size: [120, 104, 44],
        spacing_mm: [2.4, 2.6, 5.0],
        nodules: 3,
        noise_hu: 18.0,
        masses: 0,
    };
    match tessera_core::phantom::generate(&spec) {
        Ok(phantom) => phantom,
        Err(e) => panic!("the test phantom: {e}"),
    }
}

/// A command-line tool the test checks against (dcmtk's `dsrdump`, dicom3tools' `dciodvfy`,
/// ...), found on `PATH`, or `None` (after saying why) outside CI.
///
/// # Panics
/// In CI, when it is missing: the test command installs these tools (`scripts/tools.sh`).
pub fn tool(name: &str, package: &str) -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(name))
            .find(|candidate| candidate.is_file())
    });
    if found.is_none() {
        let message =
            format!("{name} not found (Debian package {package}; ./scripts/tools.sh installs it)");
        if std::env::var_os("CI").is_some() {
            panic!("{message}; CI's test command installs it");
        }
        eprintln!("SKIPPED: {message}");
    }
    found
}

/// The tiny test model's run on [`small_phantom`] (64x64x32 windows, threshold 0.2), as
/// det.json lists it: a handful of detections with known provenance.
///
/// # Panics
/// When the model or the run fails (check [`runtime_available`] first).
pub fn tiny_model_report() -> tessera_core::report::DetectionReport {
    use tessera_core::pipeline;
    use tessera_plan::model::{Model, shipped_models_dir};
    use tessera_plan::request::DetectConfig;
    let model = Model::load(&shipped_models_dir().join("tessera-test-tiny"))
        .unwrap_or_else(|e| panic!("the test model: {e}"));
    let mut config = DetectConfig::new([64, 64, 32]);
    config.score_threshold = Some(0.2);
    let cancel = tessera_plan::device::CancelToken::new();
    match pipeline::detect(&small_phantom(), &model, &config, &cancel, &mut |_| {}) {
        Ok(result) => tessera_core::report::DetectionReport::from_result(&result),
        Err(e) => panic!("the test model's run: {e}"),
    }
}
