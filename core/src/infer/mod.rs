//! Inference through ONNX Runtime (`ort`, loaded at run time): the runtime library, sessions per
//! device, cancellation, and memory probes. Never decides what to run: `plan` does.

pub mod arena;
pub mod classifier;
pub mod gpu;
pub mod input;
pub mod memory;
pub mod runtime;
pub mod session;

pub use classifier::PatchClassifier;
pub use memory::{MemorySample, MemorySource};
pub use runtime::{Runtime, RuntimeError, RuntimeSource, init_runtime, locate_runtime};
pub use session::{CancelToken, Device, Engine, InferError, WindowOutputs};
