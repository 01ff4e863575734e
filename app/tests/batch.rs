//! `tessera batch` as a department runs it: a manifest of studies, one damaged, on this machine
//! and as a real Slurm job array; resumed, cancelled mid-study, summarised.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use tessera_tests::runtime_available;
use tessera_tests::slurm::Slurm;

const BIN: &str = env!("CARGO_BIN_EXE_tessera");

fn tessera() -> Command {
    let mut command = Command::new(BIN);
    for var in ["SLURM_ARRAY_TASK_ID", "JOB_COMPLETION_INDEX"] {
        command.env_remove(var);
    }
    command
}

fn stderr_of(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn tiny_model() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets/models/tessera-test-tiny")
}

/// Four small phantoms and a damaged study (a folder with no DICOM), and a manifest naming
/// them with ids; returns the manifest.
fn studies(dir: &Path) -> PathBuf {
    for seed in 1..=4 {
        let out = tessera()
            .args(["phantom", "--seed", &seed.to_string(), "--size", "96x96x24"])
            .args(["--spacing", "2,2,5", "--nodules", "1", "--out"])
            .arg(dir.join(format!("s{seed}")))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr_of(&out));
    }
    std::fs::create_dir_all(dir.join("broken")).unwrap();
    std::fs::write(dir.join("broken/slice.dcm"), b"not a DICOM file").unwrap();
    let manifest = dir.join("studies.csv");
    std::fs::write(
        &manifest,
        "study,id\ns1,one\ns2,two\nbroken,bad\ns3,three\ns4,four\n",
    )
    .unwrap();
    manifest
}

/// `tessera batch MANIFEST --out OUT` with the tiny model, a patch that tiles these studies,
/// and `extra`.
fn batch(manifest: &Path, out: &Path, extra: &[&str]) -> Output {
    tessera()
        .arg("batch")
        .arg(manifest)
        .arg("--out")
        .arg(out)
        .arg("--model")
        .arg(tiny_model())
        .args(extra)
        .args(["--", "--patch", "64x64x32"])
        .output()
        .unwrap()
}

const DONE: [&str; 4] = ["one", "two", "three", "four"];

/// Each done study's files, and the damaged one's record with its reason.
fn assert_outputs(out: &Path, sr: bool) {
    for id in DONE {
        for file in ["det.json", "luna16.csv", "batch.json", "detect.log"] {
            assert!(out.join(id).join(file).is_file(), "{id}/{file}");
        }
        assert_eq!(out.join(id).join("sr.dcm").is_file(), sr, "{id}/sr.dcm");
    }
    let bad = std::fs::read_to_string(out.join("bad/batch.json")).unwrap();
    let bad: serde_json::Value = serde_json::from_str(&bad).unwrap();
    assert_eq!(bad["status"], "failed");
    assert!(
        bad["error"]
            .as_str()
            .unwrap()
            .contains("no DICOM image series found in"),
        "{bad}"
    );
    assert!(!out.join("bad/det.json").exists());
    // No staging folder is left behind.
    let hidden: Vec<String> = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.') && n != ".tessera-batch")
        .collect();
    assert!(hidden.is_empty(), "{hidden:?}");
}

fn summary_rows(out: &Path) -> Vec<String> {
    let csv = std::fs::read_to_string(out.join("summary.csv")).unwrap();
    csv.lines().skip(1).map(String::from).collect()
}

/// When each done study's det.json was written.
fn done_stamps(out: &Path) -> Vec<std::time::SystemTime> {
    DONE.iter()
        .map(|id| {
            std::fs::metadata(out.join(id).join("det.json"))
                .unwrap()
                .modified()
                .unwrap()
        })
        .collect()
}

/// No done study ran again.
fn assert_untouched(out: &Path, stamps: &[std::time::SystemTime]) {
    assert_eq!(done_stamps(out), stamps, "a done study ran twice");
}

/// The array over the manifest with the tiny model, run to its end.
fn run_array(slurm: &Slurm, manifest: &Path, out: &Path) {
    submit(
        slurm,
        manifest,
        out,
        &tiny_model(),
        &["--patch", "64x64x32"],
    );
    assert!(
        slurm.wait_idle(Duration::from_secs(180)),
        "the array did not end: {}",
        slurm.logs()
    );
}

