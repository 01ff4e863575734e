//! How ONNX Runtime allocates host memory, and what its allocator says it holds.
//!
//! ONNX Runtime's default CPU arena grows in powers of two: measured here it doubled a window's
//! peak (1958 MiB against 950 MiB without an arena), while running without an arena was 20-40 %
//! slower. A shared arena that grows by exactly what is requested (`kSameAsRequested`) keeps the
//! peak nearer the true need at arena speed. `ort` does not expose that arena configuration, so
//! this module calls the C API directly, in one small unsafe block.
//!
//! The allocator statistics (`AllocatorGetStats`) were tried too: with ONNX Runtime 1.31 they
//! come back empty for this shared arena and for a session's allocator, so memory is measured
//! from the process instead (`memory`).

use std::ffi::{CStr, c_char};
use std::sync::OnceLock;

use ort::AsPointer as _;
use ort::environment::Environment;

static TIGHT_ARENA: OnceLock<Result<(), String>> = OnceLock::new();

/// Registers the process-wide tight CPU arena in `environment` (once); sessions opt in with
/// `with_env_allocators`.
pub fn ensure_tight_arena(environment: &Environment) -> Result<(), String> {
    TIGHT_ARENA
        .get_or_init(|| register_tight_arena(environment))
        .clone()
}

#[allow(unsafe_code)]
fn register_tight_arena(environment: &Environment) -> Result<(), String> {
    let api = ort::api();
    // 1 = kSameAsRequested. (Adding max_dead_bytes_per_chunk = 0 makes ONNX Runtime 1.31 abort
    // with "Could not find Region": seen from Rust and from its own Python API alike.)
    let keys: [&CStr; 1] = [c"arena_extend_strategy"];
    let values: [usize; 1] = [1];
    let key_ptrs: Vec<*const c_char> = keys.iter().map(|k| k.as_ptr()).collect();
    // SAFETY: every pointer passed is valid for the call (the key strings are static, the
    // arrays live until the end of this block); each object created is released exactly once,
    // after its last use; the environment pointer comes from a live `Environment`.
    unsafe {
        let mut memory_info = std::ptr::null_mut();
        check(
            api,
            (api.CreateCpuMemoryInfo)(
                ort::sys::OrtAllocatorType::OrtArenaAllocator,
                ort::sys::OrtMemType::OrtMemTypeDefault,
                &mut memory_info,
            ),
        )?;
        let mut arena = std::ptr::null_mut();
        let created = check(
            api,
            (api.CreateArenaCfgV2)(key_ptrs.as_ptr(), values.as_ptr(), keys.len(), &mut arena),
        );
        let registered = created.and_then(|()| {
            check(
                api,
                (api.CreateAndRegisterAllocator)(environment.ptr().cast_mut(), memory_info, arena),
            )
        });
        if !arena.is_null() {
            (api.ReleaseArenaCfg)(arena);
        }
        (api.ReleaseMemoryInfo)(memory_info);
        registered
    }
}

/// Turns an `OrtStatus` into a `Result`, releasing it.
#[allow(unsafe_code)]
unsafe fn check(api: &ort::sys::OrtApi, status: ort::sys::OrtStatusPtr) -> Result<(), String> {
    if status.0.is_null() {
        return Ok(());
    }
    // SAFETY: a non-null status is a live OrtStatus that we own and release once.
    unsafe {
        let message = CStr::from_ptr((api.GetErrorMessage)(status.0))
            .to_string_lossy()
            .into_owned();
        (api.ReleaseStatus)(status.0);
        Err(message)
    }
}
