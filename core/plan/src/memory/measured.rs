//! What a run measures against its forecast: the record `det.json` keeps under `stats` (its
//! fields flattened there, so the keys are the schema's), and the forecast's terms read back
//! from it, which [`super::calibrate`] fits on.

use serde::{Deserialize, Serialize};

use super::forecast::{CoarseMemory, HeldMemory, MemoryForecast};
use super::line::MemoryModel;
use super::probe::MemorySource;

/// A run's memory: the forecast's terms as the run held them, and the peaks it measured (the
/// GPU's through NVML, else the process's resident set).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RunMemory {
    /// The run's peak on its device, over every step from the first window to the findings
    /// (the plan's prediction bounds it).
    pub peak_memory_bytes: u64,
    /// The main windows' own peak (the coarse pass's is in its [`PassMemory`]).
    #[serde(default)]
    pub windows_peak_memory_bytes: u64,
    /// The main pass's largest window, voxels (0 in records from before it was kept).
    #[serde(default)]
    pub windows_largest_voxels: usize,
    pub memory_source: MemorySource,
    /// Host memory peak (process RSS), also when `peak_memory_bytes` is GPU memory.
    pub host_peak_memory_bytes: u64,
    /// Process (or GPU) memory when the run started: the forecast's baseline.
    #[serde(default)]
    pub baseline_memory_bytes: u64,
    /// The main pass's stitched maps, held from its first window on
    /// ([`HeldMemory::maps_bytes`]).
    #[serde(default)]
    pub held_memory_bytes: u64,
    /// The peak of the steps after the passes (decoding, the lung field, the rescoring stage,
    /// the boxes), and what they hold beside the main maps (the lung field's mask,
    /// [`HeldMemory::lung_field_bytes`]). Their keys in det.json are `stages_*`, as the
    /// schema has had them from the start.
    #[serde(default, rename = "stages_peak_memory_bytes")]
    pub later_steps_peak_memory_bytes: u64,
    #[serde(default, rename = "stages_held_memory_bytes")]
    pub later_steps_held_memory_bytes: u64,
    /// `peak_memory_bytes` went over the plan's predicted peak: the calibration is wrong for
    /// this machine or study, and a budget chosen from it is not safe.
    #[serde(default)]
    pub prediction_exceeded: bool,
}

impl RunMemory {
    /// Before the first window: the forecast's terms for this run (its baseline, what it
    /// holds, its largest main window), nothing measured yet.
    pub fn started(baseline_bytes: u64, held: &HeldMemory, window_voxels: usize) -> Self {
        Self {
            peak_memory_bytes: 0,
            windows_peak_memory_bytes: 0,
            windows_largest_voxels: window_voxels,
            memory_source: MemorySource::Unavailable,
            host_peak_memory_bytes: 0,
            baseline_memory_bytes: baseline_bytes,
            held_memory_bytes: held.maps_bytes,
            later_steps_peak_memory_bytes: 0,
            later_steps_held_memory_bytes: held.lung_field_bytes,
            prediction_exceeded: false,
        }
    }
}

/// The coarse pass's memory: what it held (its grid and stitched maps, as the forecast counts
/// them), its largest window and its peak, from the main windows' end to its own decoding.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct PassMemory {
    #[serde(default)]
    pub held_memory_bytes: u64,
    #[serde(default)]
    pub largest_window_voxels: usize,
    #[serde(default)]
    pub peak_memory_bytes: u64,
}

/// One run's memory as the calibration and the sweep's report read it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MeasuredRun {
    pub run: RunMemory,
    /// The coarse pass, when it ran.
    pub coarse: Option<PassMemory>,
}

impl MeasuredRun {
    /// What the run held beside its windows.
    pub fn held(&self) -> HeldMemory {
        HeldMemory {
            maps_bytes: self.run.held_memory_bytes,
            lung_field_bytes: self.run.later_steps_held_memory_bytes,
            coarse: self.coarse.map(|c| CoarseMemory {
                held_bytes: c.held_memory_bytes,
                window_voxels: c.largest_window_voxels,
            }),
        }
    }

    /// The forecast `model` gives this run, from its own baseline and held memory.
    pub fn forecast(&self, model: MemoryModel) -> MemoryForecast {
        MemoryForecast {
            model,
            baseline_bytes: self.run.baseline_memory_bytes,
            held: self.held(),
        }
    }

    /// The peak `model` predicts for this run.
    pub fn predicted_bytes(&self, model: MemoryModel) -> u64 {
        self.forecast(model)
            .peak_bytes(self.run.windows_largest_voxels)
    }
}