#[test]
fn a_batch_runs_every_study_records_the_damaged_one_and_resumes() {
    if !runtime_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let manifest = studies(dir.path());
    let out = dir.path().join("out");
    let first = batch(&manifest, &out, &["--jobs", "2", "--sr"]);
    assert_eq!(
        first.status.code(),
        Some(1),
        "one study failed: {}",
        stderr_of(&first)
    );
    assert_outputs(&out, true);
    let rows = summary_rows(&out);
    assert_eq!(rows.len(), 5, "{rows:?}");
    assert!(rows[2].starts_with("bad,4,"), "{rows:?}");
    assert!(rows[2].contains(",failed,"), "{rows:?}");
    assert_eq!(rows.iter().filter(|r| r.contains(",done,")).count(), 4);
    let md = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(md.contains("5 studies: 4 done, 1 failed."), "{md}");

    // Again, the same settings: the done studies are skipped, untouched; the damaged one runs.
    let stamps = done_stamps(&out);
    let again = batch(&manifest, &out, &["--jobs", "2", "--sr"]);
    assert_eq!(again.status.code(), Some(1));
    let text = stderr_of(&again);
    for id in DONE {
        assert!(
            text.contains(&format!("{id}: done before with these settings, skipped")),
            "{text}"
        );
    }
    assert!(text.contains("[1/1] bad: FAILED"), "{text}");
    assert_untouched(&out, &stamps);
    // Other settings (one job: all the threads) run them again, into whole new folders.
    let other = batch(&manifest, &out, &[]);
    assert_eq!(other.status.code(), Some(1));
    assert_outputs(&out, false);

    // --summary rebuilds the same summary from the study folders.
    let before = std::fs::read(out.join("summary.csv")).unwrap();
    std::fs::remove_file(out.join("summary.csv")).unwrap();
    let collected = tessera()
        .arg("batch")
        .arg("--summary")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(collected.status.code(), Some(1));
    assert_eq!(std::fs::read(out.join("summary.csv")).unwrap(), before);
}

#[test]
fn one_task_of_an_array_runs_one_line_and_writes_no_summary() {
    if !runtime_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let manifest = studies(dir.path());
    let out = dir.path().join("out");
    for (var, index, id) in [
        ("SLURM_ARRAY_TASK_ID", "1", "two"),
        ("JOB_COMPLETION_INDEX", "3", "three"),
    ] {
        let run = Command::new(BIN)
            .env(var, index)
            .arg("batch")
            .arg(&manifest)
            .arg("--out")
            .arg(&out)
            .arg("--model")
            .arg(tiny_model())
            .args(["--", "--patch", "64x64x32"])
            .output()
            .unwrap();
        assert!(run.status.success(), "{}", stderr_of(&run));
        assert!(out.join(id).join("det.json").is_file(), "{var}");
    }
    let studies: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect();
    assert_eq!(studies.len(), 2, "{studies:?}");
    let task = batch(&manifest, &out, &["--task-index", "2"]);
    assert_eq!(
        task.status.code(),
        Some(1),
        "the damaged study's task fails"
    );
    assert!(out.join("bad/batch.json").is_file());
    let beyond = batch(&manifest, &out, &["--task-index", "5"]);
    assert!(!beyond.status.success());
    assert!(
        stderr_of(&beyond).contains("task index 5, but")
            && stderr_of(&beyond).contains("holds 5 studies (0 to 4)"),
        "{}",
        stderr_of(&beyond)
    );
}

