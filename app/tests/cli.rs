//! The `tessera` binary as a user runs it: exit codes, messages, JSON.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;

use tessera_tests::{runtime_available, shared_data};

fn tessera() -> Command {
    Command::new(env!("CARGO_BIN_EXE_tessera"))
}

fn stdout_of(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr_of(output: &std::process::Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn info_json_on_a_phantom_reports_what_was_written() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("study");
    let made = tessera()
        .args([
            "phantom",
            "--seed",
            "4",
            "--size",
            "160x128x24",
            "--spacing",
            "1.25,1.5,5",
            "--nodules",
            "1",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", stderr_of(&made));
    let info = tessera()
        .args(["info", "--json"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(info.status.success(), "{}", stderr_of(&info));
    let rows: serde_json::Value = serde_json::from_str(&stdout_of(&info)).unwrap();
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    assert_eq!(row["modality"], "CT");
    assert_eq!(row["size"], serde_json::json!([160, 128, 24]));
    assert_eq!(row["spacing_mm"], serde_json::json!([1.25, 1.5, 5.0]));
    assert_eq!(row["files"], 24);
    assert_eq!(row["warnings"], serde_json::json!([]));
    assert!(row["series_uid"].as_str().unwrap().starts_with("2.25."));
    assert_eq!(row["description"], "Tessera chest phantom, seed 4");
}

#[test]
fn info_on_a_missing_path_fails_with_one_clear_line() {
    let output = tessera().args(["info", "/no/such/study"]).output().unwrap();
    assert!(!output.status.success());
    let err = stderr_of(&output);
    assert!(
        err.starts_with("error: scanning /no/such/study: cannot read /no/such/study"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
}

#[test]
fn info_on_a_folder_without_dicom_fails_and_lists_what_it_skipped() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "x").unwrap();
    let output = tessera().arg("info").arg(dir.path()).output().unwrap();
    assert!(!output.status.success());
    assert!(
        stdout_of(&output).contains("a.txt: no DICM marker"),
        "{}",
        stdout_of(&output)
    );
    assert!(
        stderr_of(&output).contains("no DICOM image series"),
        "{}",
        stderr_of(&output)
    );
}

#[test]
fn info_text_on_the_ge_series_shows_tilt() {
    let Some(dir) = shared_data("dcm_qa_ct/GE") else {
        return;
    };
    let output = tessera().arg("info").arg(&dir).output().unwrap();
    assert!(output.status.success(), "{}", stderr_of(&output));
    let text = stdout_of(&output);
    assert!(text.contains("warning  gantry tilt 18.5"), "{text}");
    assert!(text.contains("size     512x512x"), "{text}");
}

#[test]
fn runtime_loads_the_project_library() {
    if !runtime_available() {
        return;
    }
    let output = tessera()
        .env_remove("ORT_DYLIB_PATH")
        .arg("runtime")
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr_of(&output));
    let text = stdout_of(&output);
    assert!(text.starts_with("ONNX Runtime 1.31.1\n"), "{text}");
    assert!(text.contains("found via: project runtime folder"), "{text}");
}

#[test]
fn runtime_error_names_the_bad_path_and_the_fix() {
    let output = tessera()
        .env("ORT_DYLIB_PATH", "/nope/libonnxruntime.so")
        .arg("runtime")
        .output()
        .unwrap();
    assert!(!output.status.success());
    let err = stderr_of(&output);
    assert!(
        err.contains("/nope/libonnxruntime.so (ORT_DYLIB_PATH) does not exist"),
        "{err}"
    );
    assert!(err.contains("./scripts/setup.sh"), "{err}");
}

#[test]
fn phantom_rejects_a_bad_size_before_doing_anything() {
    let dir = tempfile::tempdir().unwrap();
    let output = tessera()
        .args(["phantom", "--size", "512x512", "--out"])
        .arg(dir.path().join("x"))
        .output()
        .unwrap();
    assert!(!output.status.success());
    let err = stderr_of(&output);
    assert!(
        err.contains("'512x512' is not a size like 512x512x64"),
        "{err}"
    );
    assert!(!dir.path().join("x").exists());
}
