//! One study of a batch: retrieved (a DICOMweb line), run (`tessera detect`, and `tessera sr`
//! with `--sr`) as child processes into a staging folder, then put in place as a whole with its
//! record, so that a study's folder is complete or absent, never half written.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use tessera_core::report::DetectionReport;
use tessera_dicom::volume::format_size;
use tessera_plan::device::CancelToken;

use super::BatchArgs;
use super::manifest::{Entry, Source};
use crate::common::batch::{SCHEMA, Status, StudyRecord};

/// What every study runs with.
pub struct Settings {
    exe: PathBuf,
    /// The `tessera detect` arguments after the study path.
    pub detect: Vec<String>,
    /// What makes two runs the same (with the model's hash): the detect options, the budget
    /// share, the threads.
    pub key: Vec<String>,
    ort_lib: Option<PathBuf>,
}

impl Settings {
    pub fn new(args: &BatchArgs, model_dir: &Path, ort_lib: Option<&Path>) -> Self {
        let jobs = u64::from(args.jobs);
        let mut key = args.detect.clone();
        let budget_share = args.memory_budget.map(|b| b / jobs);
        if let Some(share) = budget_share {
            key.extend(["--memory-budget".into(), share.to_string()]);
        }
        if args.jobs > 1 && !args.detect.iter().any(|a| a.starts_with("--threads")) {
            let cores = std::thread::available_parallelism().map_or(1, usize::from);
            let threads = (cores / args.jobs as usize).max(1);
            key.extend(["--threads".into(), threads.to_string()]);
        }
        let mut detect = vec!["--model".to_string(), model_dir.display().to_string()];
        detect.extend(key.iter().cloned());
        Self {
            // The running binary is the one that runs the studies.
            exe: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("tessera")),
            detect,
            key,
            ort_lib: ort_lib.map(Path::to_path_buf),
        }
    }

    fn command(&self, subcommand: &str) -> Command {
        let mut command = Command::new(&self.exe);
        command.arg(subcommand);
        if let (Some(lib), true) = (&self.ort_lib, subcommand == "detect") {
            command.arg("--ort-lib").arg(lib);
        }
        command
    }
}

/// Runs one study and puts its folder in place (unless cancelled); its record either way.
pub fn run(
    entry: &Entry,
    out: &Path,
    model_sha256: &str,
    settings: &Settings,
    sr: bool,
    cancel: &CancelToken,
) -> StudyRecord {
    let started = Instant::now();
    let staging = out.join(format!(".{}.partial-{}", entry.id, std::process::id()));
    let mut record = StudyRecord {
        schema: SCHEMA.into(),
        id: entry.id.clone(),
        line: entry.line,
        study: entry.describe(),
        study_path: PathBuf::new(),
        status: Status::Failed,
        error: None,
        model_sha256: model_sha256.into(),
        settings: settings.key.clone(),
        detections: 0,
        elapsed_s: 0.0,
        peak_memory_bytes: 0,
        plan: String::new(),
    };
    let result = steps(entry, out, &staging, settings, sr, cancel, &mut record);
    record.elapsed_s = started.elapsed().as_secs_f64();
    match result {
        Ok(()) => record.status = Status::Done,
        Err(reason) => {
            record.error = Some(reason);
            for name in ["det.json", "luna16.csv", "sr.dcm"] {
                // Ours, and partial: a failed study keeps only its log and record.
                let _ = std::fs::remove_file(staging.join(name));
            }
        }
    }
    if cancel.is_cancelled() {
        let _ = std::fs::remove_dir_all(&staging);
        return record;
    }
    if let Err(e) = put_in_place(&record, &staging, &out.join(&entry.id)) {
        record.status = Status::Failed;
        record.error = Some(format!("writing its folder: {e}"));
        let _ = std::fs::remove_dir_all(&staging);
    }
    record
}

