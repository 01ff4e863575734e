//! `tessera detect`: run the tiled detector on a series, with a progress bar per window.
//!
//! Exit codes: 0 done; 2 refused (the plan, or an output path that would touch the input;
//! nothing ran); 130 cancelled (Ctrl-C; nothing written); 1 any other error. Outputs are
//! written atomically and as a set, only after a complete run.

use std::io::IsTerminal as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use indicatif::{ProgressBar, ProgressStyle};
use tessera_core::pipeline::{self, Event, PipelineError};
use tessera_core::report::DetectionReport;
use tessera_plan::blend::BlendMode;
use tessera_plan::bytes::format_bytes;
use tessera_plan::bytes::parse_bytes;
use tessera_plan::device::CpuAllocator;
use tessera_plan::device::{CancelToken, Device};
use tessera_plan::memory::file::MemoryModelFile;
use tessera_plan::memory::line::MemoryModel;
use tessera_plan::model::{Model, Precision, default_detector};
use tessera_plan::plan::TileSpec;
use tessera_plan::request::{BudgetError, DetectConfig, PatchChoice};

use super::{flags, outputs};
use crate::common::parse::parse_size;

#[derive(Debug, clap::Args)]
pub struct DetectArgs {
    #[command(flatten)]
    pub ort_lib: flags::OrtLib,
    /// A DICOM file or folder. Without it: the built-in demo study.
    pub path: Option<PathBuf>,
    /// The series to use when the folder holds several (SeriesInstanceUID, as `tessera info`
    /// lists it; default: the largest stack).
    #[arg(long, value_name = "UID")]
    pub series: Option<String>,
    /// Interpolate over missing or unreadable slices instead of refusing the series; every
    /// filled slice is listed in the warnings and in det.json (`filled_slices`).
    #[arg(long)]
    pub allow_gaps: bool,
    /// Write outputs even inside the input folder or over an existing DICOM file (never over
    /// one of the input files).
    #[arg(long)]
    pub force: bool,
    /// Model folder (with model.json). Default: the shipped detector.
    #[arg(long, value_name = "DIR")]
    pub model: Option<PathBuf>,
    /// Window size `XxYxZ` in voxels of the model's grid (after resampling to the card's
    /// spacing), each a multiple of the model's stride. Default: the card's recommendation.
    #[arg(long, value_parser = parse_size, value_name = "XxYxZ")]
    pub patch: Option<[usize; 3]>,
    /// Fraction of a window shared with its neighbour, in [0, 1) (gaussian and constant
    /// blending; halo derives its overlap from the receptive field). Default: the card's
    /// tiling, else 0.25.
    #[arg(long, value_parser = flags::overlap, value_name = "FRACTION")]
    pub overlap: Option<f64>,
    /// How overlapping windows combine. Default: the card's tiling (a MONAI bundle's own
    /// sliding window), else halo.
    #[arg(long, value_parser = flags::blend())]
    pub blend: Option<BlendMode>,
    /// Where inference runs: cpu, cuda:N or tensorrt:N (N: the GPU's index). A GPU that
    /// cannot be used is an error, never a silent fall back to the CPU.
    #[arg(long, default_value = "cpu", value_name = "DEVICE")]
    pub device: Device,
    /// CPU threads for inference, 1 to 1024 (default: all cores).
    #[arg(long, value_name = "N", value_parser = flags::threads)]
    pub threads: Option<usize>,
    /// Host memory strategy of ONNX Runtime on the CPU.
    #[arg(long, default_value = "none", value_parser = flags::allocator())]
    pub allocator: CpuAllocator,
    /// Refuse plans whose predicted peak exceeds this size (16GiB, 512M, 2GB). Without
    /// --patch, choose the deepest patch whose predicted peak fits it with 10 % headroom.
    #[arg(long, value_parser = parse_bytes, value_name = "SIZE", long_help = format!("Refuse plans whose predicted peak exceeds this size (16GiB, 512M, 2GB). Without --patch, choose the deepest patch whose predicted peak fits it with 10 % headroom. Units: {}.", flags::SIZE_UNITS))]
    pub memory_budget: Option<u64>,
    /// Memory calibration written by `tessera sweep` (its memory_model.json); default: the
    /// card's.
    #[arg(long, value_name = "FILE")]
    pub memory_model: Option<PathBuf>,
    /// Allow one window to cover the whole volume (normally refused: that is not tiling).
    #[arg(long)]
    pub allow_single_pass: bool,
    /// Numeric precision of inference.
    #[arg(long, default_value = "fp32", value_parser = flags::precision())]
    pub precision: Precision,
    /// Minimum score of a detection, 0 to 1 (default: the card's; its rescoring stage's when
    /// that runs).
    #[arg(long, value_name = "SCORE", value_parser = flags::score)]
    pub score_threshold: Option<f32>,
    /// Skip the card's rescoring stage: the detector's own scores, at its own threshold.
    #[arg(long)]
    pub no_rescore: bool,
    /// Skip the card's coarse pass for large lesions (the same network on a coarser grid,
    /// for masses wider than the detector's receptive field).
    #[arg(long)]
    pub no_coarse_pass: bool,
    /// Keep findings whose centre is outside the lung field (chest-CT models drop them),
    /// flagged `outside_lungs` in det.json.
    #[arg(long)]
    pub keep_outside_lungs: bool,
    /// Keep the detector's box for every finding (chest-CT models measure the box of a
    /// finding of 6 mm or more on the image; det.json keeps the detector's as
    /// `detector_size_mm`).
    #[arg(long)]
    pub detector_boxes: bool,
    /// Where to write the detections (det.json, schema tessera.detections/1).
    #[arg(long, default_value = "det.json", value_name = "FILE")]
    pub out: PathBuf,
    /// Also write the LUNA16 CSV (seriesuid, coordX/Y/Z in mm, probability) here.
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
}

