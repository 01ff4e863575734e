//! What to run, decided without a runtime: the model card, the run's request, the window grid,
//! the memory model (forecast, measurement, calibration), the model's grid for a study
//! (resampling, orientation, the mapping between grids). Nothing here loads ONNX Runtime
//! (that is `tessera-infer`) or reads a window's outputs (that is `tessera-maps`), so a plan,
//! a budget's patch or a refusal is computed before any session exists.

pub mod blend;
pub mod bytes;
pub mod device;
pub mod grid_map;
pub mod memory;
pub mod model;
pub mod model_grid;
pub mod orient;
pub mod patch;
pub mod plan;
pub mod request;
pub mod resample;
