//! Bad input, as a new user gives it: damaged real slices, broken model cards, bad flags, output
//! paths that would overwrite what the user owns. Each kind must end with its exit code, a
//! message that names the file and the reason, no output (not even a partial or temporary
//! file), and the input's bytes unchanged.
//!
//! Run with `--nocapture` to print the table of kinds and their messages.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use tessera_tests::bad_input::{self, VICTIM, copy_study, slice_path};

/// A run that takes longer than this hangs: the suite fails instead of waiting forever.
const HANG_S: u64 = 120;

struct Case {
    name: String,
    args: Vec<OsString>,
    code: i32,
    /// Every one of these must appear in stderr or stdout.
    must_say: Vec<String>,
}

fn case(name: impl Into<String>, args: Vec<OsString>, code: i32, must_say: &[&str]) -> Case {
    Case {
        name: name.into(),
        args,
        code,
        must_say: must_say.iter().map(|s| (*s).to_string()).collect(),
    }
}

fn os(parts: &[&dyn AsRef<std::ffi::OsStr>]) -> Vec<OsString> {
    parts.iter().map(|p| p.as_ref().to_os_string()).collect()
}

/// Path -> bytes of every file under `root`.
fn snapshot(root: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let entry = entry.unwrap();
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                stack.push(entry.path());
            } else if kind.is_file() {
                out.insert(entry.path(), std::fs::read(entry.path()).unwrap());
            } else {
                out.insert(entry.path(), b"(special file)".to_vec());
            }
        }
    }
    out
}

/// Runs `tessera` with a hang guard; returns (exit code, stdout + stderr).
fn run(args: &[OsString]) -> (i32, String) {
    let dir = tempfile::tempdir().unwrap();
    let (out_path, err_path) = (dir.path().join("out"), dir.path().join("err"));
    let mut child = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(args)
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(HANG_S) {
            let _ = child.kill();
            let _ = child.wait();
            return (-1, format!("hung for over {HANG_S} s"));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&std::fs::read(&out_path).unwrap()),
        String::from_utf8_lossy(&std::fs::read(&err_path).unwrap())
    );
    (status.code().unwrap_or(-1), text)
}

/// Runs every case with `inputs` (the folder holding what the cases read) and `outputs` (the
/// folder they are told to write into). Returns one line per failed expectation.
fn check_all(cases: &[Case], inputs: &Path, outputs: &Path) -> Vec<String> {
    let mut failures = Vec::new();
    for c in cases {
        let before = snapshot(inputs);
        let (code, text) = run(&c.args);
        let first_line = text
            .lines()
            .find(|l| l.starts_with("error") || l.contains("error:"))
            .unwrap_or_else(|| text.lines().next().unwrap_or(""));
        eprintln!("| {} | {code} | {} |", c.name, first_line.trim());
        if code != c.code {
            failures.push(format!(
                "{}: exit {code}, expected {}: {text}",
                c.name, c.code
            ));
        }
        for needle in &c.must_say {
            if !text.contains(needle.as_str()) {
                failures.push(format!("{}: does not say '{needle}': {text}", c.name));
            }
        }
        let written = snapshot(outputs);
        if !written.is_empty() {
            failures.push(format!(
                "{}: wrote {:?}",
                c.name,
                written.keys().collect::<Vec<_>>()
            ));
            for path in written.keys() {
                let _ = std::fs::remove_file(path);
            }
        }
        if snapshot(inputs) != before {
            failures.push(format!("{}: changed the input files", c.name));
        }
    }
    failures
}

/// A temporary root with an empty `in/` for what a case reads and `out/` for what it may write.
fn folders() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let root = tempfile::tempdir().unwrap();
    let (inputs, outputs) = (root.path().join("in"), root.path().join("out"));
    std::fs::create_dir_all(&inputs).unwrap();
    std::fs::create_dir_all(&outputs).unwrap();
    (root, inputs, outputs)
}

fn assert_none(failures: &[String]) {
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

fn test_model() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets/models/tessera-test-tiny")
}

fn mkfifo(path: &Path) {
    let made = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(made.success(), "mkfifo {}", path.display());
}

