//! The one detection pipeline that the CLI and the GUI both drive:
//! volume -> resample to the card's spacing -> plan -> windows -> stitch -> decode ->
//! (the coarse pass's large findings, when the card has one) -> NMS -> lung field ->
//! (rescore, when the card has the stage) -> result.
//!
//! Progress goes to an observer as [`Event`]s, in order: `PlanReady`, then per window
//! `WindowStarted` and `WindowFinished`, then `CoarseStarted` and `CoarseFinished` when the
//! card's coarse pass runs, then `RescoreStarted` and `RescoreFinished` when the rescoring
//! stage runs, then exactly one of `Finished`, `Cancelled`, `Failed`.
//! The plan is checked (and may be refused) before the runtime is even loaded.

use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::rescore::rescore;
use tessera_dicom::volume::{Geometry, StudyVoxelBox, Volume};
use tessera_infer::gpu::GpuProbe;
use tessera_infer::input::window_input;
use tessera_infer::session::EngineOptions;
use tessera_infer::{Engine, InferError, PatchClassifier, RuntimeError};
use tessera_maps::decode::{Candidate, ModelGridBox, decode_centernet, decode_segmentation, nms};
use tessera_maps::extent::measure_box;
use tessera_maps::retina::decode_retinanet;
use tessera_maps::stitch::{HeadGrid, Maps, MissingHead, Stitcher, Weighting, head};
use tessera_plan::device::{CancelToken, Device};
use tessera_plan::grid_map::GridMap;
use tessera_plan::memory::measured::{MeasuredRun, RunMemory};
use tessera_plan::memory::probe::{self as memory, MemorySample};
use tessera_plan::model::{Model, ModelCard, OutputFamily, Precision};
use tessera_plan::plan::{PlanError, TilePlan, Window};

mod coarse;

pub use coarse::CoarseStats;
use tessera_plan::memory::forecast::{HeldMemory, held_bytes};
use tessera_plan::request::{DetectConfig, plan_for, resample_for};

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
    /// The coarse pass ([`tessera_plan::model::CoarsePass`]) starts, with this many windows.
    CoarseStarted {
        windows: usize,
        spacing_mm: [f64; 3],
    },
    /// It found this many candidates of the card's minimum size.
    CoarseFinished {
        candidates: usize,
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

/// One finding, in the patient and in the original volume; det.json lists them as they are.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Detection {
    pub score: f32,
    /// The detector's own score, when the rescoring stage replaced it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detector_score: Option<f32>,
    pub center_lps_mm: [f64; 3],
    pub size_mm: [f64; 3],
    /// The detector's own box size, when the box was measured on the image instead
    /// ([`tessera_maps::extent`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detector_size_mm: Option<[f64; 3]>,
    /// In the original volume's voxels.
    pub box_voxel: StudyVoxelBox,
    /// The box crosses a window boundary (a core edge in halo mode).
    pub crosses_seam: bool,
    /// Its centre is outside the lung field (kept because the run was asked to keep those).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub outside_lungs: bool,
    /// The box on the model's grid (after resampling), for parity checks.
    pub model_box: ModelGridBox,
    /// Its axes, size, volume, mean HU and type, measured on the study's voxels
    /// ([`crate::measure`]); absent in files from before they were measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measurements: Option<crate::measure::Measurements>,
    /// A chest model's finding: the Lung-RADS category its measurements suggest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lung_rads: Option<crate::lungrads::Suggestion>,
}

impl Detection {
    /// Its size: the mean of its axial long and short axes as measured, or of its box's
    /// axial sides when it was not measured. What the table, det.json and the SR show.
    pub fn mean_diameter_mm(&self) -> f64 {
        self.measurements.as_ref().map_or_else(
            || crate::measure::box_mean_diameter_mm(self.size_mm),
            |m| m.mean_diameter_mm,
        )
    }

    /// Its size with the axes a reader drew, when drawn.
    pub fn reader_mean_diameter_mm(&self, reader_axes: Option<&crate::measure::AxialAxes>) -> f64 {
        reader_axes.map_or_else(|| self.mean_diameter_mm(), |a| a.mean_diameter_mm())
    }

    /// Its suggested Lung-RADS category, following the axes a reader drew, when drawn.
    pub fn lung_rads_with(
        &self,
        reader_axes: Option<&crate::measure::AxialAxes>,
    ) -> Option<crate::lungrads::Suggestion> {
        match (reader_axes, &self.measurements, &self.lung_rads) {
            (Some(axes), Some(m), Some(_)) => Some(crate::lungrads::with_axes(m, axes)),
            _ => self.lung_rads.clone(),
        }
    }
}

