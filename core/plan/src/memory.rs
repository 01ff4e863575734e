//! The memory model, end to end: what a run is predicted to need, what it measured, and the
//! fit from measured runs back to the prediction.
//!
//! - [`probe`]: the process's memory now and its peak (one [`probe::MemorySample`] whatever
//!   the source; NVML samples come from `tessera-infer`).
//! - [`line`]: the calibrated bound for one window, `fixed + bytes per voxel * voxels`.
//! - [`forecast`]: a run's predicted peak, its terms named: the baseline, what the run holds
//!   beside its windows (maps, the lung field, the coarse pass), and its phases.
//! - [`measured`]: the same terms as a run measured them: the record `det.json` keeps.
//! - [`calibrate`]: measured runs to a calibration (`tessera sweep` runs the processes and
//!   calls it); fitting a forecast's own points gives the forecast back.
//! - [`file`]: `memory_model.json`, the calibration and the points it was fitted on.

pub mod calibrate;
pub mod file;
pub mod forecast;
pub mod line;
pub mod measured;
pub mod probe;