#[test]
fn damaged_real_slices_are_refused_naming_the_file_and_the_reason() {
    let Some(sources) = bad_input::source_series() else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let outputs = root.path().join("out");
    std::fs::create_dir_all(&outputs).unwrap();
    let mut failures = Vec::new();
    for kind in bad_input::dicom_kinds() {
        let work = tempfile::tempdir_in(root.path()).unwrap();
        let study = copy_study(&sources, work.path());
        (kind.damage)(&study);
        let victim = slice_path(&study, VICTIM);
        let file = victim.file_name().unwrap().to_string_lossy().into_owned();
        let mut must_say = vec![kind.reason];
        if kind.names_file {
            must_say.push(&file);
        }
        let cases = [
            case(
                format!("detect: {}", kind.name),
                os(&[
                    &"detect",
                    &study,
                    &"--model",
                    &test_model(),
                    &"--out",
                    &outputs.join("det.json"),
                    &"--csv",
                    &outputs.join("det.csv"),
                ]),
                1,
                &must_say,
            ),
            // info never fails on a bad series: it lists it, with the reason.
            case(
                format!("info --json: {}", kind.name),
                os(&[&"info", &"--json", &study]),
                0,
                &must_say,
            ),
        ];
        failures.extend(check_all(&cases, work.path(), &outputs));
    }
    assert_none(&failures);
}

#[test]
fn with_allow_gaps_an_unreadable_slice_is_filled_and_listed_with_its_file() {
    let Some(sources) = bad_input::source_series() else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let study = copy_study(&sources, root.path());
    let kinds = bad_input::dicom_kinds();
    let slope_zero = kinds.iter().find(|k| k.name == "RescaleSlope 0").unwrap();
    (slope_zero.damage)(&study);
    let (code, text) = run(&os(&[&"info", &"--json", &"--allow-gaps", &study]));
    assert_eq!(code, 0, "{text}");
    let info: serde_json::Value = serde_json::from_str(&text).unwrap();
    let series = &info["series"][0];
    assert!(series["error"].is_null(), "{series}");
    assert_eq!(series["size"][2], bad_input::SLICES);
    let filled = series["filled_slices"].as_array().unwrap();
    assert_eq!(filled.len(), 1, "{series}");
    assert_eq!(filled[0]["index"], VICTIM);
    assert_eq!(
        filled[0]["file"].as_str().unwrap(),
        slice_path(&study, VICTIM).to_str().unwrap()
    );
    let skipped = info["skipped"].as_array().unwrap();
    assert_eq!(skipped.len(), 1);
    assert_eq!(skipped[0]["kind"], "unreadable");
    assert!(
        skipped[0]["reason"]
            .as_str()
            .unwrap()
            .contains("RescaleSlope 0")
    );
}