#[test]
fn bad_manifests_and_foreign_folders_are_refused_naming_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let manifest = studies(dir.path());
    let out = dir.path().join("never");
    let cases = [
        (
            "dup.csv",
            "study,id\ns1,x\ns2,x\n",
            "dup.csv line 3: id 'x' is line 2's too",
        ),
        (
            "missing.csv",
            "study\ns1\nnowhere\n",
            "missing.csv line 3: the study",
        ),
        (
            "columns.csv",
            "path,id\ns1,a\n",
            "columns.csv line 1: unknown column 'path'",
        ),
        (
            "fields.csv",
            "study,id\ns1\n",
            "fields.csv line 2: 1 fields where the header has 2",
        ),
        (
            "bad.jsonl",
            "{\"study\": \"s1\"}\n{oops\n",
            "bad.jsonl line 2: not JSON",
        ),
        (
            "id.jsonl",
            "{\"study\": \"s1\", \"id\": \"../up\"}\n",
            "id.jsonl line 1: id '../up' is not a plain folder name",
        ),
        ("list.txt", "s1\n", "a manifest is .csv"),
    ];
    for (name, text, message) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        let run = batch(&path, &out, &[]);
        assert_eq!(run.status.code(), Some(2), "{name}: {}", stderr_of(&run));
        assert!(
            stderr_of(&run).contains(message),
            "{name}: {}",
            stderr_of(&run)
        );
        assert!(!out.exists(), "{name} wrote something");
    }
    let theirs = dir.path().join("theirs");
    std::fs::create_dir_all(&theirs).unwrap();
    std::fs::write(theirs.join("notes.txt"), b"mine").unwrap();
    let run = batch(&manifest, &theirs, &[]);
    assert_eq!(run.status.code(), Some(2));
    assert!(
        stderr_of(&run).contains("not a folder this command wrote"),
        "{}",
        stderr_of(&run)
    );
    assert_eq!(std::fs::read_dir(&theirs).unwrap().count(), 1);
}

#[test]
fn a_budget_no_plan_fits_is_refused_before_any_study_runs() {
    if !runtime_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let manifest = studies(dir.path());
    let out = dir.path().join("out");
    let run = tessera()
        .arg("batch")
        .arg(&manifest)
        .arg("--out")
        .arg(&out)
        .args(["--memory-budget", "20MiB", "--jobs", "2"])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2), "{}", stderr_of(&run));
    let text = stderr_of(&run);
    assert!(
        text.contains("no study of the batch can run, nothing was started")
            && text.contains("no patch fits the memory budget of 10.00 MiB"),
        "{text}"
    );
    let written: Vec<_> = std::fs::read_dir(&out).unwrap().collect();
    assert_eq!(written.len(), 1, "only the folder's marker");
}

/// The array over the five studies, through scripts/slurm/submit.sh; its job id.
fn submit(slurm: &Slurm, manifest: &Path, out: &Path, model: &Path, detect: &[&str]) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let run = Command::new(root.join("scripts/slurm/submit.sh"))
        .env("SLURM_CONF", slurm.conf())
        .env("TESSERA", BIN)
        .args(["--gpus", "0", "--cpus", "1", "--parallel", "2", "--model"])
        .arg(model)
        .arg(manifest)
        .arg(out)
        .arg("--")
        .args(detect)
        .current_dir(manifest.parent().unwrap())
        .output()
        .unwrap();
    assert!(run.status.success(), "{} {}", stderr_of(&run), slurm.logs());
    String::from_utf8_lossy(&run.stdout).trim().to_string()
}

#[test]
fn a_slurm_array_runs_the_batch_and_a_cancelled_task_leaves_nothing() {
    if !runtime_available() {
        return;
    }
    let Some(slurm) = Slurm::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let manifest = studies(dir.path());
    let out = dir.path().join("out");
    run_array(&slurm, &manifest, &out);
    let collected = tessera()
        .arg("batch")
        .arg("--summary")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(
        collected.status.code(),
        Some(1),
        "{}",
        stderr_of(&collected)
    );
    assert_outputs(&out, false);
    assert_eq!(summary_rows(&out).len(), 5);

    // Resubmitted: the done studies are skipped (not run twice), the damaged one fails again.
    let stamps = done_stamps(&out);
    run_array(&slurm, &manifest, &out);
    assert_untouched(&out, &stamps);

    cancelled_mid_study_then_resubmitted(&slurm, dir.path());
}

