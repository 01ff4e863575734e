//! The run panel: settings, the plan before running (or the core's refusal), the pipeline on a
//! `tessera-detect` thread with live progress, a memory gauge and cancel; finished runs.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, TryRecvError, channel};
use std::time::Instant;

use egui::Ui;
use tessera_core::pipeline::{self, Event, PipelineError};
use tessera_core::report::DetectionReport;
use tessera_dicom::volume::format_size;
use tessera_dicom::{Geometry, Volume};
use tessera_maps::lung::LungField;
use tessera_plan::blend::BlendMode;
use tessera_plan::bytes::format_bytes;
use tessera_plan::device::{CancelToken, Device};
use tessera_plan::grid_map::GridMap;
use tessera_plan::memory::forecast::baseline_estimate_bytes;
use tessera_plan::memory::probe::MemorySample;
use tessera_plan::model::{Model, default_detector, shipped_model_dirs};
use tessera_plan::plan::{PlanError, TilePlan, TileSpec, Window};
use tessera_plan::request::{DetectConfig, PatchChoice};

use super::{Message, ReviewPanel, Study};

/// How long the viewer waits after a run's event before drawing it, so that events that come
/// together share one frame.
const EVENT_FRAME_DELAY: std::time::Duration = std::time::Duration::from_millis(250);

/// A finished run, kept for review and comparison.
#[derive(Debug, Clone)]
pub struct RunRecord {
    /// e.g. "#2 320x320x128 halo".
    pub label: String,
    pub report: DetectionReport,
    pub plan: TilePlan,
    /// Grid the model ran on (after resampling), to map windows back onto the study.
    pub model_geometry: Geometry,
    /// The lung field on that grid, when the model has one.
    pub lung_field: Option<Arc<LungField>>,
}

/// What a finished job ended with.
#[derive(Debug)]
pub enum Outcome {
    Finished(Box<RunRecord>),
    Cancelled,
    Failed(String),
}

/// What the `tessera-detect` worker sends the panel: the pipeline's events, then the outcome.
enum WorkerUpdate {
    Event(Box<Event>),
    Done(Outcome),
}

/// Live state of a run in flight.
#[derive(Debug)]
pub struct RunJob {
    rx: Receiver<WorkerUpdate>,
    cancel: CancelToken,
    started: Instant,
    pub plan: Option<TilePlan>,
    pub model_geometry: Option<Geometry>,
    pub current: Option<Window>,
    pub finished: Vec<Window>,
    pub window_seconds: Vec<f64>,
    pub memory: Option<MemorySample>,
    pub peak_bytes: u64,
    /// The work after the windows (the coarse pass, the rescoring stage), as the progress
    /// bar says it.
    pub stage: Option<String>,
    pub cancel_requested: bool,
}

impl std::fmt::Debug for WorkerUpdate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WorkerUpdate")
    }
}

/// The settings a user edits, and the runs so far.
#[derive(Debug)]
pub struct RunPanel {
    pub models: Vec<PathBuf>,
    /// The user's models folder, whose models the picker marks.
    own_models: Option<PathBuf>,
    pub model_index: usize,
    model: Option<Result<Arc<Model>, String>>,
    pub patch: [usize; 3],
    pub overlap: f64,
    pub blend: BlendMode,
    pub device: Device,
    pub threads: usize,
    pub budget_gib: Option<f64>,
    /// Why "Choose patch" found none (nothing fits, no calibration), until it finds one.
    pub budget_refusal: Option<String>,
    /// What limited the budget's patch besides the budget (the calibrated windows), if anything.
    pub budget_note: Option<String>,
    pub allow_single_pass: bool,
    /// Run the model's rescoring stage, when it has one.
    pub rescore: bool,
    /// Run the model's coarse pass for large lesions, when it has one.
    pub coarse_pass: bool,
    ort_lib: Option<PathBuf>,
    pub job: Option<RunJob>,
    pub runs: Vec<RunRecord>,
    /// The study on the model's grid (after resampling): the plan preview and the live
    /// windows use it.
    model_grid: Option<Geometry>,
    volume: Option<Arc<Volume>>,
    /// The last plan preview and what it was made from: planning reads the process's memory
    /// and runs every frame otherwise, also during a run (when the baseline includes the run).
    preview: Option<(PreviewKey, Option<Result<TilePlan, PlanError>>)>,
}

