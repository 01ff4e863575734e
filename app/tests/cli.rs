//! The `tessera` binary as a user runs it: exit codes, messages, JSON.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
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
    let info: serde_json::Value = serde_json::from_str(&stdout_of(&info)).unwrap();
    assert_eq!(info["files_seen"], 25);
    // truth.json is reported, with its reason and kind.
    assert_eq!(info["skipped"].as_array().unwrap().len(), 1);
    assert_eq!(info["skipped"][0]["kind"], "not_dicom");
    let rows = info["series"].as_array().unwrap();
    assert_eq!(rows.len(), 1);
    let row = &rows[0];
    assert_eq!(row["modality"], "CT");
    assert_eq!(row["size"], serde_json::json!([160, 128, 24]));
    assert_eq!(row["spacing_mm"], serde_json::json!([1.25, 1.5, 5.0]));
    assert_eq!(row["files"], 24);
    assert_eq!(row["warnings"], serde_json::json!([]));
    assert_eq!(row["filled_slices"], serde_json::json!([]));
    assert_eq!(row["unreadable_files"], serde_json::json!([]));
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
    // Its gaps are uneven: refused as a volume unless gaps are allowed, and said so.
    let output = tessera().arg("info").arg(&dir).output().unwrap();
    assert!(output.status.success(), "{}", stderr_of(&output));
    let text = stdout_of(&output);
    assert!(text.contains("error    series"), "{text}");
    assert!(text.contains("uneven slice spacing"), "{text}");
    assert!(text.contains("--allow-gaps"), "{text}");
    let output = tessera()
        .args(["info", "--allow-gaps"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr_of(&output));
    let text = stdout_of(&output);
    assert!(text.contains("warning  gantry tilt 18.5"), "{text}");
    assert!(text.contains("size     512x512x"), "{text}");
    assert!(
        text.contains("is interpolated (no file at this position)"),
        "{text}"
    );
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
    assert!(
        text.contains("found via: the runtime folder found from the executable"),
        "{text}"
    );
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

fn test_model() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets/models/tessera-test-tiny")
}

fn small_phantom(dir: &Path, size: &str) -> PathBuf {
    let out = dir.join("study");
    let made = tessera()
        .args([
            "phantom",
            "--seed",
            "2",
            "--size",
            size,
            "--spacing",
            "2.5,2.5,5",
            "--nodules",
            "2",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", stderr_of(&made));
    out
}

#[test]
fn detect_writes_the_documented_json_and_csv() {
    if !runtime_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let study = small_phantom(dir.path(), "128x112x40");
    let (json, csv) = (dir.path().join("det.json"), dir.path().join("luna.csv"));
    let output = tessera()
        .arg("detect")
        .arg(&study)
        .arg("--model")
        .arg(test_model())
        .args([
            "--patch",
            "64x64x24",
            "--blend",
            "halo",
            "--score-threshold",
            "0.25",
            "--out",
        ])
        .arg(&json)
        .arg("--csv")
        .arg(&csv)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr_of(&output));
    assert!(
        stderr_of(&output).contains("plan: volume 128x112x40"),
        "{}",
        stderr_of(&output)
    );
    let det: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(det["schema"], "tessera.detections/1");
    assert_eq!(det["config"]["patch"], serde_json::json!([64, 64, 24]));
    assert_eq!(det["config"]["blend"], "halo");
    assert_eq!(det["config"]["device"], "cpu");
    assert_eq!(det["config"]["precision"], "fp32");
    assert_eq!(det["runtime"]["onnxruntime"], "1.31.1");
    assert_eq!(det["runtime"]["execution_provider"], "CPUExecutionProvider");
    assert_eq!(det["model"]["name"], "tessera-test-tiny");
    assert_eq!(det["model"]["sha256"].as_str().unwrap().len(), 64);
    // x: [0,64) [56,120) [112,128); y: [0,64) [56,112); z: [0,24) [16,40).
    assert_eq!(det["stats"]["windows"], 12);
    assert_eq!(
        det["plan"]["windows_per_axis"],
        serde_json::json!([3, 2, 2])
    );
    assert!(det["stats"]["peak_memory_bytes"].as_u64().unwrap() > 0);
    assert_eq!(det["stats"]["memory_source"], "process_rss");
    // The test model's card records no memory: nothing predicted, nothing exceeded.
    assert!(det["stats"]["baseline_memory_bytes"].as_u64().unwrap() > 0);
    assert_eq!(det["plan"]["predicted_peak_bytes"], serde_json::Value::Null);
    assert_eq!(det["stats"]["prediction_exceeded"], false);
    let detections = det["detections"].as_array().unwrap();
    assert!(!detections.is_empty());
    for d in detections {
        for key in [
            "score",
            "center_lps_mm",
            "size_mm",
            "box_voxel",
            "crosses_seam",
        ] {
            assert!(d.get(key).is_some(), "detection lacks {key}: {d}");
        }
    }
    let csv = std::fs::read_to_string(&csv).unwrap();
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some("seriesuid,coordX,coordY,coordZ,probability")
    );
    assert_eq!(lines.count(), detections.len());
}