/// Exit code for a refused plan.
const EXIT_REFUSED: u8 = 2;
/// Exit code after Ctrl-C, as shells report SIGINT.
const EXIT_CANCELLED: u8 = 130;

pub fn run(args: &DetectArgs, ort_lib: Option<&std::path::Path>) -> anyhow::Result<ExitCode> {
    let model_dir = match &args.model {
        Some(dir) => dir.clone(),
        None => default_detector()?,
    };
    let model = Model::load(&model_dir)
        .with_context(|| format!("loading the model in {}", model_dir.display()))?;
    let memory_model = match &args.memory_model {
        Some(path) => Some(MemoryModelFile::read(path)?.model),
        None => None,
    };
    let path = crate::common::demo::study_or_demo(args.path.as_deref())?;
    let options = tessera_dicom::dicom::LoadOptions {
        allow_gaps: args.allow_gaps,
    };
    let (volume, scan) = tessera_dicom::study::open(&path, args.series.as_deref(), options)
        .with_context(|| format!("opening {}", path.display()))?;
    let outputs: Vec<&std::path::Path> = std::iter::once(args.out.as_path())
        .chain(args.csv.as_deref())
        .collect();
    // A refusal exits 2, like a refused plan (main maps it).
    outputs::check(&outputs, &outputs::inputs_of(&path, &scan), args.force)?;
    for warning in &volume.warnings {
        eprintln!("warning: {warning}");
    }
    let mut config = config(args, &model, ort_lib, memory_model);
    if !resolve_patch(args, &volume.geometry, &model, &mut config)? {
        return Ok(ExitCode::from(EXIT_REFUSED));
    }

    let cancel = CancelToken::new();
    let on_interrupt = cancel.clone();
    // A second handler cannot be installed (e.g. in tests that call run twice): Ctrl-C then
    // ends the process the default way, which also writes nothing.
    let _ = ctrlc::set_handler(move || on_interrupt.cancel());

    let mut progress = WindowProgress::new(format!("{} {}", model.card.name, config.device));
    let mut observer = |event: &Event| progress.on(event);
    let result = pipeline::detect(&volume, &model, &config, &cancel, &mut observer);
    let result = match result {
        Ok(r) => r,
        Err(PipelineError::Cancelled) => {
            eprintln!("cancelled: no output written");
            return Ok(ExitCode::from(EXIT_CANCELLED));
        }
        Err(e @ PipelineError::Plan(_)) => {
            eprintln!("error: {e}");
            return Ok(ExitCode::from(EXIT_REFUSED));
        }
        Err(e) => return Err(e.into()),
    };
    // With a rescoring stage only its best candidates count, far fewer than the cap.
    if result.stats.peaks_dropped > 0 && result.rescore_sha256.is_none() {
        eprintln!(
            "warning: {} more peaks over the threshold {} were dropped (the decoder keeps the best {}): raise --score-threshold",
            result.stats.peaks_dropped,
            result.score_threshold,
            tessera_maps::decode::MAX_PEAKS
        );
    }
    if let Some(drift) = result.stats.precision_drift {
        eprintln!(
            "{} drift: the first window's heatmap differs from fp32 by up to {drift:.2e}",
            config.precision
        );
    }
    let report = DetectionReport::from_result(&result);
    report.write_files(&args.out, args.csv.as_deref())?;
    print_summary(&result, &report, &args.out);
    Ok(ExitCode::SUCCESS)
}