/// Everything a plan preview depends on.
type PreviewKey = (TileSpec, Device, usize, Option<[usize; 3]>);

impl RunPanel {
    pub fn new(ort_lib: Option<PathBuf>) -> Self {
        let models = shipped_model_dirs().unwrap_or_default();
        // The shipped detector, as `tessera detect` picks it.
        let model_index = default_detector()
            .ok()
            .and_then(|dir| models.iter().position(|m| *m == dir))
            .unwrap_or(0);
        let defaults = DetectConfig::new([64, 64, 32]);
        let mut panel = Self {
            models,
            own_models: None,
            model_index,
            model: None,
            patch: defaults.tile.patch,
            overlap: defaults.tile.overlap,
            blend: defaults.tile.blend,
            device: defaults.device,
            threads: defaults.threads,
            budget_gib: None,
            budget_refusal: None,
            budget_note: None,
            allow_single_pass: defaults.tile.allow_single_pass,
            rescore: defaults.rescore,
            coarse_pass: defaults.coarse_pass,
            ort_lib,
            job: None,
            runs: Vec::new(),
            model_grid: None,
            volume: None,
            preview: None,
        };
        panel.select_model(model_index);
        panel
    }

    /// Lists `models` (the shipped ones and those in `own_folder`), keeping the chosen one
    /// when it is still there.
    pub fn set_models(&mut self, models: Vec<PathBuf>, own_folder: Option<PathBuf>) {
        let chosen = self.models.get(self.model_index).cloned();
        self.models = models;
        self.own_models = own_folder;
        let index = chosen
            .and_then(|c| self.models.iter().position(|m| *m == c))
            .unwrap_or(0);
        self.select_model(index);
    }

    /// Chooses the model in folder `dir`, listing it first when it is not listed yet.
    pub fn choose_model(&mut self, dir: &std::path::Path) {
        let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
        let index = match self.models.iter().position(|m| *m == dir) {
            Some(i) => i,
            None => {
                self.models.push(dir);
                self.models.len() - 1
            }
        };
        self.select_model(index);
    }

    /// The picker's name for model folder `dir`: its folder's name, marked when it is one of
    /// the user's.
    fn model_label(&self, dir: &std::path::Path) -> String {
        let name = dir
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        match &self.own_models {
            Some(own) if dir.parent() == Some(own.as_path()) => format!("{name} (your models)"),
            _ => name,
        }
    }

    /// The display window the chosen model's card reads findings in, if it names one.
    pub fn reading_window(&self) -> Option<tessera_dicom::view::WindowLevel> {
        let Some(Ok(model)) = &self.model else {
            return None;
        };
        let w = model.card.display_window.as_ref()?;
        Some(tessera_dicom::view::WindowLevel {
            center_hu: w.center_hu,
            width_hu: w.width_hu,
        })
    }

    pub fn is_running(&self) -> bool {
        self.job.is_some()
    }

    /// Loads the model at `index` (its card and hash checked) and takes its recommended patch.
    pub fn select_model(&mut self, index: usize) {
        self.model_index = index;
        self.model = self
            .models
            .get(index)
            // The whole chain: an I/O error's reason is its source.
            .map(|dir| {
                Model::load(dir)
                    .map(Arc::new)
                    .map_err(|e| format!("{:#}", anyhow::Error::from(e)))
            });
        if let Some(Ok(model)) = &self.model {
            let defaults = DetectConfig::defaults_for(model).tile;
            self.patch = defaults.patch;
            // A card's own tiling (a MONAI bundle's sliding window) comes with it.
            if model.card.tiling.is_some() {
                self.blend = defaults.blend;
                self.overlap = defaults.overlap;
            }
        }
        self.update_model_grid();
    }

    pub fn study_changed(&mut self, study: &Study) {
        self.volume = Some(study.volume.clone());
        self.update_model_grid();
    }

    fn update_model_grid(&mut self) {
        self.preview = None;
        self.model_grid = match (&self.model, &self.volume) {
            (Some(Ok(model)), Some(volume)) => Some(tessera_plan::request::model_geometry(
                &volume.geometry,
                model,
            )),
            _ => None,
        };
    }

    /// The memory budget in bytes, when one is set.
    fn budget_bytes(&self) -> Option<u64> {
        self.budget_gib.map(|g| (g * (1u64 << 30) as f64) as u64)
    }