#[test]
fn detect_runs_the_cards_rescoring_stage_unless_told_not_to() {
    if !runtime_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let study = small_phantom(dir.path(), "128x112x40");
    let model = test_model().with_file_name("tessera-test-rescore");
    let detect = |out: &Path, extra: &[&str]| {
        let output = tessera()
            .arg("detect")
            .arg(&study)
            .arg("--model")
            .arg(&model)
            .args(["--patch", "64x64x24", "--score-threshold", "0", "--out"])
            .arg(out)
            .args(extra)
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", stderr_of(&output));
        let json = std::fs::read(out).unwrap();
        (
            stdout_of(&output),
            serde_json::from_slice::<serde_json::Value>(&json).unwrap(),
        )
    };
    let (stdout, det) = detect(&dir.path().join("rescored.json"), &[]);
    // The card rescores its 5 best candidates: exactly 5 detections, each with both scores.
    assert!(stdout.contains("5 candidates rescored in"), "{stdout}");
    assert_eq!(det["config"]["rescore"], true);
    assert_eq!(det["stats"]["rescored"], 5);
    assert_eq!(det["model"]["rescore_sha256"].as_str().unwrap().len(), 64);
    let detections = det["detections"].as_array().unwrap();
    assert_eq!(detections.len(), 5);
    assert!(detections.iter().all(|d| d["detector_score"].is_f64()));
    let (stdout, det) = detect(&dir.path().join("alone.json"), &["--no-rescore"]);
    assert!(!stdout.contains("rescored"), "{stdout}");
    assert_eq!(det["config"]["rescore"], false);
    assert_eq!(det["stats"]["rescored"], 0);
    assert!(det["model"].get("rescore_sha256").is_none());
    let detections = det["detections"].as_array().unwrap();
    assert!(detections.len() > 5);
    assert!(detections.iter().all(|d| d.get("detector_score").is_none()));
}

#[test]
fn detect_runs_the_cards_coarse_pass_unless_told_not_to() {
    if !runtime_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    // 320 x 280 x 195 mm: 255x223x157 on the shipped detector's grid, 128x112x79 on its
    // coarse one, which this patch tiles in z too.
    let study = small_phantom(dir.path(), "128x112x40");
    let detect = |name: &str, extra: &[&str]| {
        let out = dir.path().join(name);
        let output = tessera()
            .arg("detect")
            .arg(&study)
            .args(["--patch", "256x224x64", "--threads", "2", "--out"])
            .arg(&out)
            .args(extra)
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", stderr_of(&output));
        let json = std::fs::read(&out).unwrap();
        (
            stdout_of(&output),
            stderr_of(&output),
            serde_json::from_slice::<serde_json::Value>(&json).unwrap(),
        )
    };
    let (stdout, stderr, det) = detect("coarse.json", &[]);
    assert!(stdout.contains("a coarse pass at 2.5 mm"), "{stdout}");
    assert!(
        stderr.contains("coarse pass for large lesions: 2 window(s) at 2.50 mm"),
        "{stderr}"
    );
    assert_eq!(det["config"]["coarse_pass"], true);
    let coarse = &det["stats"]["coarse"];
    assert_eq!(coarse["spacing_mm"], serde_json::json!([2.5, 2.5, 2.5]));
    assert_eq!(coarse["size"], serde_json::json!([128, 112, 79]));
    assert_eq!(coarse["windows"], 2);
    // What the run holds for the study, in its predicted peak: the main maps (7 channels at
    // stride 2) from the first window on; the coarse grid and its maps while the pass runs.
    assert_eq!(det["stats"]["held_memory_bytes"], 128 * 112 * 79 * 7 * 4);
    let coarse_bytes = 128 * 112 * 79 * 4 + 64 * 56 * 40 * 7 * 4;
    assert_eq!(coarse["held_memory_bytes"], coarse_bytes);
    // Two windows of the patch's 64 slices across its 80 (padded) ones.
    assert_eq!(coarse["largest_window_voxels"], 128 * 112 * 64);
    let stats = &det["stats"];
    assert!(stats["windows_peak_memory_bytes"].as_u64() <= stats["peak_memory_bytes"].as_u64());
    assert!(stats["windows_peak_memory_bytes"].as_u64() > stats["baseline_memory_bytes"].as_u64());
    let (stdout, stderr, det) = detect("main.json", &["--no-coarse-pass"]);
    assert!(
        !stdout.contains("coarse") && !stderr.contains("coarse"),
        "{stdout}{stderr}"
    );
    assert_eq!(det["config"]["coarse_pass"], false);
    assert!(det["stats"].get("coarse").is_none());
}