fn steps(
    entry: &Entry,
    out: &Path,
    staging: &Path,
    settings: &Settings,
    sr: bool,
    cancel: &CancelToken,
    record: &mut StudyRecord,
) -> Result<(), String> {
    if staging.exists() {
        std::fs::remove_dir_all(staging)
            .map_err(|e| format!("clearing {}: {e}", staging.display()))?;
    }
    std::fs::create_dir_all(staging).map_err(|e| format!("creating {}: {e}", staging.display()))?;
    let log = staging.join("detect.log");
    let study = match &entry.source {
        Source::Path(path) => path.clone(),
        Source::Dicomweb { url, study_uid } => {
            let dir = out.join(".retrieved").join(&entry.id);
            if !dir.is_dir() {
                let mut pull = settings.command("pull");
                pull.arg(url)
                    .args(["--study", study_uid, "--out"])
                    .arg(&dir);
                child(
                    pull,
                    &staging.join("pull.log"),
                    cancel,
                    "retrieving the study",
                )?;
            }
            dir
        }
    };
    record.study_path = study.clone();
    let mut detect = settings.command("detect");
    detect
        .arg(&study)
        .args(&settings.detect)
        .arg("--out")
        .arg(staging.join("det.json"))
        .arg("--csv")
        .arg(staging.join("luna16.csv"));
    child(detect, &log, cancel, "detect")?;
    let report = DetectionReport::read_json(&staging.join("det.json"))
        .map_err(|e| format!("{:#}", anyhow::Error::new(e)))?;
    record.detections = report.detections.len();
    record.peak_memory_bytes = report.stats.memory.peak_memory_bytes;
    record.plan = format!(
        "{} ({} windows)",
        format_size(report.config.patch),
        report.stats.windows
    );
    if sr {
        let mut sr = settings.command("sr");
        sr.arg(staging.join("det.json"))
            .arg("--out")
            .arg(staging.join("sr.dcm"));
        child(sr, &staging.join("sr.log"), cancel, "the SR")?;
    }
    Ok(())
}

/// Runs `command` with its output in `log`; the reason when it fails: its last error line.
fn child(mut command: Command, log: &Path, cancel: &CancelToken, what: &str) -> Result<(), String> {
    let file =
        std::fs::File::create(log).map_err(|e| format!("creating {}: {e}", log.display()))?;
    let copy = file
        .try_clone()
        .map_err(|e| format!("{}: {e}", log.display()))?;
    command.stdout(Stdio::from(copy)).stderr(Stdio::from(file));
    let status = match crate::cmd::sweep::wait_for(command, cancel) {
        Ok(Some(status)) => status,
        Ok(None) => return Err("cancelled".into()),
        Err(e) => return Err(format!("{what}: {e:#}")),
    };
    if status.success() {
        return Ok(());
    }
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let reason = text
        .lines()
        .rev()
        .find(|l| l.starts_with("error:"))
        .or_else(|| text.lines().rev().find(|l| !l.trim().is_empty()))
        .unwrap_or("no message")
        .trim_start_matches("error: ")
        .to_string();
    Err(format!("{what} failed ({status}): {reason}"))
}

/// Writes the record into `staging` and moves it to `dir`, replacing a previous run's folder
/// only once the new one is complete.
fn put_in_place(record: &StudyRecord, staging: &Path, dir: &Path) -> std::io::Result<()> {
    let mut json = serde_json::to_vec_pretty(record).map_err(std::io::Error::other)?;
    json.push(b'\n');
    tessera_dicom::io::write_atomic(&staging.join("batch.json"), &json)?;
    let old = dir.with_file_name(format!(".{}.old-{}", record.id, std::process::id()));
    let had_old = dir.exists();
    if had_old {
        std::fs::rename(dir, &old)?;
    }
    std::fs::rename(staging, dir)?;
    if had_old {
        // The previous run's folder, ours: replaced.
        let _ = std::fs::remove_dir_all(&old);
    }
    Ok(())
}
