//! The one detection pipeline that the CLI and the GUI both drive:
//! volume -> resample to the card's spacing -> plan -> windows -> stitch -> decode ->
//! (rescore, when the card has the stage) -> result.
//!
//! Progress goes to an observer as [`Event`]s, in order: `PlanReady`, then per window
//! `WindowStarted` and `WindowFinished`, then `RescoreStarted` and `RescoreFinished` when the
//! rescoring stage runs, then exactly one of `Finished`, `Cancelled`, `Failed`.
//! The plan is checked (and may be refused) before the runtime is even loaded.

use std::path::PathBuf;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::detect::{VoxelBox, decode_centernet, decode_segmentation, nms};
use crate::infer::arena::CpuAllocator;
use crate::infer::gpu::GpuProbe;
use crate::infer::input::window_input;
use crate::infer::memory::{self, MemorySample, MemorySource};
use crate::infer::session::EngineOptions;
use crate::infer::{CancelToken, Device, Engine, InferError, PatchClassifier, RuntimeError};
use crate::model::{Model, OutputFamily, Precision};
use crate::plan::{MemoryForecast, MemoryModel, PlanError, TilePlan, TileSpec, Window};
use crate::resample::resample;
use crate::rescore::rescore;
use crate::stitch::{Maps, Stitcher};
use crate::volume::{Geometry, Volume};

/// Boxes overlapping more than this are the same finding.
pub const DEFAULT_NMS_IOU: f64 = 0.3;

/// How to run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DetectConfig {
    pub tile: TileSpec,
    pub device: Device,
    /// CPU threads for ONNX Runtime.
    pub threads: usize,
    /// Host memory strategy of ONNX Runtime (CPU device).
    #[serde(default)]
    pub allocator: CpuAllocator,
    /// `None`: the card's default (the rescoring stage's when it runs).
    pub score_threshold: Option<f32>,
    /// Run the card's rescoring stage, when it has one.
    #[serde(default = "enabled")]
    pub rescore: bool,
    pub nms_iou: f64,
    #[serde(default)]
    pub precision: Precision,
    pub ort_lib: Option<PathBuf>,
    /// Overrides the card's memory coefficients (e.g. a calibration from `tessera sweep`).
    #[serde(default)]
    pub memory_model: Option<MemoryModel>,
    /// With a chest-CT model, keep findings outside the lung field (flagged) instead of
    /// dropping them.
    #[serde(default)]
    pub keep_outside_lungs: bool,
}

impl DetectConfig {
    /// What `tessera detect` and the viewer run without options: the card's recommended
    /// patch, exact (halo) tiling, on the CPU with every core, the rescoring stage on.
    pub fn defaults_for(model: &Model) -> Self {
        Self {
            tile: TileSpec {
                patch: model.card.recommended_patch,
                overlap: 0.25,
                blend: crate::plan::BlendMode::Halo,
                allow_single_pass: false,
                memory_budget_bytes: None,
            },
            device: Device::Cpu,
            threads: std::thread::available_parallelism().map_or(1, usize::from),
            allocator: CpuAllocator::default(),
            score_threshold: None,
            rescore: true,
            nms_iou: DEFAULT_NMS_IOU,
            precision: Precision::Fp32,
            ort_lib: None,
            memory_model: None,
            keep_outside_lungs: false,
        }
    }
}

fn enabled() -> bool {
    true
}

/// Progress, as the observer sees it.
#[derive(Debug, Clone)]
pub enum Event {
    PlanReady(TilePlan),
    WindowStarted {
        index: usize,
        total: usize,
        window: Window,
    },
    WindowFinished {
        index: usize,
        total: usize,
        window: Window,
        elapsed_s: f64,
        memory: MemorySample,
    },
    /// The rescoring stage starts on this many of the detector's candidates.
    RescoreStarted {
        candidates: usize,
    },
    RescoreFinished {
        candidates: usize,
        elapsed_s: f64,
        memory: MemorySample,
    },
    Finished {
        elapsed_s: f64,
        detections: usize,
    },
    Cancelled,
    Failed(String),
}