#[test]
fn detect_refuses_a_single_pass_plan_with_exit_code_2_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let study = small_phantom(dir.path(), "96x96x24");
    let json = dir.path().join("det.json");
    let output = tessera()
        .arg("detect")
        .arg(&study)
        .arg("--model")
        .arg(test_model())
        .args(["--patch", "128x128x32", "--out"])
        .arg(&json)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2), "{}", stderr_of(&output));
    let err = stderr_of(&output);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(
        err.starts_with("error: plan refused: patch 128x128x32 covers the whole volume 96x96x24"),
        "{err}"
    );
    assert!(!json.exists());
}

#[test]
fn ctrl_c_cancels_within_a_window_and_writes_no_output() {
    if !runtime_available() {
        return;
    }
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let study = small_phantom(dir.path(), "256x256x96");
    let json = dir.path().join("det.json");
    // Hundreds of small windows: the run lasts seconds, long enough to interrupt.
    let mut child = tessera()
        .arg("detect")
        .arg(&study)
        .arg("--model")
        .arg(test_model())
        .args(["--patch", "24x24x12", "--threads", "1", "--out"])
        .arg(&json)
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while stderr.read_line(&mut line).unwrap() > 0 && !line.contains("plan:") {
        line.clear();
    }
    assert!(line.contains("plan:"), "no plan line before the run");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (status, rest) = signal_and_wait(child, stderr, "-INT");
    assert_eq!(status.code(), Some(130), "{rest}");
    assert!(rest.contains("cancelled: no output written"), "{rest}");
    assert!(!json.exists());
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        leftovers.len(),
        1,
        "only the study folder should remain: {leftovers:?}"
    );
}

/// Sends `signal` (`-INT`, `-TERM`) to `child` and waits for it, reading the rest of its stderr
/// meanwhile: a parent that stops reading a child's progress lines fills the pipe and blocks
/// the child before it can see the signal.
fn signal_and_wait(
    mut child: std::process::Child,
    mut stderr: impl std::io::Read + Send + 'static,
    signal: &str,
) -> (std::process::ExitStatus, String) {
    let killed = Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let reader = std::thread::Builder::new()
        .name("stderr-reader".into())
        .spawn(move || {
            let mut rest = String::new();
            std::io::Read::read_to_string(&mut stderr, &mut rest).map(|_| rest)
        })
        .unwrap();
    let status = child.wait().unwrap();
    (status, reader.join().unwrap().unwrap())
}

fn detect_to(study: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    tessera()
        .arg("detect")
        .arg(study)
        .arg("--model")
        .arg(test_model())
        .args(["--score-threshold", "0.28"])
        .args(extra)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap()
}