    /// The run these settings ask for: the core's defaults, changed by the widgets.
    pub fn config(&self) -> DetectConfig {
        let mut config = DetectConfig::new(self.patch);
        config.tile.overlap = self.overlap;
        config.tile.blend = self.blend;
        config.tile.allow_single_pass = self.allow_single_pass;
        config.tile.memory_budget_bytes = self.budget_bytes();
        config.device = self.device;
        config.threads = self.threads;
        config.rescore = self.rescore;
        config.coarse_pass = self.coarse_pass;
        config.ort_lib = self.ort_lib.clone();
        config
    }

    /// The plan the core would run, or its refusal; `None` without a study or model.
    pub fn plan(&self) -> Option<Result<TilePlan, PlanError>> {
        let Some(Ok(model)) = &self.model else {
            return None;
        };
        let size = self.model_grid.as_ref()?.size;
        let volume = self.volume.as_ref()?;
        let baseline = baseline_estimate_bytes(&volume.geometry, model, self.device);
        Some(tessera_plan::request::plan_for(
            size,
            model,
            &self.config(),
            baseline,
        ))
    }

    /// [`Self::plan`], made again only when a setting, the model or the study changed.
    fn preview(&mut self) -> Option<Result<TilePlan, PlanError>> {
        let key = (
            self.config().tile,
            self.device,
            self.model_index,
            self.model_grid.as_ref().map(|g| g.size),
        );
        if self.preview.as_ref().is_none_or(|(k, _)| *k != key) {
            self.preview = Some((key, self.plan()));
        }
        self.preview.as_ref().and_then(|(_, plan)| plan.clone())
    }

    /// Starts the pipeline on the `tessera-detect` thread. Refused plans never start.
    pub fn start(&mut self, ctx: &egui::Context) -> Result<(), String> {
        if self.job.is_some() {
            return Err("a run is already in progress".into());
        }
        let model = match &self.model {
            Some(Ok(m)) => m.clone(),
            Some(Err(e)) => return Err(e.clone()),
            None => return Err("no model selected".into()),
        };
        let volume = self.volume.clone().ok_or("no study is open")?;
        if let Some(Err(e)) = self.plan() {
            return Err(format!("plan refused: {e}"));
        }
        let config = self.config();
        let label = format!(
            "#{} {} {} {}",
            self.runs.len() + 1,
            model.card.name,
            format_size(self.patch),
            self.blend
        );
        let cancel = CancelToken::new();
        let worker_cancel = cancel.clone();
        let (tx, rx) = channel();
        let ctx = ctx.clone();
        std::thread::Builder::new()
            .name("tessera-detect".into())
            .spawn(move || {
                let events = tx.clone();
                let result = pipeline::detect(&volume, &model, &config, &worker_cancel, &mut |e| {
                    // The window may have closed: nobody to tell.
                    let _ = events.send(WorkerUpdate::Event(Box::new(e.clone())));
                    // One frame for events that come together (a window finished, the next
                    // started): on a software renderer each frame costs inference time.
                    ctx.request_repaint_after(EVENT_FRAME_DELAY);
                });
                let done = match result {
                    Ok(r) => Outcome::Finished(Box::new(RunRecord {
                        label,
                        report: DetectionReport::from_result(&r),
                        plan: r.plan.clone(),
                        model_geometry: r.model_geometry.clone(),
                        lung_field: r.lung_field.map(Arc::new),
                    })),
                    Err(PipelineError::Cancelled) => Outcome::Cancelled,
                    // The whole chain: a runtime error's reason is its source.
                    Err(e) => Outcome::Failed(format!("run failed: {:#}", anyhow::Error::from(e))),
                };
                let _ = tx.send(WorkerUpdate::Done(done));
                ctx.request_repaint();
            })
            .map_err(|e| format!("cannot start the detection thread: {e}"))?;
        self.job = Some(RunJob {
            rx,
            cancel,
            started: Instant::now(),
            plan: None,
            model_geometry: None,
            current: None,
            finished: Vec::new(),
            window_seconds: Vec::new(),
            memory: None,
            peak_bytes: 0,
            stage: None,
            cancel_requested: false,
        });
        Ok(())
    }

    pub fn cancel(&mut self) {
        if let Some(job) = &mut self.job {
            job.cancel.cancel();
            job.cancel_requested = true;
        }
    }