#[test]
#[allow(
    clippy::too_many_lines,
    reason = "one table of cases, read top to bottom"
)]
fn broken_model_cards_and_special_files_are_refused_by_name() {
    let Some(sources) = bad_input::source_series() else {
        return;
    };
    let (_root, inputs, outputs) = folders();
    let study = copy_study(&sources, &inputs);
    let det = outputs.join("det.json");
    let card_text = std::fs::read_to_string(test_model().join("model.json")).unwrap();
    let card: serde_json::Value = serde_json::from_str(&card_text).unwrap();
    // A copy of the test model with its card edited by `edit`.
    let model = |name: &str, edit: &dyn Fn(&mut serde_json::Value, &Path)| -> PathBuf {
        let dir = inputs.join(format!("model-{name}"));
        std::fs::create_dir_all(&dir).unwrap();
        for file in ["model.onnx", "model_fp16.onnx"] {
            std::fs::copy(test_model().join(file), dir.join(file)).unwrap();
        }
        let mut c = card.clone();
        edit(&mut c, &dir);
        std::fs::write(dir.join("model.json"), serde_json::to_vec(&c).unwrap()).unwrap();
        dir
    };
    let detect_with = |name: &str, dir: PathBuf, must_say: &[&str]| {
        case(
            format!("model: {name}"),
            os(&[&"detect", &study, &"--model", &dir, &"--out", &det]),
            1,
            must_say,
        )
    };
    let no_card = inputs.join("model-no-card");
    std::fs::create_dir_all(&no_card).unwrap();
    let not_json = model("not-json", &|_, _| {});
    std::fs::write(not_json.join("model.json"), b"{\"name\": ").unwrap();
    let fifo_card = inputs.join("model-fifo-card");
    std::fs::create_dir_all(&fifo_card).unwrap();
    mkfifo(&fifo_card.join("model.json"));
    let fifo_study = inputs.join("fifo-study");
    mkfifo(&fifo_study);
    let empty = inputs.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let text_only = inputs.join("text-only");
    std::fs::create_dir_all(&text_only).unwrap();
    std::fs::write(text_only.join("README.txt"), b"not a scan").unwrap();
    let with_fifo = copy_study(&sources, &inputs.join("with-fifo"));
    mkfifo(&with_fifo.join("pipe.dcm"));

    let cases = vec![
        detect_with(
            "no model.json",
            no_card.clone(),
            &["has no model.json card", "model-no-card"],
        ),
        detect_with(
            "model.json not JSON",
            not_json,
            &["model card", "is not valid", "EOF"],
        ),
        detect_with(
            "model.json is a FIFO",
            fifo_card,
            &["model.json", "a FIFO (named pipe), not a regular file"],
        ),
        detect_with(
            "stride 0",
            model("stride", &|c, _| c["stride"] = 0.into()),
            &["stride and receptive_field_voxels must be positive"],
        ),
        detect_with(
            "receptive field 0",
            model("rf", &|c, _| c["receptive_field_voxels"] = 0.into()),
            &["must be positive"],
        ),
        detect_with(
            "negative spacing",
            model("spacing", &|c, _| {
                c["target_spacing_mm"] = serde_json::json!([1.0, -1.0, 1.0]);
            }),
            &["target_spacing_mm [1.0, -1.0, 1.0] must be three positive"],
        ),
        detect_with(
            "recommended patch 0",
            model("patch", &|c, _| {
                c["recommended_patch"] = serde_json::json!([0, 64, 64]);
            }),
            &["recommended_patch [0, 64, 64] must be positive"],
        ),
        detect_with(
            "threshold 2",
            model("threshold", &|c, _| {
                c["default_score_threshold"] = 2.0.into();
            }),
            &["score threshold 2 must be a number from 0 to 1"],
        ),
        detect_with(
            "model file missing",
            model("missing", &|c, _| c["model_file"] = "gone.onnx".into()),
            &["gone.onnx", "No such file"],
        ),
        detect_with(
            "model file is a FIFO",
            model("fifo", &|c, dir| {
                mkfifo(&dir.join("pipe.onnx"));
                c["model_file"] = "pipe.onnx".into();
            }),
            &["pipe.onnx", "a FIFO (named pipe), not a regular file"],
        ),
        detect_with(
            "model file changed",
            model("hash", &|c, _| c["sha256"] = "00".repeat(32).into()),
            &["does not match its card"],
        ),
        case(
            "study path missing",
            os(&[
                &"detect",
                &inputs.join("nowhere"),
                &"--model",
                &test_model(),
                &"--out",
                &det,
            ]),
            1,
            &["nowhere", "No such file"],
        ),
        case(
            "study path is a FIFO",
            os(&[
                &"detect",
                &fifo_study,
                &"--model",
                &test_model(),
                &"--out",
                &det,
            ]),
            1,
            &["fifo-study", "is a FIFO (named pipe), not a file or folder"],
        ),
        case(
            "empty folder",
            os(&[&"detect", &empty, &"--model", &test_model(), &"--out", &det]),
            1,
            &["no DICOM image series found in", "empty", "0 file(s)"],
        ),
        case(
            "folder without DICOM",
            os(&[
                &"detect",
                &text_only,
                &"--model",
                &test_model(),
                &"--out",
                &det,
            ]),
            1,
            &["README.txt", "no DICM marker"],
        ),
        case(
            "a FIFO among the slices is listed, not read",
            os(&[&"info", &with_fifo]),
            0,
            &["pipe.dcm", "a FIFO (named pipe), not a regular file"],
        ),
    ];
    assert_none(&check_all(&cases, &inputs, &outputs));
}