#[test]
fn parity_exits_0_for_identical_detections_and_1_for_drift() {
    if !runtime_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let study = small_phantom(dir.path(), "128x112x40");
    let (whole, tiled) = (dir.path().join("whole.json"), dir.path().join("tiled.json"));
    assert!(
        detect_to(
            &study,
            &whole,
            &["--patch", "128x112x40", "--allow-single-pass"]
        )
        .status
        .success()
    );
    assert!(
        detect_to(&study, &tiled, &["--patch", "64x64x24"])
            .status
            .success()
    );
    let same = tessera()
        .arg("parity")
        .arg(&whole)
        .arg(&tiled)
        .output()
        .unwrap();
    assert_eq!(same.status.code(), Some(0), "{}", stdout_of(&same));
    assert!(
        stdout_of(&same).starts_with("# Parity: PASS"),
        "{}",
        stdout_of(&same)
    );

    // One score moved by 1e-3: over the default tolerance of 1e-4.
    let mut det: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&tiled).unwrap()).unwrap();
    let score = det["detections"][0]["score"].as_f64().unwrap();
    det["detections"][0]["score"] = serde_json::json!(score + 1e-3);
    let drifted = dir.path().join("drifted.json");
    std::fs::write(&drifted, serde_json::to_vec(&det).unwrap()).unwrap();
    let differ = tessera()
        .args(["parity", "--json"])
        .arg(&whole)
        .arg(&drifted)
        .output()
        .unwrap();
    assert_eq!(differ.status.code(), Some(1));
    let parity: serde_json::Value = serde_json::from_str(&stdout_of(&differ)).unwrap();
    assert_eq!(parity["within_tolerance"], false);
    let max = parity["max_score_difference"].as_f64().unwrap();
    assert!((max - 1e-3).abs() < 1e-6, "{max}");

    // B lacks A's weakest detection and its threshold sits just under that score: within the
    // score tolerance it is a threshold crossing (pass); farther below, a missing finding.
    let weakest = |threshold_below: f64| {
        let reference: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&whole).unwrap()).unwrap();
        let mut det = reference.clone();
        let list = det["detections"].as_array_mut().unwrap();
        let last = list.pop().unwrap();
        let score = last["score"].as_f64().unwrap();
        det["config"]["score_threshold"] = serde_json::json!(score - threshold_below);
        let path = dir.path().join(format!("crossing-{threshold_below}.json"));
        std::fs::write(&path, serde_json::to_vec(&det).unwrap()).unwrap();
        let out = tessera()
            .args(["parity", "--json"])
            .arg(&whole)
            .arg(&path)
            .output()
            .unwrap();
        let parity: serde_json::Value = serde_json::from_str(&stdout_of(&out)).unwrap();
        (
            out.status.code(),
            parity["crossing_a"].as_array().unwrap().len(),
        )
    };
    assert_eq!(weakest(5e-5), (Some(0), 1));
    assert_eq!(weakest(2e-4), (Some(1), 0));
}

