//! What a new user meets in their first hour with the CLI: a typo, a refusal, an installed
//! binary away from its checkout, the figures a run prints.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::{Command, Output};

use tessera_tests::{runtime_available, tool};

fn tessera() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tessera"));
    // No window may open: a test that reached the viewer would fail on this, not hang.
    command.env_remove("DISPLAY").env_remove("WAYLAND_DISPLAY");
    command
}

fn text(output: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn phantom(tessera: &mut Command, out: &Path) {
    let made = tessera
        .args(["phantom", "--seed", "4", "--size", "160x128x24"])
        .args(["--spacing", "1.25,1.5,5", "--nodules", "1", "--out"])
        .arg(out)
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", text(&made).1);
}

#[test]
fn a_mistyped_subcommand_gets_the_one_it_meant_and_opens_nothing() {
    for (words, typo) in [
        (&["detct"][..], "detct"),
        (&["detct", "some/study"], "detct"),
        (&["--ort-lib", "x.so", "detetc"], "detetc"),
    ] {
        let out = tessera().args(words).output().unwrap();
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{words:?}: {stderr}");
        assert_eq!(
            stderr.trim(),
            format!(
                "error: unrecognized subcommand '{typo}': did you mean `detect`? (`tessera --help` lists them)"
            ),
            "{words:?}"
        );
        assert!(stdout.is_empty(), "{stdout}");
    }
    let out = tessera().arg("no-such-study").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out).1.trim(),
        "error: 'no-such-study' is neither a subcommand nor a file or folder to view (`tessera --help` lists the subcommands)"
    );
}

#[test]
fn ort_lib_is_refused_where_no_runtime_loads() {
    let out = tessera()
        .args(["--ort-lib", "x.so", "sr", "det.json", "--out", "sr.dcm"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out).1.trim(),
        "error: --ort-lib: `tessera sr` loads no ONNX Runtime"
    );
    let out = tessera()
        .args(["review", "--ort-lib", "x.so"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out).1.contains("unexpected argument '--ort-lib'"),
        "{:?}",
        text(&out)
    );
}

#[test]
fn help_says_which_size_units_are_powers_of_1024() {
    let out = tessera().args(["detect", "--help"]).output().unwrap();
    let help = text(&out).0;
    assert!(
        help.contains("512M = 512 MiB") && help.contains("2GB = 2e9 bytes"),
        "{help}"
    );
}

#[test]
fn info_text_shows_the_patient_id_that_json_has() {
    let dir = tempfile::tempdir().unwrap();
    let study = dir.path().join("study");
    phantom(&mut tessera(), &study);
    let out = tessera().arg("info").arg(&study).output().unwrap();
    assert!(out.status.success());
    assert!(
        text(&out).0.contains("    patient  PHANTOM-4\n"),
        "{:?}",
        text(&out)
    );
}

/// A fixed patch over a budget that no patch fits is told so, with the least budget, and the
/// run without `--patch` names the same smallest patch.
#[test]
fn a_refused_budget_says_what_would_run() {
    if !runtime_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let study = dir.path().join("study");
    phantom(&mut tessera(), &study);
    let out = tessera()
        .arg("detect")
        .arg(&study)
        .args(["--memory-budget", "20MiB", "--patch", "96x96x48", "--out"])
        .arg(dir.path().join("det.json"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{:?}", text(&out));
    let fixed = text(&out).1;
    assert!(
        fixed.contains("over the memory budget of 20.00 MiB: no patch fits it (the smallest, ")
            && !fixed.contains("a smaller patch would fit"),
        "{fixed}"
    );
    let out = tessera()
        .arg("detect")
        .arg(&study)
        .args(["--memory-budget", "20MiB", "--out"])
        .arg(dir.path().join("det.json"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{:?}", text(&out));
    let chosen = text(&out).1;
    assert!(
        chosen.contains("so the smallest budget that runs is "),
        "{chosen}"
    );
    assert!(!dir.path().join("det.json").exists());
}

/// `scripts/install.sh` into a fresh prefix; the installed binary, run from elsewhere with no
/// ORT_DYLIB_PATH and an empty home, finds its runtime and models under the prefix (none of
/// this checkout's paths is compiled in), runs `detect`, and says its peak as outside tools
/// see it.
#[test]
fn an_installed_binary_runs_away_from_its_checkout() {
    if !runtime_available() {
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("prefix");
    let installed = Command::new(root.join("scripts/install.sh"))
        .args(["--binary", env!("CARGO_BIN_EXE_tessera"), "--prefix"])
        .arg(&prefix)
        .output()
        .unwrap();
    assert!(installed.status.success(), "{:?}", text(&installed));
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let run = |words: &[&str]| -> Output {
        Command::new(prefix.join("bin/tessera"))
            .args(words)
            .current_dir(&elsewhere)
            .env_remove("ORT_DYLIB_PATH")
            .env_remove("DISPLAY")
            .env("HOME", &elsewhere)
            .env("XDG_DATA_HOME", elsewhere.join("data"))
            .env("XDG_CACHE_HOME", elsewhere.join("cache"))
            .output()
            .unwrap()
    };
    let lib = prefix.join("lib/tessera").canonicalize().unwrap();
    let out = run(&["runtime"]);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stdout.contains(&format!("library: {}/onnxruntime/", lib.display()))
            && stdout.contains(&format!("shipped models: {}/models", lib.display())),
        "{stdout}"
    );
    let out = run(&[
        "phantom",
        "--size",
        "96x96x24",
        "--spacing",
        "2,2,5",
        "--nodules",
        "1",
        "--out",
        "study",
    ]);
    assert!(out.status.success(), "{:?}", text(&out));
    let detect = |extra: &[&str]| {
        let mut words = vec![
            "detect", "study", "--patch", "96x96x64", "--out", "det.json",
        ];
        words.extend(extra);
        let out = run(&words);
        assert!(out.status.success(), "{:?}", text(&out));
        out
    };
    let (summary, _) = text(&detect(&[]));
    assert!(
        summary.contains("the process's resident memory peaked at"),
        "{summary}"
    );
    assert!(!summary.contains("ProcessRss"), "{summary}");
    // The process's own high-water mark is its peak: `time`, a scheduler's accounting and
    // det.json agree (no phase measurement lowers what outside tools read at exit).
    let Some(time) = tool("time", "time") else {
        return;
    };
    let out = Command::new(time)
        .args(["-f", "max_rss_kib=%M"])
        .arg(prefix.join("bin/tessera"))
        .args([
            "detect", "study", "--patch", "96x96x64", "--out", "det.json", "--force",
        ])
        .current_dir(&elsewhere)
        .env_remove("ORT_DYLIB_PATH")
        .output()
        .unwrap();
    let (_, stderr) = text(&out);
    assert!(out.status.success(), "{stderr}");
    let max_rss_kib: u64 = stderr
        .lines()
        .find_map(|l| l.strip_prefix("max_rss_kib="))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let det: serde_json::Value =
        serde_json::from_slice(&std::fs::read(elsewhere.join("det.json")).unwrap()).unwrap();
    let peak = det["stats"]["peak_memory_bytes"].as_u64().unwrap();
    assert!(
        max_rss_kib * 1024 >= peak,
        "time says {max_rss_kib} KiB, det.json {peak} bytes"
    );
}
