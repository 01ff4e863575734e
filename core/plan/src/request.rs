//! A run's request, decided before any runtime exists: its configuration (one set of
//! defaults that the CLI's flags and the viewer's widgets only change), the model's grid for a
//! study, the plan, and the patch a memory budget allows, or a typed refusal.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use tessera_dicom::volume::{Geometry, Volume};

use crate::blend::BlendMode;
use crate::device::{CpuAllocator, Device};
use crate::memory::forecast::{
    MemoryForecast, RunShape, baseline_estimate_bytes, card_memory_model, held_bytes,
};
use crate::memory::line::MemoryModel;
use crate::model::{Model, Precision};
use crate::orient::{flipped, flipped_geometry, flips_to};
use crate::patch::{choose_patch, plan_within_budget};
use crate::plan::{PlanError, TilePlan, TileSpec};
use crate::resample::{ResampleError, resample, resampled_geometry};

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
    /// Run the card's coarse pass for large lesions, when it has one. A record without the
    /// field comes from before the pass existed, so it reads as off.
    #[serde(default)]
    pub coarse_pass: bool,
    /// With a chest-CT model, keep the detector's box for every finding instead of measuring
    /// large ones on the image (`tessera_maps::extent`).
    #[serde(default)]
    pub detector_boxes: bool,
}

impl DetectConfig {
    /// The one set of defaults, with `patch`: exact (halo) tiling with a quarter overlap for
    /// the blending modes, on the CPU with every core, the card's threshold, the rescoring
    /// stage and the coarse pass on, fp32, the card's memory model, findings outside the lungs
    /// dropped, large findings' boxes measured on the image.
    pub fn new(patch: [usize; 3]) -> Self {
        Self {
            tile: TileSpec {
                patch,
                overlap: 0.25,
                blend: BlendMode::Halo,
                allow_single_pass: false,
                memory_budget_bytes: None,
            },
            device: Device::Cpu,
            threads: std::thread::available_parallelism().map_or(1, usize::from),
            allocator: CpuAllocator::default(),
            score_threshold: None,
            rescore: true,
            coarse_pass: true,
            nms_iou: DEFAULT_NMS_IOU,
            precision: Precision::Fp32,
            ort_lib: None,
            memory_model: None,
            keep_outside_lungs: false,
            detector_boxes: false,
        }
    }

    /// What `tessera detect` and the viewer run without options: [`Self::new`] with the
    /// card's recommended patch,
    /// and its tiling when it names one (a MONAI bundle's own sliding window).
    pub fn defaults_for(model: &Model) -> Self {
        let mut config = Self::new(model.card.recommended_patch);
        if let Some(tiling) = model.card.tiling {
            config.tile.blend = tiling.blend;
            config.tile.overlap = tiling.overlap;
        }
        config
    }

    /// What of this run decides what it holds beside its windows.
    pub fn run_shape(&self) -> RunShape {
        RunShape {
            device: self.device,
            blend: self.tile.blend,
            coarse_pass: self.coarse_pass,
        }
    }

    /// The calibration this run is predicted from: its own, else the card's.
    pub fn memory_model(&self, model: &Model) -> Option<MemoryModel> {
        self.memory_model
            .or_else(|| card_memory_model(model, self.device))
    }
}

fn enabled() -> bool {
    true
}