#[test]
fn sweep_writes_the_report_csv_chart_and_memory_model() {
    if !runtime_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let study = small_phantom(dir.path(), "128x112x40");
    let out = dir.path().join("sweep");
    let output = tessera()
        .arg("sweep")
        .arg(&study)
        .arg("--model")
        .arg(test_model())
        .args([
            "--patches",
            "128x112x24,64x64x24",
            "--memory-budget",
            "8GiB",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr_of(&output));
    for file in [
        "report.md",
        "sweep.csv",
        "memory.svg",
        "memory.png",
        "memory_model.json",
    ] {
        assert!(out.join(file).is_file(), "{file} missing");
    }
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        report.contains("| 128x112x40 (reference) | 1 |"),
        "{report}"
    );
    assert_eq!(report.matches("| match: all ").count(), 2, "{report}");
    assert!(report.contains("ONNX Runtime 1.31.1"), "{report}");
    let csv = std::fs::read_to_string(out.join("sweep.csv")).unwrap();
    assert_eq!(csv.lines().count(), 4);
    // The fitted model bounds every run it was fitted on, and by no more than 10 %.
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let column = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let (peak, predicted) = (column("peak_memory_bytes"), column("predicted_peak_bytes"));
    for line in csv.lines().skip(1) {
        let cells: Vec<&str> = line.split(',').collect();
        let peak: u64 = cells[peak].parse().unwrap();
        let predicted: u64 = cells[predicted].parse().unwrap();
        assert!(predicted >= peak, "under-predicted: {line}");
        let over = (predicted - peak) as f64 / peak as f64;
        assert!(over <= 0.10, "over-predicted by {over:.3}: {line}");
    }
    assert!(
        report.contains(
            "an upper bound over every pass of these runs, calibrated on 3 runs, which peaked 0 to "
        ),
        "{report}"
    );
    let png = std::fs::read(out.join("memory.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let calibration: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("memory_model.json")).unwrap()).unwrap();
    assert!(
        calibration["model"]["bytes_per_voxel"]
            .as_f64()
            .unwrap()
            .is_finite()
    );

    // The calibration drives the budget: a budget below every prediction is refused at plan time.
    let refused = detect_to(
        &study,
        &dir.path().join("never.json"),
        &[
            "--memory-budget",
            "1MiB",
            "--memory-model",
            out.join("memory_model.json").to_str().unwrap(),
        ],
    );
    assert_eq!(refused.status.code(), Some(2), "{}", stderr_of(&refused));
    assert!(
        stderr_of(&refused).contains("no patch fits the memory budget of 1.00 MiB"),
        "{}",
        stderr_of(&refused)
    );
    assert!(!dir.path().join("never.json").exists());
}

/// The sweep calibrates each pass on what it holds: the main windows above the maps, the
/// coarse pass (which runs after them) above the maps and its own grid and maps, the steps
/// after the passes above the maps and the lung field.
#[test]
fn sweep_calibrates_each_pass_and_the_steps_after_them_on_what_they_hold() {
    if !runtime_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let study = small_phantom(dir.path(), "128x112x40");
    let out = dir.path().join("sweep");
    let output = tessera()
        .arg("sweep")
        .arg(&study)
        .args(["--patches", "256x224x64", "--threads", "2", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr_of(&output));
    let read = |path: PathBuf| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
    };
    let calibration = read(out.join("memory_model.json"));
    assert_eq!(calibration["model"]["calibration_runs"], 2);
    let points = calibration["points"].as_array().unwrap();
    // A pair per run, the main windows' point first.
    assert_eq!(points.len(), 4);
    let mut stages = Vec::new();
    for (run, pair) in ["reference.json", "256_224_64.json"]
        .iter()
        .zip(points.chunks(2))
    {
        let det = read(out.join("runs").join(run));
        let stats = &det["stats"];
        let number = |v: &serde_json::Value| v.as_u64().unwrap();
        let base = number(&stats["baseline_memory_bytes"]) + number(&stats["held_memory_bytes"]);
        let coarse = &stats["coarse"];
        let main_peak = number(&stats["windows_peak_memory_bytes"]);
        let coarse_peak = number(&coarse["peak_memory_bytes"]);
        assert_eq!(
            number(&stats["peak_memory_bytes"]),
            main_peak.max(coarse_peak)
        );
        assert_eq!(pair[0][1], main_peak.saturating_sub(base), "{run}");
        let coarse_held = number(&coarse["held_memory_bytes"]);
        assert_eq!(
            pair[1],
            serde_json::json!([
                coarse["largest_window_voxels"],
                coarse_peak.saturating_sub(base + coarse_held)
            ]),
            "{run}"
        );
        // The steps after the passes, above what they hold (the maps, the lung field).
        let stages_held = number(&stats["stages_held_memory_bytes"]);
        assert_eq!(stages_held, 255 * 223 * 157, "a byte per voxel of the grid");
        stages.push(number(&stats["stages_peak_memory_bytes"]).saturating_sub(base + stages_held));
    }
    // The most, plus the spread between runs or 1 % of it.
    let (least, most) = (*stages.iter().min().unwrap(), *stages.iter().max().unwrap());
    let allowance = (most - least).max(most / 100);
    assert_eq!(
        calibration["model"]["stages_bytes"],
        (most + allowance) as f64
    );
    assert!(least > 0);
}

#[test]
fn a_run_over_its_predicted_peak_says_so() {
    if !runtime_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let study = small_phantom(dir.path(), "96x96x24");
    // A calibration that promises one byte above the baseline: every real run exceeds it.
    let calibration = dir.path().join("memory_model.json");
    let file = serde_json::json!({
        "model_name": "tessera-test-tiny",
        "model_sha256": "",
        "device": "cpu",
        "allocator": "none",
        "model": { "fixed_bytes": 1.0, "bytes_per_voxel": 0.0 },
        "points": []
    });
    std::fs::write(&calibration, file.to_string()).unwrap();
    let json = dir.path().join("det.json");
    let output = detect_to(
        &study,
        &json,
        &[
            "--patch",
            "64x64x24",
            "--memory-model",
            calibration.to_str().unwrap(),
        ],
    );
    assert!(output.status.success(), "{}", stderr_of(&output));
    let det: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let baseline = det["stats"]["baseline_memory_bytes"].as_u64().unwrap();
    // What the run holds for the study (its stitched maps) is part of the prediction too.
    let held = det["stats"]["held_memory_bytes"].as_u64().unwrap();
    assert!(held > 0);
    assert_eq!(det["plan"]["predicted_peak_bytes"], baseline + held + 1);
    assert_eq!(det["stats"]["prediction_exceeded"], true);
    let err = stderr_of(&output);
    assert!(
        err.contains("went over the predicted") && err.contains("recalibrate"),
        "{err}"
    );
}

#[test]
fn a_budget_without_any_memory_model_says_how_to_calibrate() {
    let dir = tempfile::tempdir().unwrap();
    let study = small_phantom(dir.path(), "96x96x24");
    let output = detect_to(
        &study,
        &dir.path().join("x.json"),
        &["--memory-budget", "8GiB"],
    );
    assert_eq!(output.status.code(), Some(1));
    assert!(
        stderr_of(&output).contains("run `tessera sweep --model ... --out DIR` to calibrate"),
        "{}",
        stderr_of(&output)
    );
}

/// No silent fall back to CPU: a CUDA run either runs on CUDA or fails saying why.
#[test]
fn a_cuda_run_runs_on_cuda_or_fails_with_the_reason() {
    if !runtime_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let study = small_phantom(dir.path(), "96x96x24");
    let out = dir.path().join("cuda.json");
    let output = detect_to(&study, &out, &["--patch", "64x64x16", "--device", "cuda:0"]);
    if output.status.success() {
        let det: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
        assert_eq!(
            det["runtime"]["execution_provider"],
            "CUDAExecutionProvider"
        );
        assert_eq!(det["config"]["device"], "cuda:0");
    } else {
        let err = stderr_of(&output);
        assert!(
            err.contains("cannot start the cuda:0 session for model tessera-test-tiny"),
            "{err}"
        );
        assert!(err.contains("./scripts/setup.sh --gpu"), "{err}");
        assert!(!out.exists());
    }
}

/// The test model's run on a small phantom, for tests that rewrite its detections: the
/// study, the run's file and its contents.
fn small_phantom_run(dir: &Path) -> (PathBuf, PathBuf, serde_json::Value) {
    let study = small_phantom(dir, "160x128x40");
    let det = dir.join("det.json");
    assert!(
        detect_to(&study, &det, &["--patch", "64x64x24"])
            .status
            .success()
    );
    let run = serde_json::from_slice(&std::fs::read(&det).unwrap()).unwrap();
    (study, det, run)
}

#[test]
fn evaluate_scores_detections_against_phantom_truth() {
    if !runtime_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (study, det, mut run) = small_phantom_run(dir.path());
    let truth_path = study.join("truth.json");
    let truth: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&truth_path).unwrap()).unwrap();
    // A perfect detector: one detection on each nodule centre, nothing else.
    let template = run["detections"][0].clone();
    let perfect: Vec<serde_json::Value> = truth["nodules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            let mut d = template.clone();
            d["score"] = serde_json::json!(0.9);
            d["center_lps_mm"] = n["center_lps_mm"].clone();
            d
        })
        .collect();
    run["detections"] = serde_json::Value::Array(perfect);
    let perfect_path = dir.path().join("perfect.json");
    std::fs::write(&perfect_path, serde_json::to_vec(&run).unwrap()).unwrap();
    let pair = format!("{}={}", perfect_path.display(), truth_path.display());
    let output = tessera()
        .args(["evaluate", "--json", "--phantom", &pair])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr_of(&output));
    let froc: serde_json::Value = serde_json::from_str(&stdout_of(&output)).unwrap();
    assert_eq!(froc["cpm"], 1.0);
    assert_eq!(froc["targets"], 2);
    // The real (random-weight) run is scored too, whatever it found.
    let pair = format!("{}={}", det.display(), truth_path.display());
    let output = tessera()
        .args(["evaluate", "--phantom", &pair])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr_of(&output));
    assert!(
        stdout_of(&output).contains("| sensitivity |"),
        "{}",
        stdout_of(&output)
    );
}

