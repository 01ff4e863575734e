//! One ONNX Runtime session per device, running one window at a time, cancellable.

use std::path::Path;
use std::sync::Arc;

use ndarray::{Array4, Array5, Ix5};
use ort::session::{RunOptions, Session};

use super::arena::ensure_tight_arena;
use super::runtime::{Flavour, Runtime, RuntimeError, init_runtime};
use tessera_plan::device::{CancelToken, CpuAllocator, Device};
use tessera_plan::model::{Model, Precision};

#[derive(Debug, thiserror::Error)]
pub enum InferError {
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error("cannot start the {device} session for model {model}: {reason}")]
    Session {
        device: Device,
        model: String,
        reason: String,
    },
    #[error("model {model} does not take the input its card describes: {reason}")]
    InputMismatch { model: String, reason: String },
    #[error("model {model} has no output named '{name}' (it has: {available})")]
    MissingOutput {
        model: String,
        name: String,
        available: String,
    },
    #[error("inference failed on window {window}: {reason}")]
    Run { window: usize, reason: String },
    #[error("rescoring the candidates failed: {reason}")]
    Rescore { reason: String },
    #[error("cancelled")]
    Cancelled,
}

/// The raw outputs of one window, each `[channels, z, y, x]`, in the card's head order.
#[derive(Debug)]
pub struct WindowOutputs {
    pub heads: Vec<Array4<f32>>,
}

/// An ONNX Runtime session for one model on one device.
#[derive(Debug)]
pub struct Engine {
    session: Session,
    input_name: String,
    output_names: Vec<String>,
    pub device: Device,
    /// The execution provider that runs the model (`CPUExecutionProvider`, ...).
    pub execution_provider: String,
    pub runtime: Runtime,
}

/// How to open a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineOptions<'a> {
    pub device: Device,
    pub threads: usize,
    pub allocator: CpuAllocator,
    pub precision: Precision,
    pub ort_lib: Option<&'a Path>,
}

impl Engine {
    /// Opens `model` on a device. GPU providers that cannot start are an error, never a silent
    /// fall back to CPU.
    pub fn new(model: &Model, options: &EngineOptions<'_>) -> Result<Self, InferError> {
        let EngineOptions {
            device, precision, ..
        } = *options;
        let (model_path, _) = model.file_for(precision).map_err(|e| InferError::Session {
            device,
            model: model.card.name.clone(),
            reason: e.to_string(),
        })?;
        let (session, runtime, execution_provider) =
            open_session(&model_path, &model.card.name, options)?;
        check_input(&session, &model.card.name, &model.card.input.name)?;
        let outputs = &model.card.outputs;
        let wanted = [
            Some(&outputs.heatmap),
            outputs.size.as_ref(),
            outputs.offset.as_ref(),
        ];
        let mut output_names = Vec::new();
        for spec in wanted.into_iter().flatten() {
            check_output(&session, &model.card.name, &spec.name)?;
            output_names.push(spec.name.clone());
        }
        Ok(Self {
            session,
            input_name: model.card.input.name.clone(),
            output_names,
            device,
            execution_provider: execution_provider.to_string(),
            runtime,
        })
    }

    /// Runs one window (`[1, 1, z, y, x]`, normalised). Returns [`InferError::Cancelled`] when
    /// `cancel` fires before or during the run.
    pub fn run(
        &mut self,
        window: usize,
        input: Array5<f32>,
        cancel: &CancelToken,
    ) -> Result<WindowOutputs, InferError> {
        let fail = |reason: String| InferError::Run { window, reason };
        let names = &self.output_names;
        let input_name = self.input_name.as_str();
        let heads = run_cancellable(&mut self.session, input_name, input, cancel, &fail, |out| {
            let mut heads = Vec::with_capacity(names.len());
            for name in names {
                let array = out[name.as_str()]
                    .try_extract_array::<f32>()
                    .map_err(|e| fail(format!("output {name}: {e}")))?;
                let array = array
                    .into_dimensionality::<Ix5>()
                    .map_err(|e| fail(format!("output {name} is not 5-D: {e}")))?;
                heads.push(array.index_axis(ndarray::Axis(0), 0).to_owned());
            }
            Ok(heads)
        })?;
        Ok(WindowOutputs { heads })
    }
}