/// One finding, in the patient and in the original volume.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Detection {
    pub score: f32,
    /// The detector's own score, when the rescoring stage replaced it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detector_score: Option<f32>,
    pub center_lps_mm: [f64; 3],
    pub size_mm: [f64; 3],
    /// In the original volume's voxels, `min` inclusive, `max` exclusive.
    pub box_voxel: BoxVoxel,
    /// The box crosses a window boundary (a core edge in halo mode).
    pub crosses_seam: bool,
    /// Its centre is outside the lung field (kept because the run was asked to keep those).
    #[serde(default)]
    pub outside_lungs: bool,
    /// The box in the model's input grid (after resampling), for parity checks.
    pub model_box: VoxelBox,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BoxVoxel {
    pub min: [usize; 3],
    pub max: [usize; 3],
}

/// Timings and memory of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunStats {
    pub windows: usize,
    pub elapsed_s: f64,
    pub inference_s: f64,
    pub peak_memory_bytes: u64,
    pub memory_source: MemorySource,
    pub window_elapsed_s: Vec<f64>,
    pub window_peak_bytes: Vec<u64>,
    /// What ran it, for the memory gauge: the GPU's name, or the CPU and its threads.
    pub device_name: String,
    /// Host memory peak (process RSS), also when `peak_memory_bytes` is GPU memory.
    pub host_peak_memory_bytes: u64,
    /// Below fp32: the largest heatmap difference from an fp32 run of the first window, so that
    /// reduced precision is measured, not assumed.
    pub precision_drift: Option<f32>,
    /// Peaks over the threshold beyond the decoder's cap ([`crate::detect::MAX_PEAKS`]).
    pub peaks_dropped: usize,
    /// Candidates the rescoring stage scored (0: it did not run), its time and memory peak.
    #[serde(default)]
    pub rescored: usize,
    #[serde(default)]
    pub rescore_s: f64,
    #[serde(default)]
    pub rescore_peak_bytes: u64,
    /// What the process held when the run started (after resampling): the base of the
    /// predicted peak.
    #[serde(default)]
    pub baseline_memory_bytes: u64,
    /// The windows' peak went over the plan's predicted bound.
    #[serde(default)]
    pub prediction_exceeded: bool,
    /// The lung field, when the model asks for one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lung_field: Option<LungFieldStats>,
}

/// What the lung field did in a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LungFieldStats {
    pub volume_ml: f64,
    pub seconds: f64,
    /// Candidates (after NMS, before rescoring) whose centre is outside, dropped.
    pub dropped_outside: usize,
    /// Kept and flagged instead (`keep_outside_lungs`).
    pub kept_outside: usize,
}

/// Everything a run produced, and what made it.
#[derive(Debug, Clone)]
pub struct DetectionResult {
    pub detections: Vec<Detection>,
    pub plan: TilePlan,
    pub stats: RunStats,
    pub config: DetectConfig,
    pub score_threshold: f32,
    pub execution_provider: String,
    pub onnxruntime_version: String,
    pub model_name: String,
    pub model_sha256: String,
    /// The rescoring stage's file hash, when it ran.
    pub rescore_sha256: Option<String>,
    pub series_uid: String,
    /// What was odd about the input (the volume's warnings) and the slices no file provided.
    pub input_warnings: Vec<String>,
    pub filled_slices: Vec<crate::dicom::FilledSlice>,
    /// The model's input grid (the volume after resampling).
    pub model_geometry: Geometry,
    /// Stitched output maps, `[heatmap, size, offset]` at the model's stride.
    pub maps: Maps,
}