/// Timings and memory of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunStats {
    pub windows: usize,
    pub elapsed_s: f64,
    pub inference_s: f64,
    /// Its memory against the forecast (flattened: `det.json` keeps the keys in `stats`).
    #[serde(flatten)]
    pub memory: RunMemory,
    /// What ran it, for the memory gauge: the GPU's name, or the CPU and its threads.
    pub device_name: String,
    /// Below fp32: the largest heatmap difference from an fp32 run of the first window, so that
    /// reduced precision is measured, not assumed.
    pub precision_drift: Option<f32>,
    /// Peaks over the threshold beyond the decoder's cap ([`tessera_maps::decode::MAX_PEAKS`]).
    pub peaks_dropped: usize,
    /// Candidates the rescoring stage scored (0: it did not run), its time and memory peak.
    #[serde(default)]
    pub rescored: usize,
    #[serde(default)]
    pub rescore_s: f64,
    #[serde(default)]
    pub rescore_peak_bytes: u64,
    /// The lung field, when the model asks for one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lung_field: Option<LungFieldStats>,
    /// The coarse pass, when it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coarse: Option<CoarseStats>,
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
    /// Detections whose box was measured on the image ([`tessera_maps::extent`]).
    #[serde(default)]
    pub boxes_measured: usize,
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
    /// The study, frame of reference and instances the detections are in (for an SR).
    pub source: tessera_dicom::volume::SeriesSource,
    /// What was odd about the input (the volume's warnings) and the slices no file provided.
    pub input_warnings: Vec<String>,
    pub filled_slices: Vec<tessera_dicom::volume::FilledSlice>,
    /// The model's input grid (the volume after resampling).
    pub model_geometry: Geometry,
    /// Stitched output maps, `[heatmap, size, offset]` at the model's stride.
    pub maps: Maps,
    /// The lung field on the model's grid, when the model asks for one (the viewer draws it).
    pub lung_field: Option<tessera_maps::lung::LungField>,
    /// The model's findings are lung nodules: each has a Lung-RADS suggestion, and so may a
    /// reader's own.
    pub lung_rads: bool,
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
    Resample(#[from] tessera_plan::resample::ResampleError),
    #[error("the model's outputs do not match its card: {0}")]
    MissingHead(#[from] MissingHead),
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

/// Runs detection on `volume`. Emits events to `observer`; `cancel` stops it within a window.
pub fn detect(
    volume: &Volume,
    model: &Model,
    config: &DetectConfig,
    cancel: &CancelToken,
    observer: &mut dyn FnMut(&Event),
) -> Result<DetectionResult, PipelineError> {
    // The memory sampler runs while a run does (its phases' peaks), not while a viewer idles.
    let sampling = memory::Sampling::start();
    let result = run(volume, model, config, cancel, observer);
    drop(sampling);
    match &result {
        Ok(r) => observer(&Event::Finished {
            elapsed_s: r.stats.elapsed_s,
            detections: r.detections.len(),
        }),
        Err(PipelineError::Cancelled) => observer(&Event::Cancelled),
        Err(e) => observer(&Event::Failed(with_causes(e))),
    }
    result
}

/// `error: cause: its cause ...`, the way the CLI prints an error, for the `Failed` event.
fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
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
    let (gpu, baseline_memory_bytes) = memory_probe(config.device);
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
    let held = held_bytes(input.geometry.size, model, config.run_shape());
    let memory = RunMemory::started(baseline_memory_bytes, &held, plan.largest_window_voxels());
    let stats = RunStats::new(plan.windows.len(), device_name, memory);
    let mut runner = Runner {
        model,
        config,
        options,
        cancel,
        gpu,
        held,
        stats,
    };
    let (maps, _) = runner.windows(&plan, input, &mut engine, Pass::Main(observer))?;
    let stage = card.rescore.as_ref().zip(classifier.as_mut());
    let rescore_sha256 = stage
        .as_ref()
        .and(model.rescore_file.as_ref())
        .map(|(_, hash)| hash.clone());
    let (decode_threshold, threshold) = thresholds(model, stage.as_ref().map(|s| s.0), config);
    let (mut peaks, peaks_dropped) = decode(card, &maps, decode_threshold, input.geometry.size)?;
    runner.stats.peaks_dropped = peaks_dropped;
    // After the main windows, while their maps are held (`MemoryForecast` counts both).
    if let Some(spec) = card.coarse_pass.as_ref().filter(|_| config.coarse_pass) {
        let large = runner.coarse(spec, volume, input, &mut engine, decode_threshold, observer)?;
        peaks.extend(large);
    }
    // A RetinaNet's decoder suppressed overlaps already, at its card's threshold, as MONAI does.
    let boxes = match card.output_family {
        OutputFamily::Retinanet => peaks,
        OutputFamily::Centernet | OutputFamily::Segmentation => nms(peaks, config.nms_iou),
    };
    let (kept, mut lungs) = match card.lung_field {
        true => lung_field(input, boxes, config.keep_outside_lungs),
        false => (boxes.into_iter().map(Kept::inside).collect(), None),
    };
    let scored = match stage {
        Some((spec, classifier)) => runner.rescore(&kept, input, spec, classifier, observer)?,
        None => kept,
    };
    let study_from_model = GridMap::new(&input.geometry, &volume.geometry);
    let field = lungs.as_ref().map(|(field, _)| field);
    let box_field = field.filter(|_| !config.detector_boxes);
    let found = findings(
        &scored,
        threshold,
        input,
        box_field,
        &study_from_model,
        &plan,
    );
    let lung_rads = card.suggests_lung_rads();
    let detections = measured(found, volume, lungs.as_mut(), &study_from_model, lung_rads);
    let (lung_field, lung_stats) = lungs.unzip();
    let stats = runner.finish(&plan, lung_stats, started);
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
        source: volume.source(),
        input_warnings: volume.warnings.clone(),
        filled_slices: volume.filled_slices.clone(),
        model_geometry: input.geometry.clone(),
        maps: match &card.retinanet {
            Some(spec) => tessera_maps::retina::score_map(spec, &maps)?,
            None => maps,
        },
        lung_field,
        lung_rads,
    })
}

