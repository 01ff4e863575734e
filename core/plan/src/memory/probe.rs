//! Memory probes: one [`MemorySample`] type whatever the source.
//!
//! On CPU the process's resident set (VmRSS) and its high-water mark (VmHWM) from
//! `/proc/self/status`; the mark is reset before each window (`/proc/self/clear_refs`), so each
//! window reports its own peak. GPU probes (NVML) join here when a GPU path lands.
//!
//! The forecasts need the peak to follow what a run holds, so a process that runs the
//! pipeline calls [`pin_allocator`] first (the `tessera` binary does).

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

/// Large blocks (this size or more) come straight from the kernel and go back to it when freed.
pub const MMAP_THRESHOLD_BYTES: i32 = 128 << 10;

/// Fixes glibc's mmap threshold at [`MMAP_THRESHOLD_BYTES`]; returns whether it could.
///
/// By default glibc raises the threshold to the size of each mapped block freed (up to
/// 32 MiB), after which a window's tensors come from the heap and stay fragmented there: on
/// the demo study at 108x108x128, three runs of the same plan peaked 273, 301 and 320 MiB
/// above their baseline (the card's bound was then 284 MiB). With the threshold fixed they peak
/// 182.4 MiB every time, about 3 % slower; from 288x288x128 up nothing changes.
pub fn pin_allocator() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt only sets an allocator parameter; it takes no pointers.
        #[allow(unsafe_code)]
        let done = unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) };
        done == 1
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
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
    fn a_pinned_allocator_gives_freed_blocks_back() {
        if !cfg!(all(target_os = "linux", target_env = "gnu")) {
            return; // nothing to pin
        }
        assert!(pin_allocator());
        // Unpinned, freeing this raises the threshold above the 1 MiB blocks below.
        drop(std::hint::black_box(vec![1u8; 8 << 20]));
        // Each block is followed by a small one that stays: on the heap, their holes could
        // not be trimmed.
        let (mut blocks, mut kept) = (Vec::new(), Vec::new());
        for _ in 0..96 {
            blocks.push(std::hint::black_box(vec![1u8; 1 << 20]));
            kept.push(std::hint::black_box(vec![1u8; 64]));
        }
        let during = sample().current_bytes;
        drop(blocks);
        let after = sample().current_bytes;
        assert!(
            during.saturating_sub(after) >= 80 << 20,
            "{during} -> {after}"
        );
        drop(kept);
    }

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
