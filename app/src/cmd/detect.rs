//! `tessera detect`: run the tiled detector on a series, with a progress bar per window.
//!
//! Exit codes: 0 done; 2 the plan was refused (nothing ran); 130 cancelled (Ctrl-C; nothing
//! written); 1 any other error. Outputs are written atomically, only after a complete run.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use indicatif::{ProgressBar, ProgressStyle};
use tessera_core::infer::arena::CpuAllocator;
use tessera_core::infer::{CancelToken, Device};
use tessera_core::model::{
    Model, Precision, is_test_model, shipped_model_dirs, shipped_models_dir,
};
use tessera_core::pipeline::{self, DEFAULT_NMS_IOU, DetectConfig, Event, PipelineError};
use tessera_core::plan::{
    BlendMode, MemoryModel, ModelGrid, TileSpec, choose_patch, format_bytes, parse_bytes,
};
use tessera_core::report::DetectionReport;

use super::phantom::parse_size;

#[derive(Debug, clap::Args)]
pub struct DetectArgs {
    /// A DICOM file or folder. Without it: the built-in demo study.
    pub path: Option<PathBuf>,
    /// The series to use when the folder holds several (default: the largest stack).
    #[arg(long)]
    pub series: Option<String>,
    /// Model folder (with model.json). Default: the shipped detector.
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Window size `XxYxZ` in voxels at the model's spacing (default: the card's recommendation).
    #[arg(long, value_parser = parse_size)]
    pub patch: Option<[usize; 3]>,
    /// Fraction of a window shared with its neighbour (gaussian and constant blending).
    #[arg(long, default_value_t = 0.25)]
    pub overlap: f64,
    #[arg(long, default_value = "halo")]
    pub blend: BlendMode,
    /// cpu, cuda:N or tensorrt:N.
    #[arg(long, default_value = "cpu")]
    pub device: Device,
    /// CPU threads for inference (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Host memory strategy on CPU: none (lowest, most predictable peak), tight-arena (grows
    /// by what is asked) or arena (ONNX Runtime's default, power-of-two growth).
    #[arg(long, default_value = "none")]
    pub allocator: CpuAllocator,
    /// Refuse plans whose predicted peak exceeds this (e.g. 16GiB). Without --patch, choose
    /// the patch that fits it best.
    #[arg(long, value_parser = parse_bytes)]
    pub memory_budget: Option<u64>,
    /// Memory calibration written by `tessera sweep` (memory_model.json); default: the card's.
    #[arg(long)]
    pub memory_model: Option<PathBuf>,
    /// Allow one window to cover the whole volume (normally refused: that is not tiling).
    #[arg(long)]
    pub allow_single_pass: bool,
    /// fp32, or fp16 when the model card ships an fp16 variant; the drift from fp32 on the
    /// first window is measured and reported.
    #[arg(long, default_value = "fp32")]
    pub precision: Precision,
    /// Minimum score (default: the card's; its rescoring stage's when that runs).
    #[arg(long)]
    pub score_threshold: Option<f32>,
    /// Skip the card's rescoring stage: the detector's own scores, at its own threshold.
    #[arg(long)]
    pub no_rescore: bool,
    /// Where to write the detections (JSON).
    #[arg(long, default_value = "det.json")]
    pub out: PathBuf,
    /// Also write the LUNA16 CSV here.
    #[arg(long)]
    pub csv: Option<PathBuf>,
}

/// Exit code for a refused plan.
const EXIT_REFUSED: u8 = 2;
/// Exit code after Ctrl-C, as shells report SIGINT.
const EXIT_CANCELLED: u8 = 130;