    /// Applies the worker's events; returns the outcome once the run has ended.
    pub fn poll(&mut self) -> Option<Outcome> {
        let job = self.job.as_mut()?;
        loop {
            match job.rx.try_recv() {
                Ok(WorkerUpdate::Event(e)) => match *e {
                    Event::PlanReady(plan) => {
                        job.plan = Some(plan);
                        job.model_geometry.clone_from(&self.model_grid);
                    }
                    Event::WindowStarted { window, .. } => {
                        job.stage = None;
                        job.current = Some(window);
                    }
                    Event::WindowFinished {
                        window,
                        elapsed_s,
                        memory,
                        ..
                    } => {
                        job.finished.push(window);
                        job.window_seconds.push(elapsed_s);
                        job.peak_bytes = job.peak_bytes.max(memory.peak_bytes);
                        job.memory = Some(memory);
                        job.current = None;
                    }
                    Event::CoarseStarted { windows, .. } => {
                        job.stage = Some(format!("coarse pass, {windows} window(s)"));
                    }
                    Event::RescoreStarted { candidates } => {
                        job.stage = Some(format!("rescoring {candidates} candidates"));
                    }
                    Event::CoarseFinished { memory, .. }
                    | Event::RescoreFinished { memory, .. } => {
                        job.peak_bytes = job.peak_bytes.max(memory.peak_bytes);
                        job.memory = Some(memory);
                    }
                    Event::Finished { .. } | Event::Cancelled | Event::Failed(_) => {}
                },
                Ok(WorkerUpdate::Done(outcome)) => {
                    self.job = None;
                    if let Outcome::Finished(record) = &outcome {
                        self.runs.push((**record).clone());
                    }
                    return Some(outcome);
                }
                Err(TryRecvError::Empty) => return None,
                Err(TryRecvError::Disconnected) => {
                    self.job = None;
                    return Some(Outcome::Failed(
                        "the detection thread stopped unexpectedly".into(),
                    ));
                }
            }
        }
    }

    /// The panel; returns messages for the user.
    pub fn ui(&mut self, ui: &mut Ui, study: Option<&Study>) -> Vec<Message> {
        let mut messages = Vec::new();
        ui.heading("Detector");
        let running = self.job.is_some();
        ui.add_enabled_ui(!running, |ui| self.settings_ui(ui));
        let plan = self.preview();
        match &plan {
            Some(Ok(p)) => {
                ui.label(format!(
                    "Plan: {} window(s) ({}), recompute ×{:.2}, {}",
                    p.windows.len(),
                    p.windows_per_axis.map(|n| n.to_string()).join("×"),
                    p.recompute_factor(),
                    p.predicted_peak_text()
                        .unwrap_or_else(|| "predicted peak unknown (no memory model)".into())
                ));
            }
            Some(Err(e)) => {
                ui.colored_label(ui.visuals().error_fg_color, format!("Plan refused: {e}"));
            }
            None => {
                if let Some(Err(e)) = &self.model {
                    ui.colored_label(ui.visuals().error_fg_color, e);
                } else {
                    ui.weak("Open a study to see the plan.");
                }
            }
        }
        ui.horizontal(|ui| {
            let can_run = !running && study.is_some() && matches!(plan, Some(Ok(_)));
            if ui.add_enabled(can_run, egui::Button::new("Run")).clicked()
                && let Err(e) = self.start(ui.ctx())
            {
                messages.push(Message {
                    error: true,
                    text: e,
                });
            }
            if ui
                .add_enabled(running, egui::Button::new("Cancel"))
                .clicked()
            {
                self.cancel();
            }
        });
        if let Some(job) = &self.job {
            progress_ui(ui, job, self.budget_bytes(), &self.device);
        }
        messages
    }

