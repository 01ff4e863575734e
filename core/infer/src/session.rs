//! One ONNX Runtime session per device, running one window at a time, cancellable.

use std::path::Path;
use std::sync::Arc;

use ndarray::{Array5, Ix5};
use ort::session::{RunOptions, Session};

use super::arena::ensure_tight_arena;
use super::runtime::{Flavour, Runtime, RuntimeError, init_runtime};
use tessera_maps::stitch::HeadMap;
use tessera_plan::device::{CancelToken, CpuAllocator, Device};
use tessera_plan::model::{Head, Model, Precision};

#[derive(Debug, thiserror::Error)]
pub enum InferError {
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error("cannot start the {device} session for model {model}{hint}")]
    Session {
        device: Device,
        model: String,
        /// What to do about it (set up the GPU runtime), when there is something.
        hint: &'static str,
        #[source]
        cause: Cause,
    },
    #[error("model {model} does not take the input its card describes: {reason}")]
    InputMismatch { model: String, reason: String },
    #[error("model {model} has no output named '{name}' (it has: {available})")]
    MissingOutput {
        model: String,
        name: String,
        available: String,
    },
    #[error("model {model}'s output '{name}' is not the head its card describes: {reason}")]
    OutputMismatch {
        model: String,
        name: String,
        reason: String,
    },
    #[error("inference failed on window {window}")]
    Run {
        window: usize,
        #[source]
        cause: Cause,
    },
    #[error("rescoring the candidates failed")]
    Rescore {
        #[source]
        cause: Cause,
    },
    #[error("cancelled")]
    Cancelled,
}