/// The candidates in `maps` at `threshold` by the card's decoder, and how many peaks were
/// over the decoder's cap.
fn decode(
    card: &ModelCard,
    maps: &Maps,
    threshold: f32,
    size: [usize; 3],
) -> Result<(Vec<Candidate>, usize), MissingHead> {
    match (card.output_family, &card.retinanet, &card.outputs) {
        (OutputFamily::Retinanet, Some(spec), _) => decode_retinanet(spec, maps, threshold, size),
        (OutputFamily::Centernet, _, Some(outputs)) => {
            decode_centernet(maps, outputs, threshold, size)
        }
        (OutputFamily::Segmentation, _, Some(outputs)) => {
            decode_segmentation(maps, outputs, threshold, size)
        }
        // A card without its family's section is refused at load.
        _ => Ok((Vec::new(), 0)),
    }
}

/// The GPU's memory probe (NVML, on NVIDIA devices; host memory otherwise or when NVML is
/// absent), and what the process or GPU holds before the run's own memory: the prediction
/// adds to it.
fn memory_probe(device: Device) -> (Option<Result<GpuProbe, String>>, u64) {
    let mut gpu = match device {
        Device::Cuda(i) | Device::TensorRt(i) => {
            Some(GpuProbe::open(u32::try_from(i).unwrap_or(0)))
        }
        Device::Cpu => None,
    };
    let baseline_bytes = match gpu.as_mut() {
        Some(Ok(probe)) => probe.sample().current_bytes,
        _ => memory::sample().current_bytes,
    };
    (gpu, baseline_bytes)
}

impl RunStats {
    /// Before the first window: the forecast's terms, nothing measured yet.
    fn new(windows: usize, device_name: String, memory: RunMemory) -> Self {
        Self {
            windows,
            elapsed_s: 0.0,
            inference_s: 0.0,
            memory,
            peaks_dropped: 0,
            precision_drift: None,
            device_name,
            rescored: 0,
            rescore_s: 0.0,
            rescore_peak_bytes: 0,
            lung_field: None,
            coarse: None,
        }
    }

    /// Its memory as the calibration reads it.
    pub fn measured(&self) -> MeasuredRun {
        MeasuredRun {
            run: self.memory,
            coarse: self.coarse.as_ref().map(|c| c.memory),
        }
    }
}