#[derive(Debug, thiserror::Error)]
pub enum PipelineError {
    #[error("plan refused: {0}")]
    Plan(#[from] PlanError),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    Infer(InferError),
    #[error("cancelled")]
    Cancelled,
    #[error(transparent)]
    Resample(#[from] crate::resample::ResampleError),
}

impl From<InferError> for PipelineError {
    fn from(e: InferError) -> Self {
        match e {
            InferError::Cancelled => Self::Cancelled,
            InferError::Runtime(e) => Self::Runtime(e),
            other => Self::Infer(other),
        }
    }
}

/// The plan this run would use, without running anything. `baseline_bytes` is the memory the
/// process holds when the run starts ([`baseline_estimate_bytes`] before it does).
pub fn plan_for(
    volume_size: [usize; 3],
    model: &Model,
    config: &DetectConfig,
    baseline_bytes: u64,
) -> Result<TilePlan, PlanError> {
    let forecast = memory_model(model, config).map(|model| MemoryForecast {
        model,
        baseline_bytes,
    });
    TilePlan::new(
        volume_size,
        model.card.grid(),
        &config.tile,
        forecast.as_ref(),
    )
}

/// The calibration a run of `config` is predicted from: its own, else the card's.
pub fn memory_model(model: &Model, config: &DetectConfig) -> Option<MemoryModel> {
    config
        .memory_model
        .or_else(|| card_memory_model(model, config.device))
}

/// What this process will hold when a run on `volume` starts: what it holds now plus the
/// copy of the volume resampled to the model's grid (the pipeline's baseline is measured
/// after resampling). On a GPU nothing is held before the run's own session.
pub fn baseline_estimate_bytes(geometry: &Geometry, model: &Model, device: Device) -> u64 {
    if device != Device::Cpu {
        return 0;
    }
    let resampled = match model.card.target_spacing_mm {
        Some(spacing) if crate::resample::resample_needed(geometry, spacing) => {
            let size = crate::resample::resampled_size(geometry, spacing);
            size.iter().product::<usize>() * size_of::<f32>()
        }
        _ => 0,
    };
    memory::sample().current_bytes + resampled as u64
}

/// Why no patch was chosen for a memory budget.
#[derive(Debug, thiserror::Error)]
pub enum BudgetError {
    #[error(
        "no memory model for {model} on {device}: run `tessera sweep --model ... --out DIR` to calibrate, then pass --memory-model DIR/memory_model.json (or give --patch)"
    )]
    Uncalibrated { model: String, device: Device },
    #[error("plan refused: {0}")]
    NothingFits(#[from] PlanError),
}

/// The patch [`crate::plan::choose_patch`] picks for `budget_bytes` on a volume of `geometry`
/// (in its own voxels), from `config`'s calibration or the card's, with the process's
/// baseline estimated now; and the forecast it was chosen with.
pub fn patch_for_budget(
    geometry: &Geometry,
    model: &Model,
    config: &DetectConfig,
    budget_bytes: u64,
) -> Result<([usize; 3], MemoryForecast), BudgetError> {
    let model_memory = memory_model(model, config).ok_or_else(|| BudgetError::Uncalibrated {
        model: model.card.name.clone(),
        device: config.device,
    })?;
    let forecast = MemoryForecast {
        model: model_memory,
        baseline_bytes: baseline_estimate_bytes(geometry, model, config.device),
    };
    let size = model_geometry(geometry, model).size;
    let patch = crate::plan::choose_patch(
        size,
        model.card.grid(),
        &forecast,
        budget_bytes,
        config.tile.blend,
    )?;
    Ok((patch, forecast))
}

/// `volume` resampled to `model`'s grid; `None` when it is on that grid already (or the card
/// asks for none).
pub fn resample_for(
    volume: &Volume,
    model: &Model,
) -> Result<Option<Volume>, crate::resample::ResampleError> {
    match model.card.target_spacing_mm {
        Some(spacing) => resample(volume, spacing),
        None => Ok(None),
    }
}

/// The grid `model` runs on for a volume of `geometry`: resampled to the card's spacing, or
/// the volume's own when the card has none.
pub fn model_geometry(geometry: &Geometry, model: &Model) -> Geometry {
    match model.card.target_spacing_mm {
        Some(spacing) => crate::resample::resampled_geometry(geometry, spacing),
        None => geometry.clone(),
    }
}

/// The memory coefficients the card records for this kind of device, if any.
pub fn card_memory_model(model: &Model, device: Device) -> Option<MemoryModel> {
    let key = match device {
        Device::Cpu => "cpu",
        Device::Cuda(_) | Device::TensorRt(_) => "cuda",
    };
    model.card.memory.get(key).map(|m| m.model)
}

/// Runs detection on `volume`. Emits events to `observer`; `cancel` stops it within a window.
pub fn detect(
    volume: &Volume,
    model: &Model,
    config: &DetectConfig,
    cancel: &CancelToken,
    observer: &mut dyn FnMut(&Event),
) -> Result<DetectionResult, PipelineError> {
    let result = run(volume, model, config, cancel, observer);
    match &result {
        Ok(r) => observer(&Event::Finished {
            elapsed_s: r.stats.elapsed_s,
            detections: r.detections.len(),
        }),
        Err(PipelineError::Cancelled) => observer(&Event::Cancelled),
        Err(e) => observer(&Event::Failed(e.to_string())),
    }
    result
}

fn run(
    volume: &Volume,
    model: &Model,
    config: &DetectConfig,
    cancel: &CancelToken,
    observer: &mut dyn FnMut(&Event),
) -> Result<DetectionResult, PipelineError> {
    let started = Instant::now();
    let card = &model.card;
    let resampled = resample_for(volume, model)?;
    let input = resampled.as_ref().unwrap_or(volume);
    // GPU memory through NVML on NVIDIA devices; host memory otherwise (or when NVML is absent).
    let mut gpu = match config.device {
        Device::Cuda(i) | Device::TensorRt(i) => {
            Some(GpuProbe::open(u32::try_from(i).unwrap_or(0)))
        }
        Device::Cpu => None,
    };
    // What the process holds before the run's own memory: the prediction adds to it.
    let baseline_memory_bytes = match gpu.as_mut() {
        Some(Ok(probe)) => probe.sample().current_bytes,
        _ => memory::sample().current_bytes,
    };
    let plan = plan_for(input.geometry.size, model, config, baseline_memory_bytes)?;
    observer(&Event::PlanReady(plan.clone()));

    let options = EngineOptions {
        device: config.device,
        threads: config.threads,
        allocator: config.allocator,
        precision: config.precision,
        ort_lib: config.ort_lib.as_deref(),
    };
    let mut engine = Engine::new(model, &options)?;
    let mut classifier = match config.rescore {
        true => PatchClassifier::new(model, &options)?,
        false => None,
    };
    let device_name = match &gpu {
        Some(Ok(probe)) => probe.name.clone(),
        Some(Err(reason)) => format!("{} ({reason})", config.device),
        None => format!("CPU ({} threads)", config.threads),
    };
    let channels: &[usize] = match card.output_family {
        OutputFamily::Centernet => &[1, 3, 3],
        OutputFamily::Segmentation => &[1],
    };
    let mut stitcher = Stitcher::new(&plan, channels);
    let total = plan.windows.len();
    let mut stats = RunStats {
        windows: total,
        elapsed_s: 0.0,
        inference_s: 0.0,
        peak_memory_bytes: 0,
        memory_source: MemorySource::Unavailable,
        window_elapsed_s: Vec::with_capacity(total),
        window_peak_bytes: Vec::with_capacity(total),
        peaks_dropped: 0,
        precision_drift: None,
        device_name,
        host_peak_memory_bytes: 0,
        rescored: 0,
        rescore_s: 0.0,
        rescore_peak_bytes: 0,
        baseline_memory_bytes,
        prediction_exceeded: false,
        lung_field: None,
    };
    for window in &plan.windows {
        if cancel.is_cancelled() {
            return Err(PipelineError::Cancelled);
        }
        observer(&Event::WindowStarted {
            index: window.index,
            total,
            window: *window,
        });
        memory::reset_peak();
        let window_started = Instant::now();
        let tensor = window_input(&input.voxels, window, &card.input);
        let fp32_check =
            (window.index == 0 && config.precision != Precision::Fp32).then(|| tensor.clone());
        let outputs = engine.run(window.index, tensor, cancel)?;
        if let Some(input) = fp32_check {
            stats.precision_drift =
                Some(precision_drift(model, &options, &outputs, input, cancel)?);
        }
        stitcher.add(window, &outputs.heads);
        let elapsed_s = window_started.elapsed().as_secs_f64();
        let sample = sample_memory(&mut gpu, &mut stats);
        stats.inference_s += elapsed_s;
        stats.peak_memory_bytes = stats.peak_memory_bytes.max(sample.peak_bytes);
        stats.memory_source = sample.source;
        stats.window_elapsed_s.push(elapsed_s);
        stats.window_peak_bytes.push(sample.peak_bytes);
        observer(&Event::WindowFinished {
            index: window.index,
            total,
            window: *window,
            elapsed_s,
            memory: sample,
        });
    }
    let maps = stitcher.finish();
    let stage = card.rescore.as_ref().zip(classifier.as_mut());
    let rescore_sha256 = match stage {
        Some(_) => model.rescore_file.as_ref().map(|(_, hash)| hash.clone()),
        None => None,
    };
    let (decode_threshold, threshold) = match &stage {
        Some((spec, _)) => (
            spec.candidate_threshold,
            config
                .score_threshold
                .unwrap_or(spec.default_score_threshold),
        ),
        None => {
            let t = config
                .score_threshold
                .unwrap_or(card.default_score_threshold);
            (t, t)
        }
    };
    let (peaks, peaks_dropped) = match card.output_family {
        OutputFamily::Centernet => decode_centernet(&maps, decode_threshold, input.geometry.size),
        OutputFamily::Segmentation => {
            decode_segmentation(&maps, decode_threshold, input.geometry.size)
        }
    };
    stats.peaks_dropped = peaks_dropped;
    let mut boxes = nms(peaks, config.nms_iou);
    let lungs = card
        .lung_field
        .then(|| lung_field(input, &mut boxes, config.keep_outside_lungs));
    // (box, the detector's score when the stage replaced it), best first.
    let scored: Vec<(VoxelBox, Option<f32>)> = match stage {
        Some((spec, classifier)) => {
            let best = &boxes[..boxes.len().min(spec.candidates)];
            let candidates = best.len();
            observer(&Event::RescoreStarted { candidates });
            memory::reset_peak();
            let stage_started = Instant::now();
            let rescored = rescore(best, &input.voxels, &card.input, spec, classifier, cancel)?;
            let elapsed_s = stage_started.elapsed().as_secs_f64();
            let sample = sample_memory(&mut gpu, &mut stats);
            stats.rescored = candidates;
            stats.rescore_s = elapsed_s;
            stats.rescore_peak_bytes = sample.peak_bytes;
            observer(&Event::RescoreFinished {
                candidates,
                elapsed_s,
                memory: sample,
            });
            rescored
                .into_iter()
                .map(|r| (r.voxel_box, Some(r.detector_score)))
                .collect()
        }
        None => boxes.into_iter().map(|b| (b, None)).collect(),
    };
    let seams: [Vec<usize>; 3] = std::array::from_fn(|a| plan.seams(a));
    let detections = scored
        .into_iter()
        .filter(|(b, _)| b.score >= threshold)
        .map(|(b, detector_score)| Detection {
            detector_score,
            outside_lungs: lungs
                .as_ref()
                .is_some_and(|(field, _)| !field.contains(b.center)),
            ..to_detection(b, &input.geometry, &volume.geometry, &seams)
        })
        .collect();
    stats.lung_field = lungs.map(|(_, lung_stats)| lung_stats);
    stats.elapsed_s = started.elapsed().as_secs_f64();
    stats.prediction_exceeded = plan
        .predicted_peak_bytes
        .is_some_and(|p| stats.peak_memory_bytes > p);
    Ok(DetectionResult {
        detections,
        plan,
        stats,
        config: config.clone(),
        score_threshold: threshold,
        execution_provider: engine.execution_provider.clone(),
        onnxruntime_version: engine.runtime.version.clone(),
        model_name: card.name.clone(),
        model_sha256: model.sha256.clone(),
        rescore_sha256,
        series_uid: volume.info.series_uid.clone(),
        input_warnings: volume.warnings.clone(),
        filled_slices: volume.filled_slices.clone(),
        model_geometry: input.geometry.clone(),
        maps,
    })
}

/// The lung field of `input`, and `boxes` without the candidates outside it (all kept when
/// `keep_outside`: they are flagged on the detections).
fn lung_field(
    input: &Volume,
    boxes: &mut Vec<VoxelBox>,
    keep_outside: bool,
) -> (crate::lung::LungField, LungFieldStats) {
    let started = Instant::now();
    let field = crate::lung::segment(&input.voxels, input.geometry.spacing_mm);
    let before = boxes.len();
    let outside = boxes.iter().filter(|b| !field.contains(b.center)).count();
    if !keep_outside {
        boxes.retain(|b| field.contains(b.center));
    }
    let stats = LungFieldStats {
        volume_ml: field.volume_ml(),
        seconds: started.elapsed().as_secs_f64(),
        dropped_outside: before - boxes.len(),
        kept_outside: if keep_outside { outside } else { 0 },
    };
    (field, stats)
}

/// The device's memory (the GPU's through NVML, else the host's) since the last
/// [`memory::reset_peak`]; the host's peak also goes into `stats`.
fn sample_memory(gpu: &mut Option<Result<GpuProbe, String>>, stats: &mut RunStats) -> MemorySample {
    let host = memory::sample();
    stats.host_peak_memory_bytes = stats.host_peak_memory_bytes.max(host.peak_bytes);
    match gpu.as_mut() {
        Some(Ok(probe)) => probe.sample(),
        _ => host,
    }
}

/// Maps a box on the model grid to the patient and to the original volume's voxels.
fn to_detection(
    b: VoxelBox,
    model: &Geometry,
    original: &Geometry,
    seams: &[Vec<usize>; 3],
) -> Detection {
    let center_lps_mm = model.world_from_voxel.apply(b.center);
    let size_mm = std::array::from_fn(|a| b.size[a] * model.spacing_mm[a]);
    let (lo, hi) = (b.min(), b.max());
    // The original grid's voxel range covering the box's eight corners.
    let voxel_from_world = original.world_from_voxel.inverse();
    let mut min = [f64::INFINITY; 3];
    let mut max = [f64::NEG_INFINITY; 3];
    for corner in 0..8 {
        let p = std::array::from_fn(|a| if corner >> a & 1 == 0 { lo[a] } else { hi[a] });
        let world = model.world_from_voxel.apply(p);
        let v = voxel_from_world.map_or(p, |m| m.apply(world));
        for a in 0..3 {
            min[a] = min[a].min(v[a]);
            max[a] = max[a].max(v[a]);
        }
    }
    let box_voxel = BoxVoxel {
        min: std::array::from_fn(|a| {
            (min[a] + 0.5).floor().clamp(0.0, original.size[a] as f64) as usize
        }),
        max: std::array::from_fn(|a| {
            ((max[a] + 0.5).ceil().clamp(0.0, original.size[a] as f64) as usize).max(1)
        }),
    };
    let crosses_seam = (0..3).any(|a| {
        seams[a]
            .iter()
            .any(|&s| lo[a] < s as f64 - 0.5 && hi[a] > s as f64 - 0.5)
    });
    Detection {
        score: b.score,
        detector_score: None,
        center_lps_mm,
        size_mm,
        box_voxel,
        crosses_seam,
        outside_lungs: false,
        model_box: b,
    }
}

/// Runs `input` through an fp32 session and returns the largest heatmap difference from
/// `reduced`, the same window's outputs at the run's precision.
fn precision_drift(
    model: &Model,
    options: &EngineOptions<'_>,
    reduced: &crate::infer::WindowOutputs,
    input: ndarray::Array5<f32>,
    cancel: &CancelToken,
) -> Result<f32, PipelineError> {
    let mut reference = Engine::new(
        model,
        &EngineOptions {
            precision: Precision::Fp32,
            ..*options
        },
    )?;
    let full = reference.run(0, input, cancel)?;
    Ok(full.heads[0]
        .iter()
        .zip(reduced.heads[0].iter())
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max))
}