/// Runs `session` on one input tensor, stoppable by `cancel` before and during the run;
/// `extract` copies what the caller needs out of the outputs.
pub(crate) fn run_cancellable<T>(
    session: &mut Session,
    input_name: &str,
    input: Array5<f32>,
    cancel: &CancelToken,
    fail: &dyn Fn(String) -> InferError,
    extract: impl FnOnce(&ort::session::SessionOutputs<'_>) -> Result<T, InferError>,
) -> Result<T, InferError> {
    if cancel.is_cancelled() {
        return Err(InferError::Cancelled);
    }
    let options = Arc::new(RunOptions::new().map_err(|e| fail(e.to_string()))?);
    let in_flight = options.clone();
    // Best effort: if terminating fails, the run stops at the next window instead.
    cancel.attach(Box::new(move || {
        let _ = in_flight.terminate();
    }));
    let tensor = ort::value::Tensor::from_array(input).map_err(|e| fail(e.to_string()))?;
    let result = session.run_with_options(ort::inputs![input_name => tensor], &options);
    cancel.detach();
    match result {
        Ok(outputs) => extract(&outputs),
        Err(_) if cancel.is_cancelled() => Err(InferError::Cancelled),
        Err(e) => Err(fail(e.to_string())),
    }
}

/// A session for the ONNX file at `path` on the options' device (any precision is the file's
/// own), the runtime it runs on, and the execution provider's name. `name` is for errors.
pub(crate) fn open_session(
    path: &Path,
    name: &str,
    options: &EngineOptions<'_>,
) -> Result<(Session, Runtime, &'static str), InferError> {
    let EngineOptions {
        device,
        threads,
        allocator,
        ort_lib,
        ..
    } = *options;
    let flavour = if device == Device::Cpu {
        Flavour::Cpu
    } else {
        Flavour::Gpu
    };
    let runtime = init_runtime(ort_lib, flavour)?;
    let fail = |reason: String| {
        let hint = if device == Device::Cpu {
            ""
        } else {
            " (GPU devices need the GPU runtime: ./scripts/setup.sh --gpu, and an NVIDIA driver)"
        };
        InferError::Session {
            device,
            model: name.to_string(),
            reason: format!("{reason}{hint}"),
        }
    };
    let mut builder = Session::builder(&runtime.environment).map_err(|e| fail(e.to_string()))?;
    let (providers, execution_provider) = match device {
        Device::Cpu if allocator == CpuAllocator::None => (
            vec![ort::ep::CPU::default().with_arena_allocator(false).build()],
            "CPUExecutionProvider",
        ),
        Device::Cpu => (Vec::new(), "CPUExecutionProvider"),
        Device::Cuda(id) => (
            vec![
                ort::ep::CUDA::default()
                    .with_device_id(id)
                    .build()
                    .error_on_failure(),
            ],
            "CUDAExecutionProvider",
        ),
        Device::TensorRt(id) => (
            vec![
                ort::ep::TensorRT::default()
                    .with_device_id(id)
                    .build()
                    .error_on_failure(),
            ],
            "TensorrtExecutionProvider",
        ),
    };
    builder = builder
        .with_execution_providers(providers)
        .map_err(|e| fail(e.to_string()))?;
    builder = builder
        .with_intra_threads(threads.max(1))
        .map_err(|e| fail(e.to_string()))?;
    builder = builder
        .with_inter_threads(1)
        .map_err(|e| fail(e.to_string()))?;
    if device == Device::Cpu && allocator == CpuAllocator::TightArena {
        ensure_tight_arena(&runtime.environment).map_err(&fail)?;
        builder = builder
            .with_env_allocators()
            .map_err(|e| fail(e.to_string()))?;
    }
    let session = builder
        .commit_from_file(path)
        .map_err(|e| fail(e.to_string()))?;
    Ok((session, runtime, execution_provider))
}

/// The model must have the output the card names.
pub(crate) fn check_output(session: &Session, model: &str, wanted: &str) -> Result<(), InferError> {
    if session.outputs().iter().any(|o| o.name() == wanted) {
        return Ok(());
    }
    let available: Vec<&str> = session.outputs().iter().map(|o| o.name()).collect();
    Err(InferError::MissingOutput {
        model: model.to_string(),
        name: wanted.to_string(),
        available: available.join(", "),
    })
}

/// The card's input must be the model's: same name, a float tensor of rank 5 (NCDHW).
pub(crate) fn check_input(session: &Session, model: &str, wanted: &str) -> Result<(), InferError> {
    let mismatch = |reason: String| InferError::InputMismatch {
        model: model.to_string(),
        reason,
    };
    let inputs = session.inputs();
    let Some(input) = inputs.iter().find(|i| i.name() == wanted) else {
        let names: Vec<&str> = inputs.iter().map(|i| i.name()).collect();
        return Err(mismatch(format!(
            "the card names input '{wanted}', the model has: {}",
            names.join(", ")
        )));
    };
    if inputs.len() != 1 {
        return Err(mismatch(format!(
            "it has {} inputs; Tessera feeds one tensor",
            inputs.len()
        )));
    }
    let dtype = input.dtype();
    if dtype.tensor_type() != Some(ort::value::TensorElementType::Float32) {
        return Err(mismatch(format!(
            "input '{wanted}' is {dtype}, not a float32 tensor"
        )));
    }
    match dtype.tensor_shape().map(|s| s.len()) {
        Some(5) => Ok(()),
        rank => Err(mismatch(format!(
            "input '{wanted}' has rank {}, the card's layout NCDHW needs 5",
            rank.map_or("unknown".to_string(), |r| r.to_string())
        ))),
    }
}
