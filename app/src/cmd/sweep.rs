//! `tessera sweep`: the hardware profiling report. Runs the detector at several patch sizes
//! (each in a fresh process, so that memory figures do not leak between runs), checks each
//! against a reference run, fits the memory model, and writes `report.md`, `sweep.csv`,
//! `memory.svg`, `memory.png` and `memory_model.json` into the output folder.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::Context as _;
use tessera_core::parity::{ParityReport, Tolerances, compare};
use tessera_core::report::DetectionReport;
use tessera_dicom::volume::format_size;
use tessera_plan::blend::BlendMode;
use tessera_plan::bytes::format_bytes;
use tessera_plan::bytes::parse_bytes;
use tessera_plan::device::CpuAllocator;
use tessera_plan::device::Device;
use tessera_plan::memory::calibrate::{self, Calibration};
use tessera_plan::memory::file::MemoryModelFile;
use tessera_plan::memory::line::MemoryModel;
use tessera_plan::memory::measured::MeasuredRun;
use tessera_plan::model::Model;
use tessera_plan::model_grid::ModelGrid;
use tessera_plan::request::{DetectConfig, PatchChoice};

use super::chart::{ChartData, ChartPoint};
use crate::common::parse::parse_size;

#[derive(Debug, clap::Args)]
pub struct SweepArgs {
    #[command(flatten)]
    pub ort_lib: super::flags::OrtLib,
    /// A DICOM file or folder. Without it: the built-in demo study.
    pub path: Option<PathBuf>,
    /// Model folder (with model.json). Default: the shipped detector.
    #[arg(long, value_name = "DIR")]
    pub model: Option<PathBuf>,
    /// Comma-separated `XxYxZ` patches in voxels of the model's grid. Default: derived from
    /// the volume and the model (and, with a budget and a card that records memory, the patch
    /// the budget would choose).
    #[arg(long, value_name = "XxYxZ,...")]
    pub patches: Option<String>,
    /// What every run is compared with: `whole` (one window over the volume, allowed here on
    /// purpose) or a patch `XxYxZ`.
    #[arg(long, default_value = "whole", value_name = "whole|XxYxZ")]
    pub reference: String,
    /// How overlapping windows combine, in every run. Default: the card's tiling (a MONAI
    /// bundle's sliding window), else halo.
    #[arg(long, value_parser = super::flags::blend())]
    pub blend: Option<BlendMode>,
    /// Fraction of a window shared with its neighbour, in [0, 1) (gaussian and constant).
    /// Default: the card's tiling, else 0.25.
    #[arg(long, value_parser = super::flags::overlap, value_name = "FRACTION")]
    pub overlap: Option<f64>,
    /// Where inference runs: cpu, cuda:N or tensorrt:N.
    #[arg(long, default_value = "cpu", value_name = "DEVICE")]
    pub device: Device,
    /// Host memory strategy of ONNX Runtime on the CPU.
    #[arg(long, default_value = "none", value_parser = super::flags::allocator())]
    pub allocator: CpuAllocator,
    /// CPU threads for inference in each run, 1 to 1024 (default: all cores).
    #[arg(long, value_name = "N", value_parser = super::flags::threads)]
    pub threads: Option<usize>,
    /// Interpolate over missing or unreadable slices instead of refusing the series.
    #[arg(long)]
    pub allow_gaps: bool,
    /// Write into a folder inside the input study (never over an input file).
    #[arg(long)]
    pub force: bool,
    /// A memory budget (16GiB, 512M, 2GB): drawn on the chart, used for the "fits" column,
    /// and its chosen patch is swept too.
    #[arg(long, value_parser = parse_bytes, value_name = "SIZE", long_help = format!("A memory budget (16GiB, 512M, 2GB): drawn on the chart, used for the \"fits\" column, and its chosen patch is swept too. Units: {}.", super::flags::SIZE_UNITS))]
    pub memory_budget: Option<u64>,
    /// Largest score difference of a matched detection for "match", 0 to 1.
    #[arg(long, default_value_t = 1e-4, value_name = "SCORE", value_parser = super::flags::score)]
    pub score_tol: f32,
    /// Largest difference of any box face for "match", in voxels of the model grid (0 or more).
    #[arg(long, default_value_t = 0.5, value_name = "VOXELS", value_parser = super::flags::non_negative)]
    pub box_tol_voxels: f64,
    /// Folder for report.md, sweep.csv, memory.svg/.png, memory_model.json and runs/.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
}

