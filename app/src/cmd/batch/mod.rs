//! `tessera batch`: many studies with one model and one set of settings, each a `tessera detect`
//! child process (its memory its own, a crash its own), resumable, with a summary; or one
//! manifest line per task of a cluster's job array (`--task-index`, `SLURM_ARRAY_TASK_ID`,
//! `JOB_COMPLETION_INDEX`), and `--summary DIR` to collect the tasks' results.

mod manifest;
mod plan;
mod study;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::Instant;

use anyhow::Context as _;
use tessera_plan::bytes::format_bytes;
use tessera_plan::bytes::parse_bytes;
use tessera_plan::device::CancelToken;
use tessera_plan::model::{Model, default_detector};

use crate::common::batch::{self as record, MARKER, StudyRecord};
use manifest::{Entry, Source};

#[derive(Debug, clap::Args)]
pub struct BatchArgs {
    /// The manifest: `.csv` with a header (columns `study`, or `url` and `study_uid`; `id`
    /// optional) or `.jsonl` (the same as keys), one study a line.
    #[arg(required_unless_present = "summary")]
    pub manifest: Option<PathBuf>,
    /// Output folder: a folder per study (det.json, luna16.csv, sr.dcm with --sr, batch.json),
    /// and summary.csv and summary.md. New, empty, or a batch's own.
    #[arg(long, value_name = "DIR", required_unless_present_any = ["summary", "array_spec"])]
    pub out: Option<PathBuf>,
    /// Only collect the per-study results in DIR into its summary (after a job array).
    #[arg(long, value_name = "DIR", conflicts_with_all = ["manifest", "out", "task_index"])]
    pub summary: Option<PathBuf>,
    /// Print what a job array needs and exit: `studies=N` (the array is 0 to N-1) and
    /// `mem_mib=M` (the largest predicted peak of any study's plan, with 10 % headroom), as
    /// `scripts/slurm/submit.sh` reads them; with --out, that folder is made the batch's.
    #[arg(long, conflicts_with_all = ["summary", "task_index"])]
    pub array_spec: bool,
    /// Run only this study of the manifest (0-based); default: $SLURM_ARRAY_TASK_ID, else
    /// $JOB_COMPLETION_INDEX, else every study. Writes no summary (see --summary).
    #[arg(long, value_name = "N")]
    pub task_index: Option<usize>,
    /// Studies run at once; the threads and the memory budget are split between them.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub jobs: u32,
    /// Model folder (with model.json). Default: the shipped detector.
    #[arg(long, value_name = "DIR")]
    pub model: Option<PathBuf>,
    /// Memory budget for the whole batch (16GiB, 512M, 2GB), split between the jobs: each
    /// study's patch is chosen for its share, and a share no study's plan fits is refused
    /// before the first study runs.
    #[arg(long, value_parser = parse_bytes, value_name = "SIZE")]
    pub memory_budget: Option<u64>,
    /// Also write each study's findings as a DICOM SR (sr.dcm; DICOM studies only).
    #[arg(long)]
    pub sr: bool,
    #[command(flatten)]
    pub ort_lib: super::flags::OrtLib,
    /// More `tessera detect` options for every study, after `--` (e.g. `-- --patch
    /// 256x256x64 --device cuda:0`).
    #[arg(last = true, value_name = "DETECT OPTIONS")]
    pub detect: Vec<String>,
}

/// Exit code when a study failed (the others ran).
const EXIT_SOME_FAILED: u8 = 1;
const EXIT_REFUSED: u8 = 2;
const EXIT_CANCELLED: u8 = 130;