#[test]
fn evaluate_cases_as_json_lists_every_reader_mark_with_its_best_box() {
    if !runtime_available() {
        return;
    }
    let Some(case) = shared_data("lidc/LIDC-IDRI-0001") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (_, det, mut run) = small_phantom_run(dir.path());
    // The phantom run's file, moved onto the case: one detection on the readers' largest
    // nodule, one far from every mark.
    let (volume, _) = tessera_dicom::dicom::open(&case, None, Default::default()).unwrap();
    let xml = tessera_dicom::lidc::find_xml(&case).unwrap();
    let reads = tessera_dicom::lidc::read(&xml, &volume.geometry, &volume.info.series_uid).unwrap();
    let groups = tessera_dicom::lidc::consensus(&reads, tessera_dicom::lidc::SAME_NODULE_MM);
    let largest = groups
        .iter()
        .max_by(|a, b| a.diameter_mm.total_cmp(&b.diameter_mm))
        .unwrap();
    let template = run["detections"][0].clone();
    let placed = |score: f64, center: [f64; 3], size: [f64; 3]| {
        let mut d = template.clone();
        d["score"] = serde_json::json!(score);
        d["center_lps_mm"] = serde_json::json!(center);
        d["size_mm"] = serde_json::json!(size);
        d
    };
    run["series_uid"] = serde_json::json!(volume.info.series_uid);
    run["detections"] = serde_json::json!([
        placed(0.9, largest.center_lps_mm, [30.0, 31.0, 32.0]),
        placed(0.7, [0.0, 0.0, -9999.0], [5.0, 5.0, 5.0]),
    ]);
    std::fs::write(&det, serde_json::to_vec(&run).unwrap()).unwrap();
    let pair = format!("{}={}", det.display(), case.display());
    let output = tessera()
        .args([
            "evaluate",
            "--json",
            "--cases",
            "--threshold",
            "0.5",
            "--lidc",
            &pair,
        ])
        .output()
        .unwrap();
    assert!(output.status.success(), "{}", stderr_of(&output));
    let result: serde_json::Value = serde_json::from_str(&stdout_of(&output)).unwrap();
    let table = &result["cases"][0]["table"];
    assert_eq!(result["cases"][0]["case"], "LIDC-IDRI-0001");
    assert_eq!(table["nodules"].as_array().unwrap().len(), groups.len());
    let row = table["nodules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["best"].is_array())
        .unwrap();
    assert!(
        (row["best"][0].as_f64().unwrap() - 0.9).abs() < 1e-6,
        "{row}"
    );
    assert_eq!(row["best"][1], 1);
    assert_eq!(row["best_size_mm"], serde_json::json!([30.0, 31.0, 32.0]));
    assert_eq!(row["hit"], true);
    let fps = table["false_positives"].as_array().unwrap();
    assert_eq!(fps.len(), 1);
    assert_eq!(fps[0]["rank"], 2);
    // The FROC is still there, beside the tables.
    assert_eq!(result["scans"], 1);
}

#[test]
fn resample_writes_the_grid_the_model_sees_as_npy_with_its_geometry() {
    let dir = tempfile::tempdir().unwrap();
    let study = small_phantom(dir.path(), "64x48x10");
    let npy = dir.path().join("vol.npy");
    let out = tessera()
        .args(["resample", "--spacing-mm", "5"])
        .arg(&study)
        .arg("--out")
        .arg(&npy)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr_of(&out));
    // 64 x 2.5 mm -> 32 at 5 mm (first centres kept: (64 - 1) / 2 + 1), 10 slices stay 10.
    let sidecar: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("vol.json")).unwrap()).unwrap();
    assert_eq!(sidecar["size"], serde_json::json!([32, 24, 10]));
    assert_eq!(sidecar["spacing_mm"], serde_json::json!([5.0, 5.0, 5.0]));
    assert_eq!(sidecar["world_from_voxel"]["linear"][0][0], 5.0);
    assert_eq!(sidecar["lidc_nodules"], serde_json::json!([]));
    let bytes = std::fs::read(&npy).unwrap();
    assert!(bytes.starts_with(b"\x93NUMPY\x01\x00"));
    let header_len = usize::from(u16::from_le_bytes([bytes[8], bytes[9]]));
    let header = std::str::from_utf8(&bytes[10..10 + header_len]).unwrap();
    assert!(
        header.contains("'descr': '<i2'") && header.contains("(10, 24, 32)"),
        "{header}"
    );
    assert_eq!(bytes.len(), 10 + header_len + 2 * 32 * 24 * 10);
    // The study is untouched: the resampled grid goes only where --out says.
    assert!(!study.join("vol.npy").exists());
}