/// The plan this run would use, without running anything. `baseline_bytes` is the memory the
/// process holds when the run starts ([`baseline_estimate_bytes`](crate::memory::forecast::baseline_estimate_bytes) before it does).
pub fn plan_for(
    volume_size: [usize; 3],
    model: &Model,
    config: &DetectConfig,
    baseline_bytes: u64,
) -> Result<TilePlan, PlanError> {
    let forecast = config.memory_model(model).map(|fitted| MemoryForecast {
        model: fitted,
        baseline_bytes,
        held: held_bytes(volume_size, model, config.run_shape()),
    });
    plan_within_budget(
        volume_size,
        model.card.grid(),
        &config.tile,
        forecast.as_ref(),
    )
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

/// The patch [`choose_patch`] picks for `budget_bytes` on a volume of `geometry`
/// (in its own voxels), from `config`'s calibration or the card's, with the process's
/// baseline estimated now; and the forecast it was chosen with.
fn patch_for_budget(
    geometry: &Geometry,
    model: &Model,
    config: &DetectConfig,
    budget_bytes: u64,
) -> Result<([usize; 3], MemoryForecast), BudgetError> {
    let model_memory = config
        .memory_model(model)
        .ok_or_else(|| BudgetError::Uncalibrated {
            model: model.card.name.clone(),
            device: config.device,
        })?;
    let size = model_geometry(geometry, model).size;
    let forecast = MemoryForecast {
        model: model_memory,
        baseline_bytes: baseline_estimate_bytes(geometry, model, config.device),
        held: held_bytes(size, model, config.run_shape()),
    };
    let patch = choose_patch(
        size,
        model.card.grid(),
        &forecast,
        budget_bytes,
        config.tile.blend,
    )?;
    Ok((patch, forecast))
}

/// `volume` on `model`'s grid: resampled to the card's spacing, then flipped to the card's
/// voxel order ([`crate::orient`]); `None` when it is on that grid already.
pub fn resample_for(volume: &Volume, model: &Model) -> Result<Option<Volume>, ResampleError> {
    let resampled = match model.card.target_spacing_mm {
        Some(spacing) => resample(volume, spacing)?,
        None => None,
    };
    let Some(codes) = &model.card.input.orientation else {
        return Ok(resampled);
    };
    let on_spacing = resampled.as_ref().unwrap_or(volume);
    let flips = flips_to(&on_spacing.geometry, codes)?;
    Ok(flipped(on_spacing, flips).or(resampled))
}

/// The grid `model` runs on for a volume of `geometry`: resampled to the card's spacing (or
/// the volume's own when the card has none), in the card's voxel order. A study that cannot
/// be put in that order keeps its own (the run refuses it in [`resample_for`]).
pub fn model_geometry(geometry: &Geometry, model: &Model) -> Geometry {
    let on_spacing = match model.card.target_spacing_mm {
        Some(spacing) => resampled_geometry(geometry, spacing),
        None => geometry.clone(),
    };
    match model
        .card
        .input
        .orientation
        .as_deref()
        .map(|codes| flips_to(&on_spacing, codes))
    {
        Some(Ok(flips)) => flipped_geometry(&on_spacing, flips),
        _ => on_spacing,
    }
}

/// How the patch of a run is chosen.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PatchChoice {
    /// This patch (the plan may still refuse it).
    Fixed([usize; 3]),
    /// The one [`choose_patch`] picks for this budget, from `config`'s calibration or the
    /// card's.
    Budget { budget_bytes: u64 },
}

/// The patch a run uses, and the forecast it was chosen with (budget choices only).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ResolvedPatch {
    pub patch: [usize; 3],
    pub forecast: Option<MemoryForecast>,
    /// The budget allowed larger windows than the calibration's largest (these voxels), so
    /// the patch was kept within it: calibrating with larger windows would use more of it.
    pub held_to_calibration: Option<usize>,
}

impl ResolvedPatch {
    /// What held the patch besides the budget, in words (the CLI's note, the viewer's line).
    pub fn calibration_note(&self) -> Option<String> {
        self.held_to_calibration.map(|voxels| {
            format!(
                "the budget allows larger windows than the calibration's largest ({voxels} voxels); the patch stays within it: calibrate with larger windows (tessera sweep) to use more of the budget"
            )
        })
    }
}

/// The patch for `choice` on a volume of `geometry` (in its own voxels): the one place where
/// the CLI, the sweep and the viewer turn a patch or a budget into a patch.
pub fn resolve_patch(
    geometry: &Geometry,
    model: &Model,
    config: &DetectConfig,
    choice: PatchChoice,
) -> Result<ResolvedPatch, BudgetError> {
    match choice {
        PatchChoice::Fixed(patch) => Ok(ResolvedPatch {
            patch,
            forecast: None,
            held_to_calibration: None,
        }),
        PatchChoice::Budget { budget_bytes } => {
            let (patch, forecast) = patch_for_budget(geometry, model, config, budget_bytes)?;
            // What the budget alone would allow, were the line trusted past its windows.
            let mut unbounded = forecast;
            unbounded.model.largest_window_voxels = None;
            let size = model_geometry(geometry, model).size;
            let voxels = |p: [usize; 3]| p.iter().product::<usize>();
            let held_to_calibration = forecast.model.largest_window_voxels.filter(|_| {
                choose_patch(
                    size,
                    model.card.grid(),
                    &unbounded,
                    budget_bytes,
                    config.tile.blend,
                )
                .is_ok_and(|p| voxels(p) > voxels(patch))
            });
            Ok(ResolvedPatch {
                patch,
                forecast: Some(forecast),
                held_to_calibration,
            })
        }
    }
}
