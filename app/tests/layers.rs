//! The app's module rules that Cargo cannot check (ARCHITECTURE.md): `cmd` and `gui` never
//! import each other, `common` imports neither, and only `cmd` reaches the inference layer
//! (the viewer asks the pipeline to run, on its worker thread; it never holds a session).

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used)]

use std::path::Path;

/// Every `.rs` file under `dir`, with its text.
fn sources(dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(sources(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push((
                path.display().to_string(),
                std::fs::read_to_string(&path).unwrap(),
            ));
        }
    }
    out
}

/// The files under `src/{module}` that mention one of `forbidden`.
fn offenders(module: &str, forbidden: &[&str]) -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src")
        .join(module);
    let files = sources(&dir);
    assert!(!files.is_empty(), "no sources under {}", dir.display());
    files
        .into_iter()
        .filter(|(_, text)| forbidden.iter().any(|f| text.contains(f)))
        .map(|(path, _)| path)
        .collect()
}

#[test]
fn cmd_gui_and_common_keep_to_their_layers() {
    assert_eq!(
        offenders("gui", &["crate::cmd", "super::super::cmd"]),
        Vec::<String>::new()
    );
    assert_eq!(
        offenders("cmd", &["crate::gui", "super::super::gui"]),
        Vec::<String>::new()
    );
    assert_eq!(
        offenders(
            "common",
            &["crate::cmd", "crate::gui", "super::cmd", "super::gui"]
        ),
        Vec::<String>::new()
    );
}

#[test]
fn only_cmd_reaches_the_inference_layer() {
    for module in ["gui", "common"] {
        assert_eq!(
            offenders(module, &["tessera_infer", "tessera-infer"]),
            Vec::<String>::new(),
            "{module} reaches ONNX Runtime sessions; it must go through tessera_core::pipeline"
        );
    }
    // The check can fail: the one module that loads a runtime library is seen.
    assert!(!offenders("cmd", &["tessera_infer"]).is_empty());
}
