//! The GPU memory gauge on NVIDIA: this process's GPU memory, read through NVML.
//!
//! NVML is loaded at run time (`libnvidia-ml.so.1`, from the driver); on a machine without it
//! the probe cannot open and the gauge says why, instead of showing zero. ONNX Runtime's CUDA
//! arena keeps what it allocated, so the memory seen after a window is that window's high-water
//! mark, and the running maximum is the run's peak.

use nvml_wrapper::Nvml;
use nvml_wrapper::enums::device::UsedGpuMemory;

use tessera_plan::memory::probe::{MemorySample, MemorySource};

/// An open NVML handle for one GPU.
pub struct GpuProbe {
    nvml: Nvml,
    index: u32,
    /// The GPU's name, e.g. `NVIDIA H200`.
    pub name: String,
    peak_bytes: u64,
}

impl std::fmt::Debug for GpuProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuProbe")
            .field("index", &self.index)
            .field("name", &self.name)
            .finish()
    }
}

impl GpuProbe {
    /// Opens NVML for GPU `index`; the error says why there is no gauge.
    pub fn open(index: u32) -> Result<Self, String> {
        let nvml =
            Nvml::init().map_err(|e| format!("NVML unavailable ({e}): no GPU memory gauge"))?;
        let name = nvml
            .device_by_index(index)
            .and_then(|d| d.name())
            .map_err(|e| format!("GPU {index} not found through NVML: {e}"))?;
        Ok(Self {
            nvml,
            index,
            name,
            peak_bytes: 0,
        })
    }

    /// This process's GPU memory now, and the largest value sampled so far.
    pub fn sample(&mut self) -> MemorySample {
        let pid = std::process::id();
        let used = self
            .nvml
            .device_by_index(self.index)
            .and_then(|d| d.running_compute_processes())
            .ok()
            .and_then(|processes| processes.into_iter().find(|p| p.pid == pid))
            .and_then(|p| match p.used_gpu_memory {
                UsedGpuMemory::Used(bytes) => Some(bytes),
                UsedGpuMemory::Unavailable => None,
            });
        match used {
            Some(bytes) => {
                self.peak_bytes = self.peak_bytes.max(bytes);
                MemorySample {
                    source: MemorySource::GpuNvml,
                    current_bytes: bytes,
                    peak_bytes: self.peak_bytes,
                }
            }
            None => MemorySample {
                source: MemorySource::Unavailable,
                current_bytes: 0,
                peak_bytes: self.peak_bytes,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::GpuProbe;

    #[test]
    fn without_a_driver_the_probe_says_why() {
        match GpuProbe::open(0) {
            Ok(probe) => eprintln!("GPU present: {}", probe.name),
            Err(reason) => assert!(
                reason.contains("NVML") || reason.contains("GPU 0"),
                "{reason}"
            ),
        }
    }
}