    fn settings_ui(&mut self, ui: &mut Ui) {
        let names: Vec<String> = self.models.iter().map(|p| self.model_label(p)).collect();
        let mut index = self.model_index;
        egui::ComboBox::from_label("model")
            .selected_text(names.get(index).cloned().unwrap_or_default())
            .show_ui(ui, |ui| {
                for (i, n) in names.iter().enumerate() {
                    ui.selectable_value(&mut index, i, n);
                }
            });
        if index != self.model_index {
            self.select_model(index);
        }
        ui.horizontal(|ui| {
            let stride = match &self.model {
                Some(Ok(m)) => m.card.stride.per_axis(),
                _ => [1; 3],
            };
            for ((axis, v), stride) in ["x", "y", "z"]
                .iter()
                .zip(self.patch.iter_mut())
                .zip(stride)
            {
                ui.add(
                    egui::DragValue::new(v)
                        .range(stride..=2048)
                        .speed(stride as f64)
                        .prefix(format!("{axis} ")),
                );
            }
            ui.label("patch (model voxels)");
        });
        ui.horizontal(|ui| {
            egui::ComboBox::from_label("blend")
                .selected_text(self.blend.to_string())
                .show_ui(ui, |ui| {
                    for b in [BlendMode::Halo, BlendMode::Gaussian, BlendMode::Constant] {
                        ui.selectable_value(&mut self.blend, b, b.to_string());
                    }
                });
            ui.add_enabled(
                self.blend != BlendMode::Halo,
                egui::Slider::new(&mut self.overlap, 0.0..=0.75).text("overlap"),
            );
        });
        egui::ComboBox::from_label("device")
            .selected_text(self.device.to_string())
            .show_ui(ui, |ui| {
                for d in [Device::Cpu, Device::Cuda(0), Device::TensorRt(0)] {
                    ui.selectable_value(&mut self.device, d, d.to_string());
                }
            });
        ui.horizontal(|ui| {
            let mut on = self.budget_gib.is_some();
            ui.checkbox(&mut on, "memory budget");
            if on {
                let mut gib = self.budget_gib.unwrap_or(16.0);
                ui.add(
                    egui::DragValue::new(&mut gib)
                        .range(0.1..=1024.0)
                        .suffix(" GiB"),
                );
                self.budget_gib = Some(gib);
                if ui
                    .button("Choose patch")
                    .on_hover_text(
                        "The fastest patch that fits: for halo, the exact plan with the least work; when blending, full axial context as deep as fits",
                    )
                    .clicked()
                {
                    self.choose_for_budget();
                }
            } else {
                self.budget_gib = None;
                self.budget_refusal = None;
                self.budget_note = None;
            }
        });
        if let Some(refusal) = &self.budget_refusal {
            ui.colored_label(ui.visuals().error_fg_color, refusal);
        }
        if let Some(note) = &self.budget_note {
            ui.weak(note);
        }
        ui.checkbox(&mut self.allow_single_pass, "Allow one window (not tiling)");
        self.stages_ui(ui);
    }

    /// The model's optional stages (the coarse pass, the rescoring stage), when its card has them.
    fn stages_ui(&mut self, ui: &mut Ui) {
        let Some(Ok(model)) = &self.model else {
            return;
        };
        if let Some(coarse) = &model.card.coarse_pass {
            ui.checkbox(&mut self.coarse_pass, "Coarse pass for large lesions")
                .on_hover_text(format!(
                    "The model runs once more at {:.1} mm; its findings of {:.0} mm or more join the others",
                    coarse.spacing_mm[0], coarse.min_size_mm
                ));
        }
        if let Some(stage) = &model.card.rescore {
            ui.checkbox(&mut self.rescore, "Rescore candidates")
                .on_hover_text(format!(
                    "The model's second stage scores its {} best candidates again",
                    stage.candidates
                ));
        }
    }

    /// Sets the patch the core chooses for the budget, or says why there is none.
    fn choose_for_budget(&mut self) {
        let (Some(Ok(model)), Some(volume), Some(budget)) =
            (&self.model, &self.volume, self.budget_bytes())
        else {
            return;
        };
        let choice = PatchChoice::Budget {
            budget_bytes: budget,
        };
        match tessera_plan::request::resolve_patch(&volume.geometry, model, &self.config(), choice)
        {
            Ok(resolved) => {
                self.patch = resolved.patch;
                self.budget_refusal = None;
                self.budget_note = resolved.calibration_note().map(|n| format!("Note: {n}"));
            }
            Err(e) => {
                self.budget_refusal = Some(e.to_string());
                self.budget_note = None;
            }
        }
    }
}