/// One row of the report.
#[derive(Debug, Clone)]
pub struct Row {
    pub label: String,
    pub patch: [usize; 3],
    pub report: DetectionReport,
    pub parity: Option<ParityReport>,
    pub wall_s: f64,
}

impl Row {
    /// Its largest main window, as the run recorded it.
    fn largest_window_voxels(&self) -> usize {
        self.report.stats.memory.windows_largest_voxels
    }

    /// Its memory, as the calibration reads it.
    fn measured(&self) -> MeasuredRun {
        self.report.stats.measured()
    }

    /// The bound `memory` gives this run: its own baseline and held memory plus the larger
    /// of its windows' and its coarse pass's.
    pub fn predicted_bytes(&self, memory: &MemoryModel) -> u64 {
        self.measured().predicted_bytes(*memory)
    }
}

/// What a sweep runs on: the model, the study and its geometry, and its output files
/// (checked: they would not touch the study).
struct Setup {
    model_dir: PathBuf,
    model: Model,
    study: PathBuf,
    geometry: tessera_dicom::Geometry,
    outputs: Vec<PathBuf>,
}

fn setup(args: &SweepArgs) -> anyhow::Result<Setup> {
    let model_dir = match &args.model {
        Some(dir) => dir.clone(),
        None => tessera_plan::model::default_detector()?,
    };
    let model = Model::load(&model_dir)
        .with_context(|| format!("loading the model in {}", model_dir.display()))?;
    let study = crate::common::demo::study_or_demo(args.path.as_deref())?;
    let options = tessera_dicom::dicom::LoadOptions {
        allow_gaps: args.allow_gaps,
    };
    let scan = tessera_dicom::dicom::scan(&study)
        .with_context(|| format!("scanning {}", study.display()))?;
    let outputs: Vec<PathBuf> = OUTPUT_FILES.iter().map(|f| args.out.join(f)).collect();
    let output_refs: Vec<&Path> = outputs.iter().map(PathBuf::as_path).collect();
    super::outputs::check(
        &output_refs,
        &super::outputs::inputs_of(&study, &scan),
        args.force,
    )?;
    let series = tessera_dicom::dicom::choose(&scan, &study, None)?;
    let geometry = tessera_dicom::dicom::layout(series, options)
        .with_context(|| format!("opening {}", study.display()))?
        .geometry;
    Ok(Setup {
        model_dir,
        model,
        study,
        geometry,
        outputs,
    })
}

/// `memory_model.json`: the fitted model and the runs it was fitted on.
fn memory_file(
    args: &SweepArgs,
    model: &Model,
    calibration: Calibration,
) -> anyhow::Result<Vec<u8>> {
    Ok(serde_json::to_vec_pretty(&MemoryModelFile {
        model_name: model.card.name.clone(),
        model_sha256: model.sha256.clone(),
        device: args.device.to_string(),
        allocator: args.allocator.to_string(),
        model: calibration.model,
        points: calibration.points,
    })?)
}

/// `(label, patch)` of every run: the reference first, then the patches to sweep.
fn runs_to_make(
    args: &SweepArgs,
    geometry: &tessera_dicom::Geometry,
    model: &Model,
    whole: [usize; 3],
) -> anyhow::Result<Vec<(String, [usize; 3])>> {
    let reference = if args.reference == "whole" {
        whole
    } else {
        parse_size(&args.reference).map_err(anyhow::Error::msg)?
    };
    let patches = patches_to_sweep(args, geometry, model, whole)?;
    Ok(std::iter::once(("reference".to_string(), reference))
        .chain(patches.into_iter().map(|p| (format_size(p), p)))
        .collect())
}

/// The patches to sweep: `--patches`, or the derived list (with the budget's choice first,
/// when a budget and a memory model give one).
fn patches_to_sweep(
    args: &SweepArgs,
    geometry: &tessera_dicom::Geometry,
    model: &Model,
    whole: [usize; 3],
) -> anyhow::Result<Vec<[usize; 3]>> {
    if let Some(list) = &args.patches {
        return list
            .split(',')
            .filter(|p| !p.trim().is_empty())
            .map(|p| parse_size(p.trim()).map_err(anyhow::Error::msg))
            .collect();
    }
    let mut list = derived_patches(whole, model.card.grid());
    if let Some(budget_bytes) = args.memory_budget
        && let Ok(chosen) = tessera_plan::request::resolve_patch(
            geometry,
            model,
            &config(args, model, whole),
            PatchChoice::Budget { budget_bytes },
        )
        && !list.contains(&chosen.patch)
    {
        list.insert(0, chosen.patch);
    }
    Ok(list)
}

