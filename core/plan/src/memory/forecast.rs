//! A run's predicted peak, its terms named: what the process holds when the run starts, what
//! the run holds beside its windows (in proportion to its study), and the largest of its
//! phases, each bounded by the calibrated [`MemoryModel`].

use tessera_dicom::volume::Geometry;

use super::line::MemoryModel;
use super::probe;
use crate::blend::BlendMode;
use crate::device::Device;
use crate::model::Model;
use crate::resample::{resample_needed, resampled_size};

/// What of a run decides what it holds beside its windows ([`held_bytes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunShape {
    pub device: Device,
    pub blend: BlendMode,
    pub coarse_pass: bool,
}

/// What a run holds beside its windows, in proportion to its study ([`held_bytes`]).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct HeldMemory {
    /// The main pass's stitched maps: held from its first window to the end of the run.
    pub maps_bytes: u64,
    /// The lung field's mask, from the steps after the passes on.
    pub lung_field_bytes: u64,
    /// The coarse pass, when it runs: it starts after the main windows, so what it holds
    /// never meets their peak.
    pub coarse: Option<CoarseMemory>,
}

/// What the coarse pass holds while it runs, and the largest window it can run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CoarseMemory {
    /// Its grid and its stitched maps.
    pub held_bytes: u64,
    /// A bound on its largest window (its padded grid, or the window it ran); the run's
    /// patch bounds it too.
    pub window_voxels: usize,
}

/// A run's predicted peak: the memory its process holds when it starts (the study, the
/// viewer, a runtime already loaded), the main pass's maps, and the largest of its phases:
/// the calibrated bound for the largest main window; the coarse pass's grid and maps with the
/// bound for its largest window; the steps after the passes, with the lung field.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemoryForecast {
    pub model: MemoryModel,
    pub baseline_bytes: u64,
    pub held: HeldMemory,
}

impl MemoryForecast {
    pub fn peak_bytes(&self, window_voxels: usize) -> u64 {
        let main = self.model.predict_bytes(window_voxels);
        let coarse = self.held.coarse.map_or(0, |c| {
            c.held_bytes + self.model.predict_bytes(window_voxels.min(c.window_voxels))
        });
        let stages =
            self.held.lung_field_bytes + self.model.later_steps_bytes.max(0.0).ceil() as u64;
        self.baseline_bytes + self.held.maps_bytes + main.max(coarse).max(stages)
    }
}

/// The memory coefficients the card records for this kind of device, if any.
pub fn card_memory_model(model: &Model, device: Device) -> Option<MemoryModel> {
    let key = match device {
        Device::Cpu => "cpu",
        Device::Cuda(_) | Device::TensorRt(_) => "cuda",
    };
    model.card.memory.get(key).map(|m| MemoryModel {
        largest_window_voxels: m
            .model
            .largest_window_voxels
            .or_else(|| m.points.iter().map(|p| p.0).max()),
        ..m.model
    })
}

/// What this process will hold when a run on `volume` starts: what it holds now plus the
/// copy of the volume resampled to the model's grid (the pipeline's baseline is measured
/// after resampling). On a GPU nothing is held before the run's own session.
pub fn baseline_estimate_bytes(geometry: &Geometry, model: &Model, device: Device) -> u64 {
    if device != Device::Cpu {
        return 0;
    }
    let resampled = match model.card.target_spacing_mm {
        Some(spacing) if resample_needed(geometry, spacing) => {
            let size = resampled_size(geometry, spacing);
            size.iter().product::<usize>() * size_of::<f32>()
        }
        _ => 0,
    };
    probe::sample().current_bytes + resampled as u64
}

/// What a run on a model grid of `size` holds beside its windows, in proportion to the study:
/// the main pass's stitched output maps (an `f32` per cell and channel, and a weight per cell
/// when blending), the lung field's mask when the card has one, and, with the coarse pass,
/// its grid and maps and a bound on its windows. The calibration fits the rest, so a study
/// larger than the calibration's is predicted with its own maps. On a GPU they are host
/// memory, outside what the forecast bounds: nothing.
///
/// ```
/// # use tessera_plan::memory::forecast::held_bytes;
/// # use tessera_plan::request::DetectConfig;
/// # use tessera_plan::model::Model;
/// # for dir in tessera_plan::model::shipped_model_dirs().unwrap_or_default() {
/// let model = Model::load(&dir).unwrap();
/// let mut config = DetectConfig::defaults_for(&model);
/// let (small, large) = ([100, 100, 100], [200, 200, 200]);
/// let maps = |size| held_bytes(size, &model, config.run_shape()).maps_bytes;
/// assert!(maps(large) > 7 * maps(small));
/// config.coarse_pass = false;
/// assert!(held_bytes(small, &model, config.run_shape()).coarse.is_none());
/// # }
/// ```
pub fn held_bytes(size: [usize; 3], model: &Model, run: RunShape) -> HeldMemory {
    if run.device != Device::Cpu {
        return HeldMemory::default();
    }
    let card = &model.card;
    let grid = card.grid();
    let heads = card.heads();
    let blended = run.blend != BlendMode::Halo;
    // Each head at its own stride, and in blended modes a weight sum per distinct stride.
    let maps = |size: [usize; 3]| {
        let cells = |stride: [usize; 3]| -> usize {
            (0..3).map(|a| size[a].div_ceil(stride[a].max(1))).product()
        };
        // MONAI's chained weights differ per head; Tessera's are shared per stride.
        let mut strides: Vec<[usize; 3]> = heads.iter().map(|h| h.stride).collect();
        if card.output_family != crate::model::OutputFamily::Retinanet {
            strides.dedup();
        }
        let values: usize = heads.iter().map(|h| cells(h.stride) * h.channels).sum();
        let weights: usize = if blended {
            strides.iter().map(|s| cells(*s)).sum()
        } else {
            0
        };
        (values + weights) * size_of::<f32>()
    };
    let coarse = card
        .coarse_pass
        .as_ref()
        .filter(|_| run.coarse_pass)
        .map(|coarse| {
            // Never under `resample::resampled_size` of the study (which this has not got).
            // Without a card spacing the grid is the study's own: bound it by the main grid.
            let ratio = card.target_spacing_mm.unwrap_or(coarse.spacing_mm);
            let coarse_size: [usize; 3] = std::array::from_fn(|a| {
                (size[a] as f64 * ratio[a] / coarse.spacing_mm[a]).ceil() as usize
            });
            let grid_bytes = coarse_size.iter().product::<usize>() * size_of::<f32>();
            CoarseMemory {
                held_bytes: (grid_bytes + maps(coarse_size)) as u64,
                // Its plan pads the grid to the stride; no window is larger.
                window_voxels: grid.padded(coarse_size).iter().product(),
            }
        });
    HeldMemory {
        maps_bytes: maps(size) as u64,
        // A byte per voxel of the grid (`lung::LungField`).
        lung_field_bytes: if card.lung_field {
            size.iter().product::<usize>() as u64
        } else {
            0
        },
        coarse,
    }
}