/// The message bar's line for a finished run; it says when the peak went over its prediction.
pub fn summary(record: &RunRecord) -> String {
    let stats = &record.report.stats.memory;
    let memory = match record.report.plan.predicted_peak_bytes {
        Some(p) if stats.prediction_exceeded => format!(
            ", peak {} OVER the predicted {}: recalibrate (tessera sweep) before trusting a budget",
            format_bytes(stats.peak_memory_bytes),
            format_bytes(p)
        ),
        Some(p) => format!(
            ", peak {} (predicted ≤ {})",
            format_bytes(stats.peak_memory_bytes),
            format_bytes(p)
        ),
        None => format!(", peak {}", format_bytes(stats.peak_memory_bytes)),
    };
    format!(
        "run {} finished: {} detection(s) in {:.1} s{memory}",
        record.label,
        record.report.detections.len(),
        record.report.stats.elapsed_s
    )
}

fn progress_ui(ui: &mut Ui, job: &RunJob, budget: Option<u64>, device: &Device) {
    let total = job.plan.as_ref().map_or(0, |p| p.windows.len());
    let done = job.finished.len();
    let elapsed = job.started.elapsed().as_secs_f64();
    let remaining = if done > 0 {
        let mean = job.window_seconds.iter().sum::<f64>() / done as f64;
        format!("{:.0} s left", mean * (total - done) as f64)
    } else {
        "estimating".into()
    };
    let fraction = if total > 0 {
        done as f32 / total as f32
    } else {
        0.0
    };
    let text = match &job.stage {
        Some(stage) => format!("{stage}, {elapsed:.0} s"),
        None => format!(
            "window {} of {total}, {elapsed:.0} s, {remaining}",
            (done + 1).min(total.max(1))
        ),
    };
    ui.add(egui::ProgressBar::new(fraction).text(text));
    if job.cancel_requested {
        ui.label("Cancelling after the current window…");
    }
    let current = job.memory.map_or(0, |m| m.current_bytes);
    let predicted = job.plan.as_ref().and_then(|p| p.predicted_peak_bytes);
    let scale = budget
        .or(predicted)
        .unwrap_or(job.peak_bytes.max(1))
        .max(job.peak_bytes)
        .max(1);
    let source = job
        .memory
        .map_or("waiting for the first window".to_string(), |m| {
            format!("{:?}", m.source)
        });
    ui.label(format!("Memory on {device} ({source})"));
    ui.add(
        egui::ProgressBar::new(current as f32 / scale as f32).text(format!(
            "current {}, peak {}{}{}",
            format_bytes(current),
            format_bytes(job.peak_bytes),
            predicted.map_or(String::new(), |p| format!(
                ", predicted ≤ {}",
                format_bytes(p)
            )),
            budget.map_or(String::new(), |b| format!(", budget {}", format_bytes(b)))
        )),
    );
}

/// What the views draw on top of the slices: the live run's windows and the reviewed run.
#[derive(Debug, Default)]
pub struct Overlay<'a> {
    /// Windows in study voxels `[min, max)`, with their state.
    pub windows: Vec<([f64; 3], [f64; 3], WindowState)>,
    pub plan: Option<(&'a TilePlan, &'a Geometry)>,
    pub review: Option<&'a ReviewPanel>,
    pub record: Option<&'a RunRecord>,
    pub previous: Option<&'a RunRecord>,
    /// An SR's findings (File > Open SR).
    pub imported: Option<&'a super::imported::Imported>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowState {
    Current,
    Finished,
}

impl<'a> Overlay<'a> {
    pub fn new(panel: &'a RunPanel, review: &'a ReviewPanel) -> Self {
        let mut overlay = Self {
            review: Some(review),
            record: panel.runs.last(),
            previous: panel
                .runs
                .len()
                .checked_sub(2)
                .and_then(|i| panel.runs.get(i)),
            ..Self::default()
        };
        if let Some(job) = &panel.job
            && let (Some(plan), Some(grid)) = (&job.plan, &job.model_geometry)
        {
            overlay.plan = Some((plan, grid));
            let study = panel.volume.as_ref().map(|v| &v.geometry);
            if let Some(study) = study {
                let map = GridMap::new(grid, study);
                for w in &job.finished {
                    let (lo, hi) = map.study_span(w.min, w.max);
                    overlay.windows.push((lo, hi, WindowState::Finished));
                }
                if let Some(w) = &job.current {
                    let (lo, hi) = map.study_span(w.min, w.max);
                    overlay.windows.push((lo, hi, WindowState::Current));
                }
            }
        } else if let Some(r) = overlay.record {
            overlay.plan = Some((&r.plan, &r.model_geometry));
        }
        overlay
    }
}
