//! Inference through ONNX Runtime (`ort`, loaded at run time).
//!
//! This session-level module grows with the engine; today it finds and loads the runtime.

pub mod runtime;

pub use runtime::{Runtime, RuntimeError, RuntimeSource, init_runtime, locate_runtime};
