//! What to run, decided without a runtime: the model card, the window grid and its memory
//! prediction, stitching window outputs, resampling to the model's grid, decoding boxes and
//! the lung field. Nothing here loads ONNX Runtime (that is `tessera-infer`), so a plan, a
//! budget's patch or a refusal is computed before any session exists.

pub mod detect;
pub mod device;
pub mod extent;
pub mod grid_map;
pub mod lung;
pub mod mask;
pub mod memory;
pub mod model;
pub mod orient;
pub mod plan;
pub mod request;
pub mod resample;
pub mod retina;
pub mod stitch;
