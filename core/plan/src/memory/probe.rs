//! Memory probes: one [`MemorySample`] type whatever the source.
//!
//! On CPU the process's resident set (VmRSS) from `/proc/self`, and peaks per phase of a run
//! (a window, the steps after the passes) without touching the kernel's own high-water mark
//! (VmHWM): resetting it (`clear_refs`) would make every outside tool (`time`, a scheduler's
//! accounting at exit) report the last phase's peak instead of the process's. A phase's peak
//! is VmHWM itself when the phase raised it (exact), else the highest resident set a sampling
//! thread saw during the phase (every [`SAMPLE_INTERVAL`], only while a [`Sampling`] guard
//! lives: a run holds one, an idle viewer samples nothing). GPU probes (NVML) join here.
//!
//! The forecasts need the peak to follow what a run holds, so a process that runs the
//! pipeline calls [`pin_allocator`] first (the `tessera` binary does).

use std::sync::Once;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

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

impl std::fmt::Display for MemorySource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::ProcessRss => "the process's resident memory",
            Self::GpuNvml => "the process's GPU memory",
            Self::Unavailable => "no memory measure on this platform",
        })
    }
}

/// Memory at one moment, and the peak since the last reset.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MemorySample {
    pub source: MemorySource,
    pub current_bytes: u64,
    pub peak_bytes: u64,
}

/// How often the sampling thread reads the resident set: a phase that stays under the
/// process's high-water mark can hide a peak shorter than this (touching memory runs at a few
/// GB/s, so a few megabytes at most).
pub const SAMPLE_INTERVAL: Duration = Duration::from_millis(1);

/// The highest resident set seen since the last [`reset_peak`].
static PHASE_PEAK_BYTES: AtomicU64 = AtomicU64::new(0);
/// VmHWM at the last [`reset_peak`]: a phase that raises it peaked at the new value.
static HWM_AT_RESET_BYTES: AtomicU64 = AtomicU64::new(0);
static SAMPLER: Once = Once::new();
/// How many [`Sampling`] guards live; the sampler sleeps while there are none.
static SAMPLING: AtomicUsize = AtomicUsize::new(0);
/// The sampler thread, once started (to wake it).
static SAMPLER_THREAD: std::sync::OnceLock<std::thread::Thread> = std::sync::OnceLock::new();

/// While it lives, the sampling thread reads the resident set every [`SAMPLE_INTERVAL`] (a run
/// holds one from its start to its end). Without one, a phase still gets VmHWM when it raises
/// it, and the resident set at each sample.
#[derive(Debug)]
pub struct Sampling(());

impl Sampling {
    pub fn start() -> Self {
        SAMPLER.call_once(|| {
            let spawned = std::thread::Builder::new()
                .name("tessera-memory-sampler".into())
                .spawn(|| {
                    loop {
                        if SAMPLING.load(Ordering::Acquire) == 0 {
                            std::thread::park();
                            continue;
                        }
                        std::thread::sleep(SAMPLE_INTERVAL);
                        if let Some(bytes) = resident_bytes() {
                            PHASE_PEAK_BYTES.fetch_max(bytes, Ordering::Relaxed);
                        }
                    }
                });
            if let Ok(handle) = spawned {
                let _ = SAMPLER_THREAD.set(handle.thread().clone());
            }
        });
        SAMPLING.fetch_add(1, Ordering::AcqRel);
        if let Some(thread) = SAMPLER_THREAD.get() {
            thread.unpark();
        }
        Self(())
    }
}

impl Drop for Sampling {
    fn drop(&mut self) {
        SAMPLING.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Starts the next phase: the next sample's `peak_bytes` covers only what follows. The
/// process's own high-water mark is left as it is. Returns whether memory can be measured.
pub fn reset_peak() -> bool {
    let Some((current, hwm)) = status() else {
        return false;
    };
    PHASE_PEAK_BYTES.store(current, Ordering::Relaxed);
    HWM_AT_RESET_BYTES.store(hwm, Ordering::Relaxed);
    true
}

/// The resident set from `/proc/self/statm` (cheaper than `status`, for the sampler).
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * page_bytes())
}

fn page_bytes() -> u64 {
    #[cfg(unix)]
    {
        // SAFETY: sysconf reads a constant of the system; it takes no pointers.
        #[allow(unsafe_code)]
        let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        u64::try_from(size).unwrap_or(4096)
    }
    #[cfg(not(unix))]
    {
        4096
    }
}

/// `(VmRSS, VmHWM)` in bytes, from `/proc/self/status`.
fn status() -> Option<(u64, u64)> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let field = |name: &str| -> Option<u64> {
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
            .map(|kib| kib * 1024)
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
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

/// The process's memory now, and the peak of the phase since the last [`reset_peak`] (the
/// process's whole peak when none was).
pub fn sample() -> MemorySample {
    let Some((current, hwm)) = status() else {
        return MemorySample {
            source: MemorySource::Unavailable,
            current_bytes: 0,
            peak_bytes: 0,
        };
    };
    let sampled = PHASE_PEAK_BYTES
        .fetch_max(current, Ordering::Relaxed)
        .max(current);
    let peak_bytes = if hwm > HWM_AT_RESET_BYTES.load(Ordering::Relaxed) {
        hwm
    } else {
        sampled
    };
    MemorySample {
        source: MemorySource::ProcessRss,
        current_bytes: current,
        peak_bytes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The process's memory is one for all tests: they take turns.
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

    /// The process's own high-water mark (VmHWM), which [`reset_peak`] never lowers.
    fn process_peak_bytes() -> Option<u64> {
        status().map(|(_, hwm)| hwm)
    }

    /// Touches every page of a block of `bytes`, so that it is resident.
    fn resident_block(bytes: usize) -> Vec<u8> {
        let mut block = vec![0u8; bytes];
        for page in block.chunks_mut(4096) {
            page[0] = 1;
        }
        std::hint::black_box(block)
    }

    #[test]
    fn phases_have_their_own_peaks_and_the_process_keeps_its_own() {
        let _turn = SERIAL
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if status().is_none() {
            return; // no /proc here
        }
        assert!(reset_peak());
        let block = resident_block(256 << 20);
        let first = sample();
        drop(block);
        let process = process_peak_bytes().unwrap();
        assert!(first.peak_bytes >= 256 << 20, "{first:?}");
        assert!(reset_peak());
        // The kernel's mark is untouched by the reset: outside tools see the whole peak.
        assert!(process_peak_bytes().unwrap() >= process);
        let second = sample();
        assert!(
            second.peak_bytes < first.peak_bytes,
            "a new phase starts from what is held now: {second:?} after {first:?}"
        );
        // A phase that raises the process's mark peaks at it exactly.
        let bigger = resident_block(384 << 20);
        let raised = sample();
        assert!(raised.peak_bytes > process, "{raised:?} after {process}");
        assert!(
            raised.peak_bytes <= process_peak_bytes().unwrap(),
            "{raised:?}"
        );
        drop(bigger);
    }

    #[test]
    fn a_pinned_allocator_gives_freed_blocks_back() {
        let _turn = SERIAL
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
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
}
