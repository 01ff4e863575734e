//! What a run runs on and how it is stopped: shared by the engine and the GUI, with no
//! runtime behind it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

/// Where inference runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Device {
    Cpu,
    Cuda(i32),
    TensorRt(i32),
}

impl std::str::FromStr for Device {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let index = |rest: &str| -> Result<i32, String> {
            rest.parse()
                .map_err(|_| format!("device '{s}': expected cpu, cuda:N or tensorrt:N"))
        };
        match s.split_once(':') {
            None if s == "cpu" => Ok(Self::Cpu),
            None if s == "cuda" => Ok(Self::Cuda(0)),
            None if s == "tensorrt" => Ok(Self::TensorRt(0)),
            Some(("cuda", n)) => Ok(Self::Cuda(index(n)?)),
            Some(("tensorrt", n)) => Ok(Self::TensorRt(index(n)?)),
            _ => Err(format!("device '{s}': expected cpu, cuda:N or tensorrt:N")),
        }
    }
}

impl std::fmt::Display for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Cpu => f.write_str("cpu"),
            Self::Cuda(n) => write!(f, "cuda:{n}"),
            Self::TensorRt(n) => write!(f, "tensorrt:{n}"),
        }
    }
}

/// Stops a run from another thread: between windows, and inside the current one (the
/// runtime attaches a hook that stops the inference in flight).
#[derive(Clone, Default)]
pub struct CancelToken {
    flag: Arc<AtomicBool>,
    in_flight: Arc<Mutex<Option<CancelHook>>>,
}

/// What stops the work in flight, e.g. ONNX Runtime's `RunOptions::terminate`.
type CancelHook = Box<dyn Fn() + Send + Sync>;

impl std::fmt::Debug for CancelToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CancelToken")
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

impl CancelToken {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn cancel(&self) {
        self.flag.store(true, Ordering::SeqCst);
        if let Ok(in_flight) = self.in_flight.lock()
            && let Some(stop) = in_flight.as_ref()
        {
            stop();
        }
    }

    pub fn is_cancelled(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }

    /// `stop` is called if the token is cancelled before [`Self::detach`].
    pub fn attach(&self, stop: CancelHook) {
        if let Ok(mut in_flight) = self.in_flight.lock() {
            *in_flight = Some(stop);
        }
    }

    pub fn detach(&self) {
        if let Ok(mut in_flight) = self.in_flight.lock() {
            *in_flight = None;
        }
    }
}

/// The CPU allocation strategy of a session.
///
/// Measured with `tessera sweep` on the demo study (see the issue notes): without an arena the
/// peak is the lowest and linear in the window size (the memory model predicts it within 7 %),
/// at about the same speed for this project's models; the arenas hold more and grow in steps
/// that a linear model cannot follow (errors up to 36 %). So no arena is the default: a budget
/// is only worth something if the prediction behind it holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CpuAllocator {
    /// A process-wide arena that grows by what is requested.
    TightArena,
    /// ONNX Runtime's own per-session arena (power-of-two growth).
    Arena,
    /// No arena and no memory pattern: every tensor from the system allocator, so later
    /// windows of a size need about what the first did (the default).
    #[default]
    None,
}

impl std::str::FromStr for CpuAllocator {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "tight-arena" => Ok(Self::TightArena),
            "arena" => Ok(Self::Arena),
            "none" => Ok(Self::None),
            other => Err(format!(
                "allocator '{other}' is not one of tight-arena, arena, none"
            )),
        }
    }
}

impl std::fmt::Display for CpuAllocator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::TightArena => "tight-arena",
            Self::Arena => "arena",
            Self::None => "none",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::Device;

    #[test]
    fn devices_parse_and_print() {
        assert_eq!("cpu".parse(), Ok(Device::Cpu));
        assert_eq!("cuda:1".parse(), Ok(Device::Cuda(1)));
        assert_eq!(
            "tensorrt:0".parse::<Device>().map(|d| d.to_string()),
            Ok("tensorrt:0".into())
        );
        assert!(
            "gpu"
                .parse::<Device>()
                .unwrap_err()
                .contains("expected cpu, cuda:N or tensorrt:N")
        );
    }
}