/// `(decode threshold, detection threshold)`: with a rescoring stage the detector decodes at
/// the stage's candidate threshold and the stage's score decides; without one the detector's.
fn thresholds(
    model: &Model,
    stage: Option<&tessera_plan::model::RescoreSpec>,
    config: &DetectConfig,
) -> (f32, f32) {
    match stage {
        Some(spec) => (
            spec.candidate_threshold,
            config
                .score_threshold
                .unwrap_or(spec.default_score_threshold),
        ),
        None => {
            let t = config
                .score_threshold
                .unwrap_or(model.card.default_score_threshold);
            (t, t)
        }
    }
}

/// What a run works with between its set-up and its result: the windows and the rescoring
/// stage measure into its stats.
struct Runner<'a> {
    model: &'a Model,
    config: &'a DetectConfig,
    options: EngineOptions<'a>,
    cancel: &'a CancelToken,
    gpu: Option<Result<GpuProbe, String>>,
    /// What the run holds beside its windows, as its forecast counts it.
    held: HeldMemory,
    stats: RunStats,
}

impl Runner<'_> {
    /// The device's memory (the GPU's through NVML, else the host's) since the last
    /// [`memory::reset_peak`]; the host's peak also goes into the stats.
    fn sample_memory(&mut self) -> MemorySample {
        let host = memory::sample();
        let stats = &mut self.stats.memory;
        stats.host_peak_memory_bytes = stats.host_peak_memory_bytes.max(host.peak_bytes);
        match self.gpu.as_mut() {
            Some(Ok(probe)) => probe.sample(),
            _ => host,
        }
    }

    /// The run's stats once its findings are made: the last steps' memory, the lung field,
    /// the time since `started`, and whether the peak went over `plan`'s prediction.
    fn finish(
        mut self,
        plan: &TilePlan,
        lung_field: Option<LungFieldStats>,
        started: Instant,
    ) -> RunStats {
        self.note_later_steps_peak();
        let mut stats = self.stats;
        stats.lung_field = lung_field;
        stats.elapsed_s = started.elapsed().as_secs_f64();
        stats.memory.prediction_exceeded = plan
            .predicted_peak_bytes
            .is_some_and(|p| stats.memory.peak_memory_bytes > p);
        stats
    }

    /// Takes the device's peak since the last reset into the run's peak, and starts the next
    /// step's: what the steps between the windows (decoding, resampling, the lung field, the
    /// stage, the boxes) use is measured step by step.
    fn note_peak(&mut self) -> MemorySample {
        let sample = self.sample_memory();
        let stats = &mut self.stats.memory;
        stats.peak_memory_bytes = stats.peak_memory_bytes.max(sample.peak_bytes);
        memory::reset_peak();
        sample
    }

    /// [`Self::note_peak`] for the steps after the passes.
    fn note_later_steps_peak(&mut self) -> MemorySample {
        let sample = self.note_peak();
        let stats = &mut self.stats;
        let stats = &mut stats.memory;
        stats.later_steps_peak_memory_bytes =
            stats.later_steps_peak_memory_bytes.max(sample.peak_bytes);
        sample
    }

    /// Runs every window of `plan` on `input` and stitches their outputs; with the pass's
    /// memory peak.
    fn windows(
        &mut self,
        plan: &TilePlan,
        input: &Volume,
        engine: &mut Engine,
        mut pass: Pass<'_>,
    ) -> Result<(Maps, u64), PipelineError> {
        let main = matches!(pass, Pass::Main(_));
        let card = &self.model.card;
        let heads: Vec<HeadGrid> = card
            .heads()
            .iter()
            .map(|h| HeadGrid {
                name: h.name.to_string(),
                channels: h.channels,
                stride: h.stride,
            })
            .collect();
        // A MONAI model is blended as MONAI blends it.
        let weighting = match card.output_family {
            OutputFamily::Retinanet => Weighting::MonaiChained,
            OutputFamily::Centernet | OutputFamily::Segmentation => Weighting::Cells,
        };
        let mut stitcher = Stitcher::new(plan, &heads, weighting);
        let mut pass_peak_bytes = 0;
        let total = plan.windows.len();
        for window in &plan.windows {
            if self.cancel.is_cancelled() {
                return Err(PipelineError::Cancelled);
            }
            if let Pass::Main(observer) = &mut pass {
                observer(&Event::WindowStarted {
                    index: window.index,
                    total,
                    window: *window,
                });
            }
            memory::reset_peak();
            let window_started = Instant::now();
            let tensor = window_input(&input.voxels, window, &self.model.card.input);
            let fp32_check =
                (main && window.index == 0 && self.config.precision != Precision::Fp32)
                    .then(|| tensor.clone());
            let outputs = engine.run(window.index, tensor, self.cancel)?;
            if let Some(input) = fp32_check {
                self.stats.precision_drift = Some(precision_drift(
                    self.model,
                    &self.options,
                    &outputs,
                    input,
                    self.cancel,
                )?);
            }
            stitcher.add(window, &outputs.heads)?;
            let elapsed_s = window_started.elapsed().as_secs_f64();
            let sample = self.sample_memory();
            self.stats.inference_s += elapsed_s;
            let stats = &mut self.stats.memory;
            stats.peak_memory_bytes = stats.peak_memory_bytes.max(sample.peak_bytes);
            pass_peak_bytes = pass_peak_bytes.max(sample.peak_bytes);
            stats.memory_source = sample.source;
            if let Pass::Main(observer) = &mut pass {
                stats.windows_peak_memory_bytes =
                    stats.windows_peak_memory_bytes.max(sample.peak_bytes);
                observer(&Event::WindowFinished {
                    index: window.index,
                    total,
                    window: *window,
                    elapsed_s,
                    memory: sample,
                });
            }
        }
        // The last window's peak is in; what follows is measured from here.
        memory::reset_peak();
        let maps = Maps {
            stride: card.stride.per_axis(),
            heads: stitcher.finish(),
        };
        Ok((maps, pass_peak_bytes))
    }

    /// The stage's scores for the best of `boxes`, best first (the rest are dropped).
    fn rescore(
        &mut self,
        boxes: &[Kept],
        input: &Volume,
        spec: &tessera_plan::model::RescoreSpec,
        classifier: &mut PatchClassifier,
        observer: &mut dyn FnMut(&Event),
    ) -> Result<Vec<Kept>, PipelineError> {
        let best: Vec<Candidate> = boxes
            .iter()
            .take(spec.candidates)
            .map(|k| k.candidate)
            .collect();
        let candidates = best.len();
        observer(&Event::RescoreStarted { candidates });
        self.note_later_steps_peak();
        let stage_started = Instant::now();
        let card = &self.model.card;
        let rescored = rescore(
            &best,
            &input.voxels,
            &card.input,
            spec,
            classifier,
            self.cancel,
        )?;
        let elapsed_s = stage_started.elapsed().as_secs_f64();
        let sample = self.note_later_steps_peak();
        self.stats.rescored = candidates;
        self.stats.rescore_s = elapsed_s;
        self.stats.rescore_peak_bytes = sample.peak_bytes;
        observer(&Event::RescoreFinished {
            candidates,
            elapsed_s,
            memory: sample,
        });
        Ok(rescored
            .into_iter()
            .map(|r| Kept {
                candidate: r.candidate,
                detector_score: Some(r.detector_score),
                outside_lungs: boxes[r.index].outside_lungs,
            })
            .collect())
    }
}