pub fn run(args: &BatchArgs, ort_lib: Option<&Path>) -> anyhow::Result<ExitCode> {
    if let Some(dir) = &args.summary {
        let records = record::write_summary(dir)
            .with_context(|| format!("collecting the results in {}", dir.display()))?;
        println!("{}", record::summary(&records).1);
        return Ok(exit_for(&records));
    }
    let Some(manifest) = &args.manifest else {
        anyhow::bail!("give a MANIFEST and --out DIR, or --summary DIR");
    };
    let entries = match manifest::read(manifest) {
        Ok(entries) => entries,
        Err(refusal) => {
            eprintln!("error: {refusal}");
            return Ok(ExitCode::from(EXIT_REFUSED));
        }
    };
    let task = task_index(args.task_index)?;
    let chosen: Vec<Entry> = match task {
        Some(i) => vec![entries.get(i).cloned().ok_or_else(|| {
            anyhow::anyhow!(
                "task index {i}, but {} holds {} studies (0 to {})",
                manifest.display(),
                entries.len(),
                entries.len() - 1
            )
        })?],
        None => entries,
    };
    let model_dir = match &args.model {
        Some(dir) => dir.clone(),
        None => default_detector()?,
    };
    let model = Model::load(&model_dir)
        .with_context(|| format!("loading the model in {}", model_dir.display()))?;
    let settings = study::Settings::new(args, &model_dir, ort_lib);
    let template = match plan::Template::parse(&settings.detect, model.clone()) {
        Ok(t) => t,
        Err(refusal) => {
            eprintln!("error: {refusal:#}");
            return Ok(ExitCode::from(EXIT_REFUSED));
        }
    };
    if let Some(out) = &args.out {
        claim(out)?;
    }
    if args.array_spec {
        return array_spec(&chosen, &template);
    }
    let Some(out) = &args.out else {
        anyhow::bail!("give --out DIR");
    };
    let (todo, done): (Vec<Entry>, Vec<Entry>) = chosen
        .into_iter()
        .partition(|e| !already_done(out, e, &model.sha256, &settings, args.sr));
    if task.is_none()
        && let Err(refusal) = check_plans(&todo, &template)
    {
        eprintln!("error: {refusal:#}");
        return Ok(ExitCode::from(EXIT_REFUSED));
    }
    for e in &done {
        eprintln!("{}: done before with these settings, skipped", e.id);
    }
    let cancel = CancelToken::new();
    let on_signal = cancel.clone();
    // One handler per process; a second install (tests) keeps the first.
    let _ = ctrlc::set_handler(move || on_signal.cancel());
    // The summary is the folder's records (earlier runs' too), kept here as studies finish;
    // one task of an array writes none.
    let mut summary = match task {
        None => Some(record::collect(out)?),
        Some(_) => None,
    };
    let finished = run_all(
        &todo,
        out,
        &model.sha256,
        &settings,
        args,
        &cancel,
        summary.as_mut(),
    )?;
    if cancel.is_cancelled() {
        eprintln!(
            "cancelled: the studies in flight were stopped and left nothing; run again to go on"
        );
        return Ok(ExitCode::from(EXIT_CANCELLED));
    }
    let Some(records) = summary else {
        return Ok(exit_for(&finished));
    };
    record::write_summary_of(out, &records)?;
    eprintln!("wrote {}", out.join("summary.md").display());
    Ok(exit_for(&records))
}

/// The plans, checked before the first study runs (a whole batch, not one task of an array):
/// when no study's plan can be made and some were refused (a budget no plan fits, a patch
/// that covers every volume), the settings are at fault and the batch is refused now. Stops at
/// the first study that can run; a damaged study (headers unreadable) is passed over here and
/// fails on its own turn, with its record.
fn check_plans(todo: &[Entry], template: &plan::Template) -> anyhow::Result<()> {
    let mut first_refusal = None;
    for entry in todo {
        let Source::Path(path) = &entry.source else {
            return Ok(()); // not retrieved yet: it may run
        };
        match template.forecast(path) {
            Ok(_) => return Ok(()),
            // Damaged: says nothing of the settings; it fails on its own turn.
            Err(plan::NoPlan::Unreadable(_)) => {}
            Err(e @ plan::NoPlan::Refused(_)) => {
                eprintln!("{}: {e}", entry.id);
                first_refusal.get_or_insert(format!("{}: {e}", entry.id));
            }
        }
    }
    match first_refusal {
        Some(e) => anyhow::bail!("no study of the batch can run, nothing was started (e.g. {e})"),
        None => Ok(()),
    }
}

/// `studies=N` and `mem_mib=M` for a job array (see `--array-spec`).
fn array_spec(entries: &[Entry], template: &plan::Template) -> anyhow::Result<ExitCode> {
    let mut peak: Option<u64> = None;
    for entry in entries {
        if let Source::Path(path) = &entry.source {
            match template.forecast(path) {
                Ok(forecast) => peak = peak.max(forecast.predicted_peak_bytes),
                Err(e) => eprintln!("{}: {e}", entry.id),
            }
        }
    }
    println!("studies={}", entries.len());
    match peak {
        Some(bytes) => {
            let with_headroom = tessera_plan::patch::least_budget_bytes(bytes);
            println!("mem_mib={}", with_headroom.div_ceil(1 << 20));
        }
        None => eprintln!(
            "no memory prediction (no calibration for this model and device, or no study's plan could be made): set --mem yourself"
        ),
    }
    Ok(ExitCode::SUCCESS)
}

fn exit_for(records: &[StudyRecord]) -> ExitCode {
    if records.iter().all(StudyRecord::is_done) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_SOME_FAILED)
    }
}