#[test]
#[allow(
    clippy::too_many_lines,
    reason = "one table of cases, read top to bottom"
)]
fn flags_out_of_range_are_refused_before_anything_runs() {
    let (_root, inputs, outputs) = folders();
    let det = outputs.join("det.json");
    let detect = |name: &str, flag: &str, value: &str, must_say: &[&str]| {
        case(
            format!("detect {flag} {value}: {name}"),
            os(&[
                &"detect",
                &inputs,
                &"--out",
                &det,
                &format!("{flag}={value}"),
            ]),
            2,
            must_say,
        )
    };
    let cases = vec![
        detect(
            "NaN threshold",
            "--score-threshold",
            "NaN",
            &["score NaN must be a number from 0 to 1"],
        ),
        detect(
            "threshold above 1",
            "--score-threshold",
            "1.5",
            &["must be a number from 0 to 1"],
        ),
        detect(
            "negative threshold",
            "--score-threshold",
            "-0.1",
            &["must be a number from 0 to 1"],
        ),
        detect(
            "overlap 1",
            "--overlap",
            "1",
            &["overlap 1 must be at least 0 and below 1"],
        ),
        detect(
            "NaN overlap",
            "--overlap",
            "NaN",
            &["must be at least 0 and below 1"],
        ),
        detect(
            "negative budget",
            "--memory-budget",
            "-1GiB",
            &["must be a positive size"],
        ),
        detect(
            "budget inf",
            "--memory-budget",
            "infGiB",
            &["is not a size like 16GiB"],
        ),
        detect(
            "zero patch",
            "--patch",
            "0x64x64",
            &["is not a size like 512x512x64"],
        ),
        detect(
            "zero threads",
            "--threads",
            "0",
            &["not a thread count from 1 to 1024"],
        ),
        detect(
            "unknown blend",
            "--blend",
            "median",
            &["possible values: halo, gaussian, constant"],
        ),
        case(
            "resample --spacing-mm 1e-9",
            os(&[
                &"resample",
                &inputs,
                &"--spacing-mm",
                &"1e-9",
                &"--out",
                &outputs.join("v.npy"),
            ]),
            2,
            &["spacing 1e-9 mm must be from 0.001 to 100 mm"],
        ),
        case(
            "resample --spacing-mm NaN",
            os(&[
                &"resample",
                &inputs,
                &"--spacing-mm",
                &"NaN,1,1",
                &"--out",
                &outputs.join("v.npy"),
            ]),
            2,
            &["must be from 0.001 to 100 mm"],
        ),
        case(
            "phantom --size 100000x100000x100000",
            os(&[
                &"phantom",
                &"--size",
                &"100000x100000x100000",
                &"--out",
                &outputs.join("p"),
            ]),
            1,
            &["phantom size 100000x100000x100000 is too large"],
        ),
        case(
            "phantom --noise NaN",
            os(&[&"phantom", &"--noise", &"NaN", &"--out", &outputs.join("p")]),
            2,
            &["is not a noise level from 0 to 1000 HU"],
        ),
        case(
            "parity --score-tol NaN",
            os(&[&"parity", &"a.json", &"b.json", &"--score-tol", &"NaN"]),
            2,
            &["score NaN must be a number from 0 to 1"],
        ),
        case(
            "sweep --box-tol-voxels -1",
            os(&[
                &"sweep",
                &inputs,
                &"--box-tol-voxels=-1",
                &"--out",
                &outputs.join("s"),
            ]),
            2,
            &["is not a finite number of 0 or more"],
        ),
    ];
    assert_none(&check_all(&cases, &inputs, &outputs));
}