/// Which plan [`Runner::windows`] runs: the main one reports each window (its events, the
/// per-window stats, the reduced-precision check on its first); the coarse pass's windows
/// count only towards the run's inference time and peak.
enum Pass<'a> {
    Main(&'a mut dyn FnMut(&Event)),
    Coarse,
}

/// A candidate on its way to a detection.
struct Kept {
    candidate: Candidate,
    /// The detector's score, when the rescoring stage replaced it.
    detector_score: Option<f32>,
    outside_lungs: bool,
}

impl Kept {
    fn inside(candidate: Candidate) -> Self {
        Self {
            candidate,
            detector_score: None,
            outside_lungs: false,
        }
    }
}

/// The lung field of `input`, and `boxes` each with whether it is outside the field (those
/// outside are dropped unless `keep_outside`), in their order.
fn lung_field(
    input: &Volume,
    boxes: Vec<Candidate>,
    keep_outside: bool,
) -> (
    Vec<Kept>,
    Option<(tessera_maps::lung::LungField, LungFieldStats)>,
) {
    let started = Instant::now();
    let field = tessera_maps::lung::segment(&input.voxels, input.geometry.spacing_mm);
    let (kept, dropped): (Vec<Kept>, Vec<Kept>) = boxes
        .into_iter()
        .map(|b| Kept {
            outside_lungs: !field.holds(&b.bbox),
            ..Kept::inside(b)
        })
        .partition(|k| keep_outside || !k.outside_lungs);
    let stats = LungFieldStats {
        volume_ml: field.volume_ml(),
        seconds: started.elapsed().as_secs_f64(),
        dropped_outside: dropped.len(),
        kept_outside: kept.iter().filter(|k| k.outside_lungs).count(),
        boxes_measured: 0,
    };
    (kept, Some((field, stats)))
}