/// The core's defaults, changed by the flags (also how `tessera batch` plans its studies).
pub(crate) fn config(
    args: &DetectArgs,
    model: &Model,
    ort_lib: Option<&std::path::Path>,
    memory_model: Option<MemoryModel>,
) -> DetectConfig {
    let defaults = DetectConfig::defaults_for(model);
    DetectConfig {
        tile: TileSpec {
            patch: args.patch.unwrap_or(defaults.tile.patch),
            overlap: args.overlap.unwrap_or(defaults.tile.overlap),
            blend: args.blend.unwrap_or(defaults.tile.blend),
            allow_single_pass: args.allow_single_pass,
            memory_budget_bytes: args.memory_budget,
        },
        device: args.device,
        threads: args.threads.unwrap_or(defaults.threads),
        allocator: args.allocator,
        score_threshold: args.score_threshold,
        rescore: !args.no_rescore,
        coarse_pass: !args.no_coarse_pass,
        ort_lib: ort_lib.map(std::path::Path::to_path_buf),
        precision: args.precision,
        memory_model,
        keep_outside_lungs: args.keep_outside_lungs,
        detector_boxes: args.detector_boxes,
        ..defaults
    }
}

/// Sets the patch: `--patch`, the one the core chooses for `--memory-budget`, or the card's.
/// `Ok(false)`: nothing fits the budget (said on stderr; the run is refused).
fn resolve_patch(
    args: &DetectArgs,
    geometry: &tessera_dicom::Geometry,
    model: &Model,
    config: &mut DetectConfig,
) -> anyhow::Result<bool> {
    let choice = match (args.patch, args.memory_budget) {
        (None, Some(budget_bytes)) => PatchChoice::Budget { budget_bytes },
        _ => PatchChoice::Fixed(config.tile.patch),
    };
    match tessera_plan::request::resolve_patch(geometry, model, config, choice) {
        Ok(resolved) => {
            if let (Some(forecast), PatchChoice::Budget { budget_bytes }) =
                (resolved.forecast, choice)
            {
                eprintln!(
                    "patch {} chosen for the budget of {} (predicted ≤ {}, {})",
                    tessera_dicom::volume::format_size(resolved.patch),
                    format_bytes(budget_bytes),
                    format_bytes(forecast.peak_bytes(resolved.patch.iter().product())),
                    forecast.model.describe()
                );
                if let Some(note) = resolved.calibration_note() {
                    eprintln!("note: {note}");
                }
            }
            config.tile.patch = resolved.patch;
            Ok(true)
        }
        Err(refusal @ BudgetError::NothingFits(_)) => {
            eprintln!("error: {refusal}");
            Ok(false)
        }
        Err(e) => Err(e.into()),
    }
}