/// Why a session or a run failed: ONNX Runtime's own error or the model's, kept as the
/// source, or what Tessera found wrong with an output.
#[derive(Debug, thiserror::Error)]
pub enum Cause {
    #[error(transparent)]
    Ort(#[from] ort::Error),
    #[error(transparent)]
    Model(#[from] tessera_plan::model::ModelError),
    #[error("{0}")]
    Found(String),
}

/// The raw outputs of one window, each `[channels, z, y, x]` with its head's name.
#[derive(Debug)]
pub struct WindowOutputs {
    pub heads: Vec<HeadMap>,
}

/// An ONNX Runtime session for one model on one device.
#[derive(Debug)]
pub struct Engine {
    session: Session,
    input_name: String,
    /// The card's heads: name and channels.
    heads: Vec<(String, usize)>,
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
            hint: "",
            cause: e.into(),
        })?;
        let (session, runtime, execution_provider) =
            open_session(&model_path, &model.card.name, options)?;
        check_input(&session, &model.card.name, &model.card.input.name)?;
        let mut heads = Vec::new();
        for head in model.card.heads() {
            check_head(&session, &model.card.name, head)?;
            heads.push((head.name.to_string(), head.channels));
        }
        Ok(Self {
            session,
            input_name: model.card.input.name.clone(),
            heads,
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
        let fail = |cause: Cause| InferError::Run { window, cause };
        let wanted = &self.heads;
        let input_name = self.input_name.as_str();
        let heads = run_cancellable(&mut self.session, input_name, input, cancel, &fail, |out| {
            let mut heads = Vec::with_capacity(wanted.len());
            for (name, channels) in wanted {
                let array = out[name.as_str()]
                    .try_extract_array::<f32>()
                    .map_err(|e| fail(e.into()))?;
                let array = array
                    .into_dimensionality::<Ix5>()
                    .map_err(|e| fail(Cause::Found(format!("output {name} is not 5-D: {e}"))))?;
                // Dynamic channels pass the check at load: the run's shape decides.
                if array.shape()[1] != *channels {
                    return Err(fail(Cause::Found(format!(
                        "output {name} has {} channels, the card's head needs {channels}",
                        array.shape()[1]
                    ))));
                }
                heads.push(HeadMap {
                    name: name.clone(),
                    map: array.index_axis(ndarray::Axis(0), 0).to_owned(),
                });
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
    fail: &dyn Fn(Cause) -> InferError,
    extract: impl FnOnce(&ort::session::SessionOutputs<'_>) -> Result<T, InferError>,
) -> Result<T, InferError> {
    if cancel.is_cancelled() {
        return Err(InferError::Cancelled);
    }
    let options = Arc::new(RunOptions::new().map_err(|e| fail(e.into()))?);
    let in_flight = options.clone();
    // Best effort: if terminating fails, the run stops at the next window instead.
    cancel.attach(Box::new(move || {
        let _ = in_flight.terminate();
    }));
    let tensor = ort::value::Tensor::from_array(input).map_err(|e| fail(e.into()))?;
    let result = session.run_with_options(ort::inputs![input_name => tensor], &options);
    cancel.detach();
    match result {
        Ok(outputs) => extract(&outputs),
        Err(_) if cancel.is_cancelled() => Err(InferError::Cancelled),
        Err(e) => Err(fail(e.into())),
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
    let fail = |cause: Cause| InferError::Session {
        device,
        model: name.to_string(),
        hint: if device == Device::Cpu {
            ""
        } else {
            " (GPU devices need the GPU runtime: ./scripts/setup.sh --gpu, and an NVIDIA driver)"
        },
        cause,
    };
    let mut builder = Session::builder(&runtime.environment).map_err(|e| fail(e.into()))?;
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
        .map_err(|e| fail(ort::Error::from(e).into()))?;
    builder = builder
        .with_intra_threads(threads.max(1))
        .map_err(|e| fail(ort::Error::from(e).into()))?;
    builder = builder
        .with_inter_threads(1)
        .map_err(|e| fail(ort::Error::from(e).into()))?;
    if device == Device::Cpu && allocator == CpuAllocator::None {
        // ONNX Runtime's memory pattern plans one block per input shape from the first run:
        // every later window of MONAI's ResNet50 then needed about 15 % more than the first
        // (LIDC-IDRI-0001 at 512x512x96), which a one-window calibration run never sees.
        // Without it later windows need what the first did, within 2 %, at 0 to 11 % more
        // time (docs/memory-model.md).
        builder = builder
            .with_memory_pattern(false)
            .map_err(|e| fail(ort::Error::from(e).into()))?;
    }
    if device == Device::Cpu && allocator == CpuAllocator::TightArena {
        ensure_tight_arena(&runtime.environment).map_err(|e| fail(Cause::Found(e)))?;
        builder = builder
            .with_env_allocators()
            .map_err(|e| fail(ort::Error::from(e).into()))?;
    }
    let session = builder.commit_from_file(path).map_err(|e| fail(e.into()))?;
    Ok((session, runtime, execution_provider))
}

/// The model must have the output the card names: that output.
pub(crate) fn check_output<'s>(
    session: &'s Session,
    model: &str,
    wanted: &str,
) -> Result<&'s ort::value::Outlet, InferError> {
    if let Some(output) = session.outputs().iter().find(|o| o.name() == wanted) {
        return Ok(output);
    }
    let available: Vec<&str> = session.outputs().iter().map(|o| o.name()).collect();
    Err(InferError::MissingOutput {
        model: model.to_string(),
        name: wanted.to_string(),
        available: available.join(", "),
    })
}

/// A head the card names must be an output of rank 5 (`[n, channels, z, y, x]`) with the
/// head's channels, where the graph fixes them.
pub(crate) fn check_head(session: &Session, model: &str, head: Head<'_>) -> Result<(), InferError> {
    let output = check_output(session, model, head.name)?;
    let mismatch = |reason: String| InferError::OutputMismatch {
        model: model.to_string(),
        name: head.name.to_string(),
        reason,
    };
    let Some(shape) = output.dtype().tensor_shape().map(|s| s.to_vec()) else {
        return Err(mismatch("it is not a tensor".into()));
    };
    if shape.len() != 5 {
        return Err(mismatch(format!(
            "it has rank {}, the card's layout [n, channels, z, y, x] needs 5",
            shape.len()
        )));
    }
    // A negative dimension is dynamic: the graph does not fix it, the run checks the shape.
    match usize::try_from(shape[1]) {
        Ok(channels) if channels != head.channels => Err(mismatch(format!(
            "it has {channels} channels, the card's head needs {}",
            head.channels
        ))),
        _ => Ok(()),
    }
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
