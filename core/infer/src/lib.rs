//! Inference through ONNX Runtime (`ort`, loaded at run time): the runtime library, sessions per
//! device, the rescoring classifier and the GPU memory probe. Never decides what to run: the
//! plan does (`tessera-plan`, which has no runtime).

pub mod arena;
pub mod classifier;
pub mod gpu;
pub mod input;
pub mod runtime;
pub mod session;

pub use classifier::PatchClassifier;
pub use runtime::{Runtime, RuntimeError, RuntimeSource, init_runtime, locate_runtime};
pub use session::{Cause, Engine, InferError, WindowOutputs};