/// The closing line (and the warning when the peak went over its prediction).
fn print_summary(
    result: &pipeline::DetectionResult,
    report: &DetectionReport,
    out: &std::path::Path,
) {
    let rescored = match result.rescore_sha256 {
        Some(_) => format!(
            ", {} candidates rescored in {:.2} s",
            result.stats.rescored, result.stats.rescore_s
        ),
        None => String::new(),
    };
    let coarse = result.stats.coarse.as_ref().map_or(String::new(), |c| {
        format!(
            ", a coarse pass at {:.1} mm: {} large candidate(s) in {:.2} s",
            c.spacing_mm[0], c.candidates, c.seconds
        )
    });
    let predicted = result.plan.predicted_peak_bytes.map_or(String::new(), |p| {
        format!(" (predicted ≤ {})", format_bytes(p))
    });
    println!(
        "{} detection(s) at score >= {} in {:.2} s ({} windows{coarse}{rescored}; {} peaked at {}{predicted}) -> {}",
        report.detections.len(),
        result.score_threshold,
        result.stats.elapsed_s,
        result.stats.windows,
        result.stats.memory.memory_source,
        format_bytes(result.stats.memory.peak_memory_bytes),
        out.display()
    );
    if result.stats.memory.prediction_exceeded {
        eprintln!(
            "warning: the peak of {} went over the predicted {} (det.json: stats.prediction_exceeded); recalibrate with `tessera sweep` before trusting a budget on this machine",
            format_bytes(result.stats.memory.peak_memory_bytes),
            result
                .plan
                .predicted_peak_bytes
                .map_or(String::new(), format_bytes)
        );
    }
}

/// Per-window progress on stderr: a bar with elapsed, remaining and memory on a terminal, one
/// line per window otherwise (a log, a CI job, a parent process), so a run is never silent.
struct WindowProgress {
    bar: Option<ProgressBar>,
    started: std::time::Instant,
    total: usize,
    /// When the last plain line was printed: tiny windows (thousands of them) print at most
    /// one line a second, plus the last.
    last_line: Option<std::time::Instant>,
}

/// Plain progress lines at most this often, except the last window's.
const LINE_INTERVAL_S: f64 = 1.0;

impl WindowProgress {
    fn new(prefix: String) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(0);
            bar.set_style(
                ProgressStyle::with_template(
                    "{prefix} [{bar:30}] {pos}/{len} windows {elapsed_precise} (eta {eta}) {msg}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            bar.set_prefix(prefix);
            bar
        });
        Self {
            bar,
            started: std::time::Instant::now(),
            total: 0,
            last_line: None,
        }
    }

    /// A message: the bar's, or a line of its own.
    fn say(&self, message: String) {
        match &self.bar {
            Some(bar) => bar.set_message(message),
            None => eprintln!("{message}"),
        }
    }

    fn on(&mut self, event: &Event) {
        match event {
            Event::PlanReady(plan) => {
                self.total = plan.windows.len();
                let line = plan.to_string();
                match &self.bar {
                    Some(bar) => {
                        bar.println(line);
                        bar.set_length(self.total as u64);
                    }
                    None => eprintln!("{line}"),
                }
            }
            // The bar keeps the last window's time and memory until the next one finishes.
            Event::WindowStarted { .. } => {}
            Event::WindowFinished {
                index,
                elapsed_s,
                memory,
                ..
            } => {
                let done = index + 1;
                let spent_s = self.started.elapsed().as_secs_f64();
                let left_s = spent_s / done as f64 * (self.total - done.min(self.total)) as f64;
                if let Some(bar) = &self.bar {
                    bar.inc(1);
                } else if done < self.total
                    && self
                        .last_line
                        .is_some_and(|t| t.elapsed().as_secs_f64() < LINE_INTERVAL_S)
                {
                    return;
                } else {
                    self.last_line = Some(std::time::Instant::now());
                }
                self.say(format!(
                    "window {done}/{} in {elapsed_s:.2} s (elapsed {spent_s:.0} s, about {left_s:.0} s left), memory {} (peak {})",
                    self.total,
                    format_bytes(memory.current_bytes),
                    format_bytes(memory.peak_bytes)
                ));
            }
            Event::CoarseStarted {
                windows,
                spacing_mm,
            } => self.say(format!(
                "coarse pass for large lesions: {windows} window(s) at {:.2} mm",
                spacing_mm[0]
            )),
            Event::CoarseFinished {
                candidates,
                elapsed_s,
                ..
            } => self.say(format!(
                "coarse pass: {candidates} large candidate(s) in {elapsed_s:.2} s"
            )),
            Event::RescoreStarted { candidates } => {
                self.say(format!("rescoring {candidates} candidates"));
            }
            Event::RescoreFinished {
                candidates,
                elapsed_s,
                ..
            } => self.say(format!("rescored {candidates} in {elapsed_s:.2} s")),
            Event::Finished { .. } | Event::Cancelled | Event::Failed(_) => {
                if let Some(bar) = &self.bar {
                    bar.finish_and_clear();
                }
            }
        }
    }
}