pub fn run(args: &DetectArgs, ort_lib: Option<&std::path::Path>) -> anyhow::Result<ExitCode> {
    let model_dir = match &args.model {
        Some(dir) => dir.clone(),
        None => default_model_dir()?,
    };
    let model = Model::load(&model_dir)
        .with_context(|| format!("loading the model in {}", model_dir.display()))?;
    let path = match &args.path {
        Some(p) => p.clone(),
        None => super::phantom::demo_study_dir().context("preparing the demo study")?,
    };
    let (volume, _) = tessera_core::dicom::open(&path, args.series.as_deref())
        .with_context(|| format!("opening {}", path.display()))?;
    for warning in &volume.warnings {
        eprintln!("warning: {warning}");
    }
    let memory_model = match &args.memory_model {
        Some(path) => Some(super::sweep::read_memory_model(path)?.model),
        None => None,
    };
    let patch = match (args.patch, args.memory_budget) {
        (Some(patch), _) => patch,
        (None, None) => model.card.recommended_patch,
        (None, Some(budget)) => {
            match choose_for_budget(&model, &volume, args, memory_model.as_ref(), budget)? {
                Ok(patch) => patch,
                Err(refusal) => {
                    eprintln!("error: plan refused: {refusal}");
                    return Ok(ExitCode::from(EXIT_REFUSED));
                }
            }
        }
    };
    let config = DetectConfig {
        tile: TileSpec {
            patch,
            overlap: args.overlap,
            blend: args.blend,
            allow_single_pass: args.allow_single_pass,
            memory_budget_bytes: args.memory_budget,
        },
        device: args.device,
        threads: args
            .threads
            .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from)),
        allocator: args.allocator,
        score_threshold: args.score_threshold,
        rescore: !args.no_rescore,
        nms_iou: DEFAULT_NMS_IOU,
        ort_lib: ort_lib.map(std::path::Path::to_path_buf),
        precision: args.precision,
        memory_model,
    };

    let cancel = CancelToken::new();
    let on_interrupt = cancel.clone();
    // A second handler cannot be installed (e.g. in tests that call run twice): Ctrl-C then
    // ends the process the default way, which also writes nothing.
    let _ = ctrlc::set_handler(move || on_interrupt.cancel());

    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template(
            "{prefix} [{bar:30}] {pos}/{len} windows {elapsed_precise} (eta {eta}) {msg}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> "),
    );
    let mut observer = |event: &Event| match event {
        Event::PlanReady(plan) => {
            eprintln!("{plan}");
            bar.set_length(plan.windows.len() as u64);
            bar.set_prefix(format!("{} {}", model.card.name, config.device));
        }
        Event::WindowStarted { window, .. } => {
            bar.set_message(format!("window {:?}..{:?}", window.min, window.max));
        }
        Event::WindowFinished {
            elapsed_s, memory, ..
        } => {
            bar.inc(1);
            bar.set_message(format!(
                "last {elapsed_s:.2} s, peak {}",
                format_bytes(memory.peak_bytes)
            ));
        }
        Event::RescoreStarted { candidates } => {
            bar.set_message(format!("rescoring {candidates} candidates"));
        }
        Event::RescoreFinished {
            candidates,
            elapsed_s,
            ..
        } => bar.set_message(format!("rescored {candidates} in {elapsed_s:.2} s")),
        Event::Finished { .. } | Event::Cancelled | Event::Failed(_) => bar.finish_and_clear(),
    };
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
            tessera_core::detect::MAX_PEAKS
        );
    }
    if let Some(drift) = result.stats.precision_drift {
        eprintln!(
            "{} drift: the first window's heatmap differs from fp32 by up to {drift:.2e}",
            config.precision
        );
    }
    let report = DetectionReport::from_result(&result);
    report.write_json(&args.out)?;
    if let Some(csv) = &args.csv {
        report.write_luna16_csv(csv)?;
    }
    let rescored = match result.rescore_sha256 {
        Some(_) => format!(
            ", {} candidates rescored in {:.2} s",
            result.stats.rescored, result.stats.rescore_s
        ),
        None => String::new(),
    };
    println!(
        "{} detection(s) at score >= {} in {:.2} s ({} windows{rescored}, peak {} {:?}) -> {}",
        report.detections.len(),
        result.score_threshold,
        result.stats.elapsed_s,
        result.stats.windows,
        format_bytes(result.stats.peak_memory_bytes),
        result.stats.memory_source,
        args.out.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// The shipped detector: the first model folder that is not a test model.
pub fn default_model_dir() -> anyhow::Result<PathBuf> {
    let root = shipped_models_dir();
    shipped_model_dirs()
        .with_context(|| format!("listing the shipped models in {}", root.display()))?
        .into_iter()
        .find(|p| !is_test_model(p))
        .with_context(|| {
            format!(
                "no trained detector is shipped yet in {}: pass --model {}/tessera-test-tiny to run the engine's test model (random weights, finds nothing meaningful)",
                root.display(),
                root.display()
            )
        })
}

/// The patch for a memory budget, from the calibration or the card. The outer error is a
/// missing calibration; the inner one a refusal (nothing fits).
fn choose_for_budget(
    model: &Model,
    volume: &tessera_core::Volume,
    args: &DetectArgs,
    calibrated: Option<&MemoryModel>,
    budget: u64,
) -> anyhow::Result<Result<[usize; 3], tessera_core::plan::PlanError>> {
    let from_card = pipeline::card_memory_model(model, args.device);
    let Some(memory) = calibrated.copied().or(from_card) else {
        anyhow::bail!(
            "no memory model for {} on {}: run `tessera sweep --model ... --out DIR` to calibrate, then pass --memory-model DIR/memory_model.json (or give --patch)",
            model.card.name,
            args.device
        );
    };
    let size = pipeline::model_geometry(&volume.geometry, model).size;
    let grid = ModelGrid {
        stride: model.card.stride,
        receptive_radius: model.card.receptive_radius(),
    };
    let chosen = choose_patch(size, grid, &memory, budget);
    if let Ok(patch) = &chosen {
        eprintln!(
            "patch {} chosen for the budget of {} (predicted {})",
            tessera_core::volume::format_size(*patch),
            format_bytes(budget),
            format_bytes(memory.predict_bytes(patch.iter().product()))
        );
    }
    Ok(chosen)
}