/// A task cancelled mid-study (scancel while its detect runs) leaves nothing; resubmitted, it
/// completes. The shipped detector on a larger phantom takes seconds, long enough.
fn cancelled_mid_study_then_resubmitted(slurm: &Slurm, dir: &Path) {
    let big = dir.join("big");
    let made = tessera()
        .args([
            "phantom",
            "--seed",
            "7",
            "--size",
            "256x256x96",
            "--nodules",
            "2",
            "--out",
        ])
        .arg(&big)
        .output()
        .unwrap();
    assert!(made.status.success());
    let one = dir.join("one.csv");
    std::fs::write(&one, "study,id\nbig,big\n").unwrap();
    let out2 = dir.join("out2");
    let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("../assets/models/tessera-nodule");
    let job = submit(slurm, &one, &out2, &model, &["--patch", "256x256x64"]);
    let started = std::time::Instant::now();
    let staging = || {
        std::fs::read_dir(&out2).ok().is_some_and(|entries| {
            entries.filter_map(Result::ok).any(|e| {
                e.file_name().to_string_lossy().starts_with(".big.partial-")
                    && e.path().join("detect.log").is_file()
            })
        })
    };
    while !staging() {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the task never started: {}",
            slurm.logs()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(1));
    let cancelled = slurm.command("scancel").arg(&job).status().unwrap();
    assert!(cancelled.success());
    assert!(slurm.wait_idle(Duration::from_secs(60)), "{}", slurm.logs());
    // The batch stopped its detect and removed its staging folder: nothing partial.
    let left: Vec<String> = std::fs::read_dir(&out2)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != ".tessera-batch" && n != "logs")
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    submit(slurm, &one, &out2, &model, &["--patch", "256x256x64"]);
    assert!(
        slurm.wait_idle(Duration::from_secs(300)),
        "{}",
        slurm.logs()
    );
    assert!(out2.join("big/det.json").is_file(), "{}", slurm.logs());
}

/// A manifest line naming a study on a PACS (a real Orthanc with its DICOMweb plugin): it is
/// retrieved into the batch's folder, run, and not retrieved or run again on a rerun.
#[test]
fn a_dicomweb_line_is_retrieved_then_run() {
    if !runtime_available() {
        return;
    }
    let Some(orthanc) = tessera_tests::orthanc::Orthanc::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    studies(dir.path());
    let folder = dir.path().join("s1");
    let (volume, scan) =
        tessera_dicom::dicom::open(&folder, None, tessera_dicom::dicom::LoadOptions::default())
            .unwrap();
    let files: Vec<PathBuf> = scan.series[0]
        .files
        .iter()
        .map(|f| f.path.clone())
        .collect();
    orthanc.server().store_files(&files).unwrap();
    let manifest = dir.path().join("remote.csv");
    std::fs::write(
        &manifest,
        format!(
            "url,study_uid,id\n{},{},remote\n",
            orthanc.dicomweb_url(),
            volume.info.study_uid
        ),
    )
    .unwrap();
    let out = dir.path().join("out");
    let run = || {
        Command::new(BIN)
            .env("TESSERA_PACS_USER", tessera_tests::orthanc::USER)
            .env("TESSERA_PACS_PASSWORD", tessera_tests::orthanc::PASSWORD)
            .arg("batch")
            .arg(&manifest)
            .arg("--out")
            .arg(&out)
            .arg("--model")
            .arg(tiny_model())
            .args(["--", "--patch", "64x64x32"])
            .output()
            .unwrap()
    };
    let first = run();
    assert!(first.status.success(), "{}", stderr_of(&first));
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("remote/batch.json")).unwrap()).unwrap();
    assert_eq!(record["status"], "done");
    assert_eq!(
        record["study_path"].as_str().map(PathBuf::from),
        Some(out.join(".retrieved/remote"))
    );
    let det =
        tessera_core::report::DetectionReport::read_json(&out.join("remote/det.json")).unwrap();
    assert_eq!(det.series_uid, volume.info.series_uid);
    let again = run();
    assert!(again.status.success());
    assert!(
        stderr_of(&again).contains("remote: done before with these settings, skipped"),
        "{}",
        stderr_of(&again)
    );
}