#[test]
fn the_viewer_without_a_display_fails_with_one_clear_line() {
    let out = tessera()
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .env_remove("WAYLAND_SOCKET")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr_of(&out);
    assert!(
        err.starts_with("error: the viewer could not open a window (no display?"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
}

/// Processes whose command line mentions `needle` (Linux /proc).
fn processes_mentioning(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if text.contains(needle) {
            found.push(text);
        }
    }
    found
}

#[test]
fn sigterm_stops_a_sweep_and_its_run_in_flight_and_writes_nothing() {
    if !runtime_available() {
        return;
    }
    use std::io::{BufRead, BufReader};
    let dir = tempfile::tempdir().unwrap();
    let study = small_phantom(dir.path(), "256x256x96");
    let out = dir.path().join("sweep-out");
    // Small windows on one thread: each run lasts seconds.
    let mut sweep = tessera()
        .arg("sweep")
        .arg(&study)
        .arg("--model")
        .arg(test_model())
        .args([
            "--patches",
            "24x24x12,32x32x16",
            "--reference",
            "48x48x24",
            "--threads",
            "1",
            "--out",
        ])
        .arg(&out)
        .stderr(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(sweep.stderr.take().unwrap());
    let mut line = String::new();
    // The second run's child prints its plan: it is running now.
    let mut seen_second = false;
    while stderr.read_line(&mut line).unwrap() > 0 {
        if line.starts_with("[2/") {
            seen_second = true;
        }
        if seen_second && line.contains("plan:") {
            break;
        }
        line.clear();
    }
    assert!(seen_second, "the sweep never reached its second run");
    let needle = out.to_string_lossy().into_owned();
    assert!(
        processes_mentioning(&needle)
            .iter()
            .any(|p| p.contains(" detect ")),
        "no child run found"
    );
    let (status, rest) = signal_and_wait(sweep, stderr, "-TERM");
    assert_eq!(status.code(), Some(130), "{rest}");
    assert!(
        rest.contains("cancelled: the run in flight was stopped"),
        "{rest}"
    );
    let left: Vec<String> = processes_mentioning(&needle)
        .into_iter()
        .filter(|p| p.contains(" detect "))
        .collect();
    assert!(left.is_empty(), "runs left behind: {left:?}");
    // Nothing written: no report, no runs, no staging folder.
    let entries: Vec<_> = std::fs::read_dir(&out)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    assert!(entries.is_empty(), "{entries:?}");
}

#[test]
fn review_then_sr_then_dump_is_the_headless_reading() {
    if !runtime_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let study = small_phantom(dir.path(), "128x112x40");
    let det = dir.path().join("det.json");
    let detected = tessera()
        .arg("detect")
        .arg(&study)
        .arg("--model")
        .arg(test_model())
        .args(["--patch", "64x64x24", "--score-threshold", "0.25", "--out"])
        .arg(&det)
        .output()
        .unwrap();
    assert!(detected.status.success(), "{}", stderr_of(&detected));
    let count = serde_json::from_slice::<serde_json::Value>(&std::fs::read(&det).unwrap()).unwrap()
        ["detections"]
        .as_array()
        .unwrap()
        .len();
    assert!(count >= 2, "the test needs two detections, got {count}");

    let review = dir.path().join("review.json");
    let reviewed = tessera()
        .arg("review")
        .arg(&det)
        .args(["--reader", "Doe^Jane", "--accept", "1", "--reject", "2"])
        .args(["--note", "2=calcified", "--out"])
        .arg(&review)
        .output()
        .unwrap();
    assert!(reviewed.status.success(), "{}", stderr_of(&reviewed));
    let beyond = tessera()
        .arg("review")
        .arg(&det)
        .args(["--reader", "Doe^Jane", "--accept"])
        .arg((count + 1).to_string())
        .arg("--out")
        .arg(&review)
        .output()
        .unwrap();
    assert!(!beyond.status.success());
    assert!(stderr_of(&beyond).contains(&format!("there is no finding {}", count + 1)));

    let sr = dir.path().join("sr.dcm");
    let written = tessera()
        .arg("sr")
        .arg(&det)
        .arg("--review")
        .arg(&review)
        .arg("--accepted-only")
        .arg("--out")
        .arg(&sr)
        .output()
        .unwrap();
    assert!(written.status.success(), "{}", stderr_of(&written));
    assert!(
        stdout_of(&written).contains("1 finding(s)"),
        "{}",
        stdout_of(&written)
    );
    let again = tessera()
        .arg("sr")
        .arg(&det)
        .arg("--out")
        .arg(&sr)
        .output()
        .unwrap();
    assert_eq!(
        again.status.code(),
        Some(2),
        "an existing DICOM file is not overwritten"
    );
    let onto_input = tessera()
        .arg("sr")
        .arg(&det)
        .arg("--out")
        .arg(&det)
        .output()
        .unwrap();
    assert_eq!(
        onto_input.status.code(),
        Some(2),
        "{}",
        stderr_of(&onto_input)
    );

    let dump = tessera().arg("sr").arg("--dump").arg(&sr).output().unwrap();
    assert!(dump.status.success(), "{}", stderr_of(&dump));
    let text = stdout_of(&dump);
    assert!(text.contains("1 finding(s)"), "{text}");
    assert!(
        text.contains("Tessera detection 1:") && text.contains("accepted"),
        "{text}"
    );
}
