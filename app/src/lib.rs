//! The `tessera` application: headless subcommands ([`cmd`]) and the desktop viewer ([`gui`]).
//! Both drive `tessera_core::pipeline`; neither adds detection logic of its own.

pub mod cmd;
pub mod common;
pub mod gui;

static STARTED: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();

/// Marks the process's start; `main` calls it first.
pub fn mark_process_start() {
    STARTED.get_or_init(std::time::Instant::now);
}

/// Time since [`mark_process_start`] (zero when it was never called).
pub fn process_age() -> std::time::Duration {
    STARTED
        .get()
        .map_or(std::time::Duration::ZERO, |t| t.elapsed())
}