/// The child `tessera detect` of one run, `[patch, whole]` in the model's voxels, with the
/// sweep's flags.
fn sweep_command(
    args: &SweepArgs,
    exe: &Path,
    study: &Path,
    model_dir: &Path,
    [patch, whole]: [[usize; 3]; 2],
    out: &Path,
    ort_lib: Option<&Path>,
) -> Command {
    let mut command = detect_command(exe, study, model_dir, patch, whole, args.threads, out);
    if let Some(lib) = ort_lib {
        command.arg("--ort-lib").arg(lib);
    }
    if args.allow_gaps {
        command.arg("--allow-gaps");
    }
    if args.force {
        command.arg("--force");
    }
    // Without them the child takes the card's tiling, as `config` does.
    if let Some(blend) = args.blend {
        command.args(["--blend", &blend.to_string()]);
    }
    if let Some(overlap) = args.overlap {
        command.args(["--overlap", &overlap.to_string()]);
    }
    command
        .args([
            "--device",
            &args.device.to_string(),
            "--allocator",
            &args.allocator.to_string(),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    command
}

/// Runs `command` to its end; `None` when `cancel` fired (the child is killed, not left).
/// Runs `command` to its end, or kills it when `cancel` is set (`None`).
pub(crate) fn wait_for(
    mut command: Command,
    cancel: &tessera_plan::device::CancelToken,
) -> anyhow::Result<Option<std::process::ExitStatus>> {
    let mut child = command.spawn().context("running tessera detect")?;
    loop {
        if cancel.is_cancelled() {
            // Best effort: it may have just ended by itself.
            let _ = child.kill();
            let _ = child.wait();
            return Ok(None);
        }
        match child.try_wait().context("waiting for tessera detect")? {
            Some(status) => return Ok(Some(status)),
            None => std::thread::sleep(std::time::Duration::from_millis(50)),
        }
    }
}

/// Each run's parity with the first (the reference).
fn compare_to_reference(rows: &mut [Row], args: &SweepArgs) {
    let tolerances = Tolerances {
        score: args.score_tol,
        box_voxels: args.box_tol_voxels,
    };
    let Some((reference, rest)) = rows.split_first_mut() else {
        return;
    };
    for row in rest {
        row.parity = Some(compare(&reference.report, &row.report, tolerances));
    }
}

/// The runs as the chart draws them. The bound adds to each run's baseline and held memory;
/// the runs share a study, so the reference's.
fn chart_data(rows: &[Row]) -> ChartData {
    let reference = rows.first().map(|r| &r.report.stats);
    ChartData {
        points: rows
            .iter()
            .map(|r| ChartPoint {
                patch: r.patch,
                largest_window_voxels: r.largest_window_voxels(),
                peak_bytes: r.report.stats.memory.peak_memory_bytes,
                inference_s: r.report.stats.inference_s,
            })
            .collect(),
        baseline_bytes: reference.map_or(0, |s| s.memory.baseline_memory_bytes),
        held: reference.map(|s| s.measured().held()).unwrap_or_default(),
    }
}

/// The configuration of one sweep run (the child's flags say the same).
fn config(args: &SweepArgs, model: &Model, patch: [usize; 3]) -> DetectConfig {
    let mut config = DetectConfig::defaults_for(model);
    config.tile.patch = patch;
    config.tile.overlap = args.overlap.unwrap_or(config.tile.overlap);
    config.tile.blend = args.blend.unwrap_or(config.tile.blend);
    config.tile.allow_single_pass = true;
    config.device = args.device;
    config.allocator = args.allocator;
    config
}

/// The files a sweep leaves in its output folder, all written together at the end.
const OUTPUT_FILES: [&str; 5] = [
    "memory_model.json",
    "sweep.csv",
    "report.md",
    "memory.svg",
    "memory.png",
];

/// Exit code after Ctrl-C or SIGTERM, as shells report SIGINT.
const EXIT_CANCELLED: u8 = 130;

/// Runs the sweep. Its runs and charts go to a staging folder inside `--out` first; the report
/// files and `runs/` appear only when every run succeeded. Ctrl-C or SIGTERM stops the run in
/// flight (its process is killed, not left behind) and removes the staging folder.
pub fn run(args: &SweepArgs, ort_lib: Option<&Path>) -> anyhow::Result<std::process::ExitCode> {
    let cancel = tessera_plan::device::CancelToken::new();
    let on_signal = cancel.clone();
    // Only one handler per process; a second install (tests calling run twice) keeps the first.
    let _ = ctrlc::set_handler(move || on_signal.cancel());
    let staging = args.out.join(format!(".sweep-{}", std::process::id()));
    let result = sweep(args, ort_lib, &staging, &cancel);
    if staging.exists() {
        // Ours: runs and charts of an unfinished sweep, or the staging left after moving.
        let _ = std::fs::remove_dir_all(&staging);
    }
    match result {
        Ok(true) => Ok(std::process::ExitCode::SUCCESS),
        Ok(false) => {
            eprintln!("cancelled: the run in flight was stopped, nothing written");
            Ok(std::process::ExitCode::from(EXIT_CANCELLED))
        }
        Err(e) => Err(e),
    }
}

/// The sweep proper; `Ok(false)` when cancelled.
fn sweep(
    args: &SweepArgs,
    ort_lib: Option<&Path>,
    staging: &Path,
    cancel: &tessera_plan::device::CancelToken,
) -> anyhow::Result<bool> {
    let Setup {
        model_dir,
        model,
        study,
        geometry,
        outputs,
    } = setup(args)?;
    let size = tessera_plan::request::model_geometry(&geometry, &model).size;
    let whole = model.card.grid().padded(size);
    let runs = runs_to_make(args, &geometry, &model, whole)?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let runs_dir = staging.join("runs");
    std::fs::create_dir_all(&runs_dir)
        .with_context(|| format!("creating {}", runs_dir.display()))?;
    let exe = std::env::current_exe().context("finding the tessera executable")?;

    let total = runs.len();
    let mut rows = Vec::with_capacity(total);
    for (k, (label, patch)) in runs.into_iter().enumerate() {
        eprintln!("[{}/{total}] {label}: patch {}", k + 1, format_size(patch));
        let out = runs_dir.join(format!("{}.json", label.replace('x', "_")));
        let started = std::time::Instant::now();
        let command = sweep_command(
            args,
            &exe,
            &study,
            &model_dir,
            [patch, whole],
            &out,
            ort_lib,
        );
        let Some(status) = wait_for(command, cancel)? else {
            return Ok(false);
        };
        if !status.success() {
            anyhow::bail!(
                "the run with patch {} failed ({status})",
                format_size(patch)
            );
        }
        rows.push(Row {
            label,
            patch,
            report: DetectionReport::read_json(&out)?,
            parity: None,
            wall_s: started.elapsed().as_secs_f64(),
        });
    }
    compare_to_reference(&mut rows, args);
    let calibration = calibrate::fit(&rows.iter().map(Row::measured).collect::<Vec<_>>());
    let memory = calibration.as_ref().map(|c| c.model);
    let memory_json = match calibration {
        Some(c) => Some(memory_file(args, &model, c)?),
        None => None,
    };
    let csv = csv(&rows, memory.as_ref());
    let report = markdown(&rows, memory.as_ref(), args, &study, size);
    super::chart::memory_chart(
        &chart_data(&rows),
        memory.as_ref(),
        args.memory_budget,
        staging,
    )?;
    let read = |name: &str| {
        let path = staging.join(name);
        std::fs::read(&path).with_context(|| format!("reading {}", path.display()))
    };
    let (svg, png) = (read("memory.svg")?, read("memory.png")?);
    let mut files: Vec<(&Path, &[u8])> = vec![
        (&outputs[1], csv.as_bytes()),
        (&outputs[2], report.as_bytes()),
        (&outputs[3], &svg),
        (&outputs[4], &png),
    ];
    if let Some(json) = &memory_json {
        files.push((&outputs[0], json));
    }
    if cancel.is_cancelled() {
        return Ok(false);
    }
    tessera_dicom::io::write_set(&files)?;
    // runs/ replaces the previous sweep's (ours, written the same way).
    let runs = args.out.join("runs");
    if runs.is_dir() {
        std::fs::remove_dir_all(&runs).with_context(|| format!("replacing {}", runs.display()))?;
    }
    std::fs::rename(&runs_dir, &runs).with_context(|| format!("moving {}", runs.display()))?;
    println!("{report}");
    eprintln!(
        "wrote {}/report.md, sweep.csv, memory.svg, memory.png{}, runs/",
        args.out.display(),
        if memory_json.is_some() {
            ", memory_model.json"
        } else {
            ""
        }
    );
    Ok(true)
}

/// Full axial context at decreasing depths, then narrower x/y at a middle depth.
fn derived_patches(whole: [usize; 3], grid: ModelGrid) -> Vec<[usize; 3]> {
    let on_stride = |a: usize, v: usize| grid.down_to_stride(a, v).max(grid.smallest_side(a));
    let mut out = Vec::new();
    for fraction in [0.75, 0.5, 0.375, 0.25] {
        let z = on_stride(2, (whole[2] as f64 * fraction) as usize);
        out.push([whole[0], whole[1], z]);
    }
    let mid = on_stride(2, whole[2] / 2);
    for fraction in [0.5, 0.375] {
        out.push([
            on_stride(0, (whole[0] as f64 * fraction) as usize),
            on_stride(1, (whole[1] as f64 * fraction) as usize),
            mid,
        ]);
    }
    out.dedup();
    out
}

/// "match: all 12 paired, scores within 3.0e-7, faces within 0.00 vx", or what differs.
fn parity_cell(p: Option<&ParityReport>) -> String {
    let Some(p) = p else {
        return "reference".into();
    };
    let verdict = if p.within_tolerance {
        "match"
    } else {
        "DIFFERS"
    };
    if p.count_a == 0 && p.count_b == 0 {
        return format!("{verdict}: no detections in either run");
    }
    let paired = p.pairs.len();
    let unpaired = match (p.only_a.len(), p.only_b.len()) {
        (0, 0) => format!("all {paired} paired"),
        (a, b) => format!("{paired} paired, {a} only in the reference, {b} only in this run"),
    };
    if paired == 0 {
        return format!("{verdict}: {unpaired}");
    }
    format!(
        "{verdict}: {unpaired}, scores within {:.1e}, faces within {:.2} vx",
        p.max_score_difference, p.max_face_difference_voxels
    )
}

fn csv(rows: &[Row], memory: Option<&MemoryModel>) -> String {
    let mut s = String::from(
        "label,patch,windows,recompute_factor,largest_window_voxels,peak_memory_bytes,predicted_peak_bytes,inference_s,wall_s,detections,matches_reference,only_reference,only_run,max_score_difference,max_face_difference_voxels\n",
    );
    for r in rows {
        let p = r.parity.as_ref();
        let _ = writeln!(
            s,
            "{},{},{},{:.4},{},{},{},{:.3},{:.3},{},{},{},{},{:e},{:.4}",
            r.label,
            format_size(r.patch),
            r.report.stats.windows,
            r.report.plan.recompute_factor,
            r.largest_window_voxels(),
            r.report.stats.memory.peak_memory_bytes,
            memory.map_or(String::new(), |m| r.predicted_bytes(m).to_string()),
            r.report.stats.inference_s,
            r.wall_s,
            r.report.detections.len(),
            p.is_none_or(|p| p.within_tolerance),
            p.map_or(0, |p| p.only_a.len()),
            p.map_or(0, |p| p.only_b.len()),
            p.map_or(0.0, |p| p.max_score_difference),
            p.map_or(0.0, |p| p.max_face_difference_voxels),
        );
    }
    s
}

fn markdown(
    rows: &[Row],
    memory: Option<&MemoryModel>,
    args: &SweepArgs,
    study: &Path,
    size: [usize; 3],
) -> String {
    let first = &rows[0].report;
    let mut s = String::from("# Tessera hardware profiling report\n\n");
    let _ = writeln!(
        s,
        "- study: `{}` ({} voxels on the model grid, spacing {:?} mm)",
        study.display(),
        format_size(size),
        first.plan.model_spacing_mm
    );
    let _ = writeln!(
        s,
        "- model: {} (sha256 {})",
        first.model.name, first.model.sha256
    );
    let _ = writeln!(
        s,
        "- device: {}, execution provider {}, precision {}, allocator {}, {} threads, ONNX Runtime {}",
        first.config.device,
        first.runtime.execution_provider,
        first.config.precision,
        first.config.allocator,
        first.config.threads,
        first.runtime.onnxruntime
    );
    let _ = writeln!(
        s,
        "- blend {}, overlap {}, memory measured: {}",
        first.config.blend, first.config.overlap, first.stats.memory.memory_source
    );
    let _ = writeln!(s, "- tool: tessera {}\n", first.tool.version);
    s.push_str("| patch | windows | recompute | peak memory | forecast before the run | refitted bound | inference s | wall s | fits budget | output parity |\n");
    s.push_str("|---|---|---|---|---|---|---|---|---|---|\n");
    for r in rows {
        let measured = r.report.stats.memory.peak_memory_bytes;
        let against = |predicted: u64| {
            format!(
                "{} ({:+.1} %)",
                format_bytes(predicted),
                (predicted as f64 - measured as f64) / measured as f64 * 100.0
            )
        };
        let forecast = r
            .report
            .plan
            .predicted_peak_bytes
            .map_or("-".into(), against);
        let refitted = memory.map_or("-".into(), |m| against(r.predicted_bytes(m)));
        let fits = args.memory_budget.map_or("-".into(), |b| {
            if measured <= b {
                "yes".to_string()
            } else {
                "no".to_string()
            }
        });
        let _ = writeln!(
            s,
            "| {}{} | {} | {:.3} | {} | {} | {} | {:.2} | {:.2} | {} | {} |",
            format_size(r.patch),
            if r.parity.is_none() {
                " (reference)"
            } else {
                ""
            },
            r.report.stats.windows,
            r.report.plan.recompute_factor,
            format_bytes(measured),
            forecast,
            refitted,
            r.report.stats.inference_s,
            r.wall_s,
            fits,
            parity_cell(r.parity.as_ref())
        );
    }
    match memory {
        Some(m) => {
            let _ = writeln!(
                s,
                "\nMemory model (an upper bound over every pass of these runs, {}): peak ≤ the run's baseline + its stitched maps + {} + {:.1} bytes x window voxels, or, when larger, while the coarse pass runs, the same with its grid and maps added and its own largest window, or, after the passes, the lung field + {} (decoding, the lung field, the rescoring stage). Calibration: `memory_model.json`.",
                m.describe(),
                format_bytes(m.fixed_bytes.max(0.0) as u64),
                m.bytes_per_voxel,
                format_bytes(m.later_steps_bytes.max(0.0) as u64)
            );
        }
        None => s.push_str("\nMemory model: not enough distinct window sizes to fit.\n"),
    }
    s.push_str("\nPeak memory is the process's resident-set high-water mark during the run (host memory on CPU); the baseline is what the process held when the run started (the study and its resampled copy); what a run holds for the study is its stitched output maps (and, while the coarse pass runs after the main windows, that pass's grid and maps; after the passes, the lung field), computed from the study's size. The line is fitted on each pass's own peak above what the pass holds, the steps after the passes are the most they needed in any run plus the spread between runs or 1 %, whichever is more; a bound = baseline + maps + the largest of the phases' bounds. Each bound is followed by (bound - measured) / measured: positive is room to spare, negative a run over its bound. The forecast before the run is what `tessera detect` predicted from the calibration it had (the card's, or --memory-model): the out-of-sample check. The refitted bound is the memory model above, fitted on these same runs: it shows how well the line fits them, not how well it predicts; its header's figure is measured on each pass of each run, so it can exceed every row's whole-run figure.\n");
    s
}

/// `tessera detect` as a child process (a fresh process per run, so memory figures do not leak
/// between runs): study, model, patch, output, and `--allow-single-pass` when the patch covers
/// the volume. Callers add their own options.
pub fn detect_command(
    exe: &Path,
    study: &Path,
    model: &Path,
    patch: [usize; 3],
    whole: [usize; 3],
    threads: Option<usize>,
    out: &Path,
) -> Command {
    let mut command = Command::new(exe);
    command
        .arg("detect")
        .arg(study)
        .arg("--model")
        .arg(model)
        .args(["--patch", &format_size(patch)])
        .arg("--out")
        .arg(out);
    if (0..3).all(|a| patch[a] >= whole[a]) {
        command.arg("--allow-single-pass");
    }
    if let Some(t) = threads {
        command.args(["--threads", &t.to_string()]);
    }
    command
}
