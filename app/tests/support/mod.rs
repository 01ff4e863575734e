//! What the viewer's kittest files share: a phantom study, a harness on it, stepping until the
//! workers report, and the test model's run.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use egui_kittest::Harness;
use egui_kittest::kittest::Queryable as _;
use tessera::gui::{Source, TesseraApp};
use tessera_core::phantom::{self, PhantomSpec};
use tessera_plan::model::shipped_models_dir;

pub fn phantom_study(dir: &Path, size: [usize; 3]) -> PathBuf {
    let spec = PhantomSpec {
        seed: 9,
        size,
        spacing_mm: [2.5, 2.5, 5.0],
        nodules: 3,
        noise_hu: 18.0,
        masses: 0,
    };
    let out = dir.join("study");
    let p = phantom::generate(&spec).unwrap();
    phantom::write_series(&p, &out).unwrap();
    out
}

pub fn harness(source: Source) -> Harness<'static, TesseraApp> {
    harness_with(source, false)
}

/// With `allow_gaps`: as if `--allow-gaps` (File > Allow gaps) was given.
pub fn harness_with(source: Source, allow_gaps: bool) -> Harness<'static, TesseraApp> {
    let app = TesseraApp::new(&egui::Context::default(), source, None, allow_gaps);
    Harness::builder()
        .with_size([1400.0, 900.0])
        .build_ui_state(|ui, app: &mut TesseraApp| app.ui(ui), app)
}

/// Steps frames until `done` holds (workers report between frames), or fails after 120 s.
pub fn step_until(h: &mut Harness<'_, TesseraApp>, what: &str, done: impl Fn(&TesseraApp) -> bool) {
    let started = Instant::now();
    while !done(h.state()) {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "timed out waiting for {what}; messages: {:?}",
            h.state().messages
        );
        h.step();
        std::thread::sleep(Duration::from_millis(10));
    }
    h.step();
}

pub fn use_model(h: &mut Harness<'_, TesseraApp>, name: &str) {
    let panel = &mut h.state_mut().run_panel;
    let dir = shipped_models_dir().join(name);
    let index = panel
        .models
        .iter()
        .position(|m| m.canonicalize().unwrap() == dir.canonicalize().unwrap())
        .unwrap();
    panel.select_model(index);
}

/// Opens a phantom of `size` with the test model selected and `patch` set, clicks Run and
/// waits for the run to end. The temporary folder must outlive the harness.
pub fn run_on_phantom(h: &mut Harness<'_, TesseraApp>, patch: Option<[usize; 3]>) {
    step_until(h, "the phantom", |app| app.study.is_some());
    use_model(h, "tessera-test-tiny");
    if let Some(patch) = patch {
        h.state_mut().run_panel.patch = patch;
    }
    h.step();
    h.get_by_label("Run").click();
    step_until(h, "the run", |app| {
        !app.run_panel.is_running() && !app.run_panel.runs.is_empty()
    });
}

/// The 128x128x48 phantom run with the test model, settings and reviews kept under
/// `dir/user` (never the user's own folders).
pub fn reading_harness(dir: &Path) -> Harness<'static, TesseraApp> {
    let mut h = harness(Source::Path(phantom_study(dir, [128, 128, 48])));
    h.state_mut()
        .use_places(tessera::common::settings::Places::under(&dir.join("user")));
    run_on_phantom(&mut h, None);
    h
}

/// Drags with the primary button from `from` to `to` across a few frames.
pub fn drag(h: &mut Harness<'_, TesseraApp>, from: egui::Pos2, to: egui::Pos2) {
    h.hover_at(from);
    h.step();
    h.drag_at(from);
    h.step();
    for t in [0.3, 0.7, 1.0] {
        h.hover_at(from + (to - from) * t);
        h.step();
    }
    h.drop_at(to);
    h.step();
    h.step();
}

/// A harness that renders (wgpu on a CPU adapter) on the 128x128x48 phantom, run with the test
/// model at 64x64x32: what the snapshot tests start from. The temporary folder must outlive
/// the harness.
pub fn snapshot_harness(dir: &Path) -> Harness<'static, TesseraApp> {
    let app = TesseraApp::new(
        &egui::Context::default(),
        Source::Path(phantom_study(dir, [128, 128, 48])),
        None,
        false,
    );
    let mut h = Harness::builder()
        .with_size([1400.0, 900.0])
        .wgpu()
        .build_ui_state(|ui, app: &mut TesseraApp| app.ui(ui), app);
    run_on_phantom(&mut h, Some([64, 64, 32]));
    h
}

/// Saves the snapshot `name`, with the run's timing and memory (which vary from run to run)
/// hidden.
pub fn snapshot_without_timings(h: &mut Harness<'_, TesseraApp>, name: &str) {
    h.state_mut().messages.clear();
    let stats = &mut h.state_mut().run_panel.runs[0].report.stats;
    stats.elapsed_s = 0.0;
    stats.memory.peak_memory_bytes = 0;
    h.step();
    h.snapshot(name);
}

/// Presses and releases `key` with `modifiers` (events for the next frame).
pub fn key(h: &Harness<'_, TesseraApp>, key: egui::Key, modifiers: egui::Modifiers) {
    for pressed in [true, false] {
        h.event(egui::Event::Key {
            key,
            physical_key: None,
            pressed,
            repeat: false,
            modifiers,
        });
    }
}