#[test]
#[allow(
    clippy::too_many_lines,
    reason = "one table of cases, read top to bottom"
)]
fn outputs_that_would_touch_the_input_are_refused_and_the_input_stays_unchanged() {
    let Some(sources) = bad_input::source_series() else {
        return;
    };
    let (_root, inputs, outputs) = folders();
    let study = copy_study(&sources, &inputs);
    // A DICOM file of the user's outside the study, and a folder of theirs.
    let theirs = inputs.join("theirs");
    std::fs::create_dir_all(&theirs).unwrap();
    std::fs::copy(&sources[0], theirs.join("keep.dcm")).unwrap();
    std::fs::write(theirs.join("notes.txt"), b"mine").unwrap();
    let detect = |name: &str,
                  out: &Path,
                  extra: &[&dyn AsRef<std::ffi::OsStr>],
                  code: i32,
                  must_say: &[&str]| {
        let mut args = os(&[&"detect", &study, &"--model", &test_model(), &"--out", &out]);
        args.extend(os(extra));
        case(format!("output: {name}"), args, code, must_say)
    };
    let cases = vec![
        detect(
            "--out is an input slice",
            &slice_path(&study, VICTIM),
            &[&"--force"],
            2,
            &[
                "refusing to write",
                "s3.dcm",
                "it is one of the input files",
            ],
        ),
        detect(
            "--out inside the study",
            &study.join("det.json"),
            &[],
            2,
            &["inside the input", "--force"],
        ),
        detect(
            "--csv over a DICOM file",
            &outputs.join("det.json"),
            &[&"--csv", &theirs.join("keep.dcm")],
            2,
            &["refusing to overwrite", "keep.dcm", "it is a DICOM file"],
        ),
        detect(
            "--out is a folder",
            &theirs,
            &[],
            2,
            &["cannot write", "theirs", "it is a folder"],
        ),
        case(
            "resample --out v.json (the sidecar's name)",
            os(&[
                &"resample",
                &study,
                &"--spacing-mm",
                &"2",
                &"--out",
                &outputs.join("v.json"),
            ]),
            1,
            &["v.json would be overwritten by its own .json sidecar"],
        ),
        case(
            "resample --out inside the study",
            os(&[
                &"resample",
                &study,
                &"--spacing-mm",
                &"2",
                &"--out",
                &study.join("v.npy"),
            ]),
            2,
            &["inside the input"],
        ),
        case(
            "phantom --out a folder of the user's",
            os(&[&"phantom", &"--size", &"64x64x16", &"--out", &theirs]),
            2,
            &[
                "refusing to write into",
                "theirs",
                "not empty",
                "no truth.json",
            ],
        ),
        case(
            "sweep --out inside the study",
            os(&[
                &"sweep",
                &study,
                &"--model",
                &test_model(),
                &"--out",
                &study.join("sweep"),
            ]),
            2,
            &["inside the input"],
        ),
    ];
    assert_none(&check_all(&cases, &inputs, &outputs));
}

#[test]
fn broken_result_files_are_refused_by_name() {
    let (_root, inputs, outputs) = folders();
    let truncated = inputs.join("truncated.json");
    std::fs::write(
        &truncated,
        b"{\"schema\": \"tessera.detections/1\", \"detections\": [",
    )
    .unwrap();
    let wrong_schema = inputs.join("wrong.json");
    std::fs::write(&wrong_schema, b"{\"schema\": \"other/9\"}").unwrap();
    let fifo = inputs.join("fifo.json");
    mkfifo(&fifo);
    let parity = |name: &str, file: &Path, must_say: &[&str]| {
        case(
            format!("parity: {name}"),
            os(&[&"parity", &file, &file]),
            1,
            must_say,
        )
    };
    let cases = vec![
        parity("truncated det.json", &truncated, &["truncated.json", "EOF"]),
        parity(
            "another schema",
            &wrong_schema,
            // Named by its schema, not by the first field it lacks.
            &["wrong.json", "has schema other/9, not tessera.detections/1"],
        ),
        parity(
            "det.json is a FIFO",
            &fifo,
            &["fifo.json", "a FIFO (named pipe), not a regular file"],
        ),
        case(
            "detect --memory-model truncated",
            os(&[
                &"detect",
                &inputs,
                &"--memory-model",
                &truncated,
                &"--out",
                &outputs.join("d.json"),
            ]),
            1,
            &["truncated.json"],
        ),
    ];
    assert_none(&check_all(&cases, &inputs, &outputs));
}