/// `--task-index`, else the scheduler's index (Slurm, then Kubernetes), else none.
fn task_index(flag: Option<usize>) -> anyhow::Result<Option<usize>> {
    if flag.is_some() {
        return Ok(flag);
    }
    for var in ["SLURM_ARRAY_TASK_ID", "JOB_COMPLETION_INDEX"] {
        if let Ok(value) = std::env::var(var) {
            let index = value
                .trim()
                .parse()
                .with_context(|| format!("{var}={value:?} is not a task index"))?;
            return Ok(Some(index));
        }
    }
    Ok(None)
}

/// Makes `out` a batch's folder: new, empty, or already one (its marker file); anything else
/// is someone else's and refused before anything is written.
fn claim(out: &Path) -> anyhow::Result<()> {
    let marker = out.join(MARKER);
    if out.exists() && !marker.is_file() {
        let mut entries = std::fs::read_dir(out)
            .with_context(|| format!("reading the output folder {}", out.display()))?;
        if entries.next().is_some() {
            return Err(
                super::outputs::Refused(tessera_dicom::io::OutputError::NotOurFolder {
                    path: out.to_path_buf(),
                    reason: format!("no {MARKER} file in it"),
                })
                .into(),
            );
        }
    }
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    tessera_dicom::io::write_atomic(&marker, b"tessera batch output folder\n")
        .with_context(|| format!("writing {}", marker.display()))?;
    Ok(())
}

/// Whether `entry`'s folder holds complete outputs of the same model and settings.
fn already_done(
    out: &Path,
    entry: &Entry,
    model_sha256: &str,
    settings: &study::Settings,
    sr: bool,
) -> bool {
    let dir = out.join(&entry.id);
    StudyRecord::read(&dir.join("batch.json")).is_ok_and(|r| {
        r.outputs_complete(&dir, sr) && r.model_sha256 == model_sha256 && r.settings == settings.key
    })
}

/// Runs `todo` with `args.jobs` studies at once, each on a named thread that runs its child
/// processes; each finished study's folder goes into place as a whole, then (unless one task
/// of an array) the summary is rewritten.
fn run_all(
    todo: &[Entry],
    out: &Path,
    model_sha256: &str,
    settings: &study::Settings,
    args: &BatchArgs,
    cancel: &CancelToken,
    mut summary: Option<&mut Vec<StudyRecord>>,
) -> anyhow::Result<Vec<StudyRecord>> {
    let started = Instant::now();
    let total = todo.len();
    let mut failed = 0;
    let (send, receive) = mpsc::channel::<StudyRecord>();
    let mut queue = todo.iter();
    let mut running = 0;
    let mut finished: Vec<StudyRecord> = Vec::new();
    std::thread::scope(|scope| -> anyhow::Result<()> {
        loop {
            while running < args.jobs as usize && !cancel.is_cancelled() {
                let Some(entry) = queue.next() else { break };
                eprintln!("{}: started ({})", entry.id, entry.describe());
                let send = send.clone();
                std::thread::Builder::new()
                    .name(format!("tessera-batch-{}", entry.id))
                    .spawn_scoped(scope, move || {
                        let record =
                            study::run(entry, out, model_sha256, settings, args.sr, cancel);
                        // The receiver outlives every worker (it loops until none runs).
                        let _ = send.send(record);
                    })
                    .context("starting a batch worker thread")?;
                running += 1;
            }
            if running == 0 {
                return Ok(());
            }
            let Ok(record) = receive.recv() else {
                return Ok(());
            };
            running -= 1;
            if cancel.is_cancelled() {
                continue;
            }
            failed += usize::from(!record.is_done());
            let done = finished.len() + 1;
            let remaining = total - done;
            let eta_s = started.elapsed().as_secs_f64() / done as f64 * remaining as f64;
            eprintln!(
                "[{done}/{total}] {}: {} | {failed} failed, {remaining} to go{}",
                record.id,
                describe(&record),
                if remaining > 0 {
                    format!(", about {eta_s:.0} s left")
                } else {
                    String::new()
                }
            );
            if let Some(records) = summary.as_deref_mut() {
                record::upsert(records, record.clone());
                record::write_summary_of(out, records)?;
            }
            finished.push(record);
        }
    })?;
    Ok(finished)
}

fn describe(record: &StudyRecord) -> String {
    match &record.error {
        Some(e) => format!("FAILED: {e}"),
        None => format!(
            "{} detection(s) in {:.1} s, peak {}, patch {}",
            record.detections,
            record.elapsed_s,
            format_bytes(record.peak_memory_bytes),
            record.plan
        ),
    }
}
