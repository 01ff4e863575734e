//! Memory probes: one [`MemorySample`] type whatever the source.
//!
//! On CPU the process's resident set (VmRSS) and its high-water mark (VmHWM) from
//! `/proc/self/status`; the mark is reset before each window (`/proc/self/clear_refs`), so each
//! window reports its own peak. GPU probes (NVML) join here when a GPU path lands.

use serde::{Deserialize, Serialize};

/// Where a memory figure comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemorySource {
    /// Process resident set (host memory), Linux `/proc`.
    ProcessRss,
    /// This process's GPU memory, NVML (NVIDIA).
    GpuNvml,
    /// Nothing could be measured on this platform.
    Unavailable,
}

/// Memory at one moment, and the peak since the last reset.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MemorySample {
    pub source: MemorySource,
    pub current_bytes: u64,
    pub peak_bytes: u64,
}

/// Resets the peak so that the next sample's `peak_bytes` covers only what follows.
/// Returns whether the platform allowed it.
pub fn reset_peak() -> bool {
    // "5" resets the peak RSS of the process (Linux 4.0+).
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// The process's memory now.
pub fn sample() -> MemorySample {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return MemorySample {
            source: MemorySource::Unavailable,
            current_bytes: 0,
            peak_bytes: 0,
        };
    };
    let field = |name: &str| -> u64 {
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| {
                rest.trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .ok()
            })
            .map_or(0, |kib| kib * 1024)
    };
    MemorySample {
        source: MemorySource::ProcessRss,
        current_bytes: field("VmRSS:"),
        peak_bytes: field("VmHWM:"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peak_follows_a_large_allocation_and_resets() {
        if sample().source == MemorySource::Unavailable {
            return; // not Linux: nothing to check
        }
        assert!(reset_peak());
        let before = sample();
        let block = vec![1u8; 64 << 20];
        let during = sample();
        assert!(
            during.peak_bytes >= before.current_bytes + (60 << 20),
            "{before:?} {during:?}"
        );
        drop(block);
        assert!(reset_peak());
        let after = sample();
        assert!(after.peak_bytes < during.peak_bytes, "{during:?} {after:?}");
    }
}