/// The detections of `scored` at `threshold`, their boxes measured on the image where there
/// is a lung field to measure in and the measure is plausible ([`tessera_maps::extent`]).
fn findings(
    scored: &[Kept],
    threshold: f32,
    input: &Volume,
    field: Option<&tessera_maps::lung::LungField>,
    study_from_model: &GridMap,
    plan: &TilePlan,
) -> Vec<Detection> {
    let seams: [Vec<usize>; 3] = std::array::from_fn(|a| plan.seams(a));
    scored
        .iter()
        .filter(|k| k.candidate.score >= threshold)
        .filter_map(|k| {
            let detected = k.candidate.bbox;
            let measured = field.and_then(|f| measure_box(&input.voxels, f, &detected));
            let candidate = Candidate {
                bbox: measured.unwrap_or(detected),
                ..k.candidate
            };
            // A candidate's centre lies on the model grid, so its box covers study voxels;
            // one that did not could be neither shown nor measured.
            Some(Detection {
                detector_score: k.detector_score,
                outside_lungs: k.outside_lungs,
                detector_size_mm: measured.map(|_| detected.size_mm(input.geometry.spacing_mm)),
                ..to_detection(candidate, &input.geometry, study_from_model, &seams)?
            })
        })
        .collect()
}

/// Each detection measured on the study's voxels (within the lung field, when the model has
/// one), with a Lung-RADS suggestion when the model's findings are lung nodules; the lung
/// field's count of boxes measured on the model's grid ([`tessera_maps::extent`]).
fn measured(
    mut detections: Vec<Detection>,
    study: &Volume,
    lungs: Option<&mut (tessera_maps::lung::LungField, LungFieldStats)>,
    study_from_model: &GridMap,
    lung_rads: bool,
) -> Vec<Detection> {
    let (field, stats) = lungs.map(|(f, s)| (&*f, s)).unzip();
    if let Some(stats) = stats {
        stats.boxes_measured = detections
            .iter()
            .filter(|d| d.detector_size_mm.is_some())
            .count();
    }
    for d in &mut detections {
        let in_lung = field.map(|f| {
            move |v: [usize; 3]| f.contains(study_from_model.model_from_study(v.map(|c| c as f64)))
        });
        let measured = crate::measure::measure(
            &study.voxels,
            &study.geometry,
            &d.box_voxel,
            in_lung.as_ref().map(|f| f as &dyn Fn([usize; 3]) -> bool),
        );
        d.lung_rads = lung_rads.then(|| crate::lungrads::of(&measured));
        d.measurements = Some(measured);
    }
    detections
}

/// Maps a box on the model grid to the patient and to the original volume's voxels; `None`
/// for a box that misses the study.
fn to_detection(
    c: Candidate,
    model: &Geometry,
    study_from_model: &GridMap,
    seams: &[Vec<usize>; 3],
) -> Option<Detection> {
    let b = c.bbox;
    let center_lps_mm = model.world_from_voxel.apply(b.center);
    let (lo, hi) = (b.min(), b.max());
    let box_voxel = study_from_model.study_voxels_of_box(lo, hi)?;
    let crosses_seam = (0..3).any(|a| {
        seams[a]
            .iter()
            .any(|&s| lo[a] < s as f64 - 0.5 && hi[a] > s as f64 - 0.5)
    });
    Some(Detection {
        score: c.score,
        detector_score: None,
        center_lps_mm,
        size_mm: b.size_mm(model.spacing_mm),
        detector_size_mm: None,
        box_voxel,
        crosses_seam,
        outside_lungs: false,
        model_box: b,
        measurements: None,
        lung_rads: None,
    })
}

/// Runs `input` through an fp32 session and returns the largest heatmap difference from
/// `reduced`, the same window's outputs at the run's precision.
fn precision_drift(
    model: &Model,
    options: &EngineOptions<'_>,
    reduced: &tessera_infer::WindowOutputs,
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
    let Some(score) = model.card.score_head() else {
        return Ok(0.0);
    };
    let (full, reduced) = (
        head(&full.heads, score.name)?,
        head(&reduced.heads, score.name)?,
    );
    Ok(full
        .iter()
        .zip(reduced.iter())
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max))
}
