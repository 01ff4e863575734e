//! The desktop viewer: MPR review of a CT study with the detector running live.
//!
//! The UI renders state and sends commands; loading and detection run on named worker threads
//! that report through channels ([`study::LoadJob`], [`run_panel::RunJob`]). Everything the viewer
//! computes comes from `tessera_core` (slices, plans, the pipeline, parity, reports).

mod axes_edit;
pub mod batch;
mod colors;
mod corner_text;
mod files;
mod gallery;
pub mod imported;
mod keys;
mod measures;
mod overlays;
pub mod pacs;
pub mod reading;
pub mod review;
pub mod run_panel;
mod slice_view;
pub mod study;
pub mod tools;

use std::path::PathBuf;

use anyhow::Context as _;
use egui::{Key, Ui};
use tessera_core::sr::{Selection, SrOptions};

use crate::common::settings::{Places, Profile};

pub use review::ReviewPanel;
pub use run_panel::{RunPanel, RunRecord};
pub use study::{LoadJob, Source, Study};

/// What to do on start, besides opening the study.
#[derive(Debug, Clone, Default)]
pub struct Startup {
    /// Run the detector with the default settings once the study is open.
    pub run: bool,
    /// Save the window as a PNG once everything asked for is done, then close.
    pub screenshot: Option<PathBuf>,
    /// Draw window seams.
    pub seams: bool,
    /// Draw the run's lung field.
    pub lungs: bool,
    /// Interpolate over missing or unreadable slices instead of refusing a series.
    pub allow_gaps: bool,
    /// Show this SR's findings once the study is open.
    pub sr: Option<PathBuf>,
    /// Choose this model folder in the run panel.
    pub model: Option<PathBuf>,
    /// List this `tessera batch` output folder (File > Open batch results).
    pub batch: Option<PathBuf>,
    /// Then open this study of it, with its run.
    pub batch_study: Option<String>,
}

/// Opens the viewer window and blocks until it is closed.
pub fn run(
    path: Option<PathBuf>,
    ort_lib: Option<PathBuf>,
    startup: Startup,
) -> anyhow::Result<()> {
    quiet_wayland_probe();
    let source = path.map_or(Source::Demo, Source::Path);
    let options = eframe::NativeOptions {
        renderer: eframe::Renderer::Wgpu,
        viewport: egui::ViewportBuilder::default()
            .with_title("Tessera")
            .with_inner_size([1500.0, 950.0])
            .with_drag_and_drop(true),
        ..Default::default()
    };
    eframe::run_native(
        "Tessera",
        options,
        Box::new(move |cc| {
            let mut app = TesseraApp::new(&cc.egui_ctx, source, ort_lib, startup.allow_gaps);
            app.use_places(Places::user());
            app.review.show_seams = startup.seams;
            app.review.show_lungs = startup.lungs;
            if let Some(dir) = &startup.model {
                app.run_panel.choose_model(dir);
            }
            app.startup = startup;
            Ok(Box::new(app))
        }),
    )
    .map_err(|e| anyhow::anyhow!("{e}"))
    .context(
        "the viewer could not open a window (no display? run it under a desktop session or Xvfb; the headless subcommands are listed by `tessera --help`)",
    )
}

/// On an X11 display without a session runtime folder (Xvfb, ssh -X), the graphics stack still
/// probes for Wayland (seen with Mesa's Vulkan driver), and libwayland prints "XDG_RUNTIME_DIR is invalid or not set" for each
/// probe: error-looking output on success. The XDG base-directory spec asks for a private
/// replacement folder then; with one, the probe finds no Wayland socket and stays quiet.
fn quiet_wayland_probe() {
    use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _};
    let unset = |name: &str| std::env::var_os(name).is_none_or(|v| v.is_empty());
    if !(unset("XDG_RUNTIME_DIR") && unset("WAYLAND_DISPLAY") && !unset("DISPLAY")) {
        return;
    }
    let uid = std::fs::metadata("/proc/self").map_or(0, |m| m.uid());
    let dir = std::env::temp_dir().join(format!("tessera-runtime-{uid}"));
    // 0700 and ours, as the spec requires; otherwise leave the environment alone.
    let _ = std::fs::DirBuilder::new().mode(0o700).create(&dir);
    let private = std::fs::symlink_metadata(&dir)
        .is_ok_and(|m| m.is_dir() && m.uid() == uid && m.mode() & 0o077 == 0);
    if private {
        // SAFETY: called first thing in `run`, on the main thread, before eframe, the loader
        // or any worker thread exists, so nothing reads the environment concurrently.
        #[allow(unsafe_code)]
        unsafe {
            std::env::set_var("XDG_RUNTIME_DIR", &dir);
        }
    }
}

/// The whole viewer state. Public so that tests drive it through `egui_kittest`.
#[derive(Debug)]
pub struct TesseraApp {
    pub ctx: egui::Context,
    pub load: Option<LoadJob>,
    pub picker: Option<study::Picker>,
    pub study: Option<Study>,
    pub run_panel: RunPanel,
    pub review: ReviewPanel,
    /// The user's settings (the reader's name, the PACS) and where their files live.
    pub profile: Profile,
    /// Messages for the user (failures, refusals, saved files); dismissable.
    pub messages: Vec<Message>,
    screenshot: Option<review::ScreenshotJob>,
    pub startup: Startup,
    /// Open series with gaps by interpolating them (File menu; `--allow-gaps`).
    pub allow_gaps: bool,
    /// File > Open from PACS, and sending SRs.
    pub pacs: pacs::PacsBrowser,
    /// An SR's findings over the study (File > Open SR).
    pub imported: Option<imported::Imported>,
    /// File > Open batch results.
    pub batch: batch::BatchResults,
    /// A batch run's det.json to show once the study being opened is loaded.
    pending_run: Option<PathBuf>,
    /// Use the desktop's file dialogs (off: always a path field, as where none can open).
    pub file_dialogs: bool,
    /// A path being typed, where no file dialog could open.
    pub path_prompt: Option<files::PathPrompt>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub error: bool,
    pub text: String,
}

impl TesseraApp {
    pub fn new(
        ctx: &egui::Context,
        source: Source,
        ort_lib: Option<PathBuf>,
        allow_gaps: bool,
    ) -> Self {
        let mut app = Self {
            ctx: ctx.clone(),
            load: None,
            picker: None,
            study: None,
            run_panel: RunPanel::new(ort_lib),
            review: ReviewPanel::default(),
            profile: Profile::default(),
            messages: Vec::new(),
            screenshot: None,
            startup: Startup::default(),
            allow_gaps,
            pacs: pacs::PacsBrowser::default(),
            imported: None,
            batch: batch::BatchResults::default(),
            pending_run: None,
            file_dialogs: true,
            path_prompt: None,
        };
        app.open(source, None);
        app
    }

    /// Opens a batch row's study; its run is shown once the study is loaded.
    pub fn open_batch_row(&mut self, chosen: batch::Chosen) {
        self.pending_run = Some(chosen.detections);
        self.open(Source::Path(chosen.study), None);
    }

    /// Shows a batch run's detections (from its det.json) on the open study, with the
    /// reader's stored review of that run if there is one.
    fn show_batch_run(&mut self, det: &std::path::Path) {
        let Some(study) = &self.study else {
            return;
        };
        match batch::run_from_file(det, &study.volume, &self.run_panel.models) {
            Ok((record, model_dir)) => {
                // The panel offers the run's model, so that a new run compares like with like.
                self.run_panel.choose_model(&model_dir);
                let text = format!(
                    "{}: {} detection(s) from {}",
                    record.label,
                    record.report.detections.len(),
                    det.display()
                );
                self.run_panel.runs.push(record);
                self.review
                    .run_finished(&self.run_panel.runs, &self.profile);
                self.info(text);
            }
            Err(e) => self.error(format!("{e:#}")),
        }
    }

    /// Starts loading `source` in the background (`series_uid` picks one of several series).
    pub fn open(&mut self, source: Source, series_uid: Option<String>) {
        self.picker = None;
        let options = tessera_dicom::dicom::LoadOptions {
            allow_gaps: self.allow_gaps,
        };
        self.load = Some(LoadJob::start(
            source,
            series_uid,
            options,
            self.ctx.clone(),
        ));
    }

    pub fn error(&mut self, text: impl Into<String>) {
        self.message(true, text.into());
    }

    pub fn info(&mut self, text: impl Into<String>) {
        self.message(false, text.into());
    }

    /// Shown in the message bar and logged on stderr, so that a terminal (or a benchmark
    /// script) sees what the user sees.
    fn message(&mut self, error: bool, text: String) {
        let kind = if error { "error" } else { "info" };
        eprintln!("tessera view: {kind}: {text}");
        self.messages.push(Message { error, text });
    }

    /// Where settings and reviews are kept (the user's folders; tests give a temporary one).
    pub fn use_places(&mut self, places: Places) {
        self.run_panel
            .set_models(places.installed_models(), places.models.clone());
        let (profile, problem) = Profile::load(places);
        self.profile = profile;
        if let Some(problem) = problem {
            self.error(problem);
        }
    }

    /// Takes what the workers have sent since the last frame.
    fn poll_workers(&mut self) {
        if let Some(job) = &mut self.load {
            match job.poll() {
                study::LoadPoll::Pending => {}
                study::LoadPoll::Choose(picker) => {
                    self.load = None;
                    self.picker = Some(picker);
                }
                study::LoadPoll::Loaded(study) => {
                    self.load = None;
                    let filled = &study.volume.filled_slices;
                    if !filled.is_empty() {
                        let listed: Vec<String> = filled.iter().map(|f| f.describe()).collect();
                        self.error(format!(
                            "{} slice(s) of this series are interpolated, not read from a file (marked in the views): {}",
                            filled.len(),
                            listed.join("; ")
                        ));
                    }
                    self.run_panel.study_changed(&study);
                    self.review.study_changed();
                    self.imported = None;
                    self.study = Some(*study);
                    if let Some(det) = self.pending_run.take() {
                        self.show_batch_run(&det);
                    }
                }
                study::LoadPoll::Failed(e) => {
                    self.load = None;
                    self.error(e);
                }
            }
        }
        if let Some(outcome) = self.run_panel.poll() {
            match outcome {
                run_panel::Outcome::Finished(record) => {
                    let summary = run_panel::summary(&record);
                    if record.report.stats.memory.prediction_exceeded {
                        self.error(summary);
                    } else {
                        self.info(summary);
                    }
                    self.review
                        .run_finished(&self.run_panel.runs, &self.profile);
                }
                run_panel::Outcome::Cancelled => self.info("run cancelled"),
                run_panel::Outcome::Failed(e) => self.error(e),
            }
        }
        if let Some(job) = &mut self.screenshot
            && let Some(result) = job.poll()
        {
            self.screenshot = None;
            match result {
                Ok(path) => self.info(format!("saved {}", path.display())),
                Err(e) => self.error(e),
            }
            if self.startup.screenshot.take().is_some() {
                self.ctx.send_viewport_cmd(egui::ViewportCommand::Close);
            }
        }
        match self.pacs.poll() {
            Some(pacs::Outcome::Open(dir)) => self.open(Source::Path(dir), None),
            Some(pacs::Outcome::Message { error, text }) => self.message(error, text),
            None => {}
        }
        for (error, text) in std::mem::take(&mut self.review.notices) {
            self.message(error, text);
        }
        self.startup_steps();
    }

    /// `--sr`, `--run` and `--screenshot`: act once the study is open (and the run is done).
    fn startup_steps(&mut self) {
        if self.study.is_none()
            || self.load.is_some()
            || self.run_panel.is_running()
            || self.screenshot.is_some()
        {
            return;
        }
        if let Some(dir) = self.startup.batch.take() {
            if let Err(e) = self.batch.load(dir) {
                self.error(format!("{e:#}"));
            }
            if let Some(id) = self.startup.batch_study.take() {
                match self.batch.choose(&id) {
                    Some(chosen) => {
                        self.batch.open = false;
                        self.open_batch_row(chosen);
                        return;
                    }
                    None => self.error(format!("no study '{id}' that ran in this batch")),
                }
            }
        }
        if let Some(path) = self.startup.sr.take() {
            self.import_sr(&path);
        }
        if self.startup.run {
            self.startup.run = false;
            if let Err(e) = self.run_panel.start(&self.ctx) {
                self.error(e);
            }
            return;
        }
        if let Some(path) = self.startup.screenshot.clone() {
            // The best detection selected: all three views go to it.
            if let Some(record) = self.run_panel.runs.last()
                && !record.report.detections.is_empty()
            {
                self.review.select(0, record, self.study.as_mut());
            } else if let (Some(imported), Some(study)) = (&mut self.imported, &mut self.study) {
                imported.select(0, study);
            }
            self.save_png(path);
        }
    }

    /// One frame of the whole window.
    pub fn ui(&mut self, ui: &mut Ui) {
        let typing_at_start = keys::typing(ui.ctx());
        self.poll_workers();
        self.dropped_files(ui);
        egui::Panel::top("menu").show(ui, |ui| self.menu_ui(ui));
        egui::Panel::bottom("messages").show(ui, |ui| self.messages_ui(ui));
        egui::Panel::right("side")
            .default_size(430.0)
            .min_size(360.0)
            .show(ui, |ui| self.side_ui(ui));
        egui::CentralPanel::default().show(ui, |ui| self.central_ui(ui));
        if self.pacs.open {
            self.pacs_ui(&ui.ctx().clone());
        }
        if self.batch.open
            && let Some(chosen) = self.batch.ui(&ui.ctx().clone())
        {
            self.open_batch_row(chosen);
        }
        self.path_prompt_ui(&ui.ctx().clone());
        // After every widget, so that no key a field took is read again here (see `keys`).
        self.shortcuts(ui.ctx(), typing_at_start);
        // Workers ask for a frame when they have news; between news only the elapsed time
        // changes. On a software renderer a frame takes the cores from inference (at 1 Hz a
        // run was 14 % slower, at 10 Hz 90 %: scripts/bench_gui_run.sh).
        let tick_ms = if self.run_panel.is_running() {
            Some(5000)
        } else if self.load.is_some() || self.screenshot.is_some() || self.pacs.is_busy() {
            Some(100)
        } else {
            None
        };
        if let Some(ms) = tick_ms {
            ui.ctx()
                .request_repaint_after(std::time::Duration::from_millis(ms));
        }
    }

    fn dropped_files(&mut self, ui: &Ui) {
        let dropped = ui.input(|i| i.raw.dropped_files.first().map(|f| f.path().to_path_buf()));
        if let Some(path) = dropped {
            self.open(Source::Path(path), None);
        }
    }

    fn menu_ui(&mut self, ui: &mut Ui) {
        egui::MenuBar::new().ui(ui, |ui| {
            ui.menu_button("File", |ui| {
                self.open_menu_ui(ui);
                ui.separator();
                let have_run = self.run_panel.runs.last().is_some();
                if ui
                    .add_enabled(have_run, egui::Button::new("Export detections JSON…"))
                    .clicked()
                {
                    self.ask_path(files::PathJob::ExportJson);
                    ui.close();
                }
                if ui
                    .add_enabled(have_run, egui::Button::new("Export LUNA16 CSV…"))
                    .clicked()
                {
                    self.ask_path(files::PathJob::ExportCsv);
                    ui.close();
                }
                for (label, selection) in [
                    ("Export SR, accepted findings…", Selection::AcceptedOnly),
                    ("Export SR, all with decisions…", Selection::All),
                ] {
                    if ui.add_enabled(have_run, egui::Button::new(label)).clicked() {
                        self.ask_path(files::PathJob::ExportSr(selection));
                        ui.close();
                    }
                }
                let can_send = have_run && !self.pacs.is_busy();
                if ui
                    .add_enabled(
                        can_send,
                        egui::Button::new("Send SR to PACS (accepted findings)"),
                    )
                    .clicked()
                {
                    self.send_sr();
                    ui.close();
                }
                if ui.button("Save layout as PNG…").clicked() {
                    self.ask_path(files::PathJob::SavePng);
                    ui.close();
                }
            });
            ui.menu_button("View", |ui| {
                ui.checkbox(&mut self.review.show_seams, "Window seams and overlap");
                ui.checkbox(&mut self.review.show_weights, "Blend weight map");
                ui.checkbox(&mut self.review.show_lungs, "Lung field");
                if ui.button("Reset views (0)").clicked() {
                    if let Some(study) = &mut self.study {
                        study.reset_views();
                    }
                    ui.close();
                }
            });
            if let Some(job) = &self.load {
                ui.separator();
                ui.spinner();
                ui.label(job.stage_text());
            }
        });
    }

    /// File menu: the ways to open a study (and what goes over one).
    fn open_menu_ui(&mut self, ui: &mut Ui) {
        ui.checkbox(&mut self.allow_gaps, "Allow gaps")
            .on_hover_text(
                "Open series with missing or unreadable slices by interpolating them (each filled slice is listed and marked). Off: such a series is refused.",
            );
        if ui.button("Open folder…").clicked() {
            self.ask_path(files::PathJob::OpenFolder);
            ui.close();
        }
        if ui.button("Open file…").clicked() {
            self.ask_path(files::PathJob::OpenFile);
            ui.close();
        }
        if ui.button("Open from PACS…").clicked() {
            self.pacs.open = true;
            ui.close();
        }
        if ui
            .add_enabled(self.study.is_some(), egui::Button::new("Open SR…"))
            .on_hover_text("Show a DICOM SR's findings over the open study")
            .clicked()
        {
            self.ask_path(files::PathJob::OpenSr);
            ui.close();
        }
        if ui
            .button("Open batch results…")
            .on_hover_text("A `tessera batch` output folder: its studies, each with its run")
            .clicked()
        {
            self.ask_path(files::PathJob::OpenBatch);
            ui.close();
        }
        if ui.button("Open demo study").clicked() {
            self.open(Source::Demo, None);
            ui.close();
        }
    }

    fn messages_ui(&mut self, ui: &mut Ui) {
        let mut dismiss = None;
        for (i, m) in self.messages.iter().enumerate().rev().take(4) {
            ui.horizontal(|ui| {
                if ui.small_button("Dismiss").clicked() {
                    dismiss = Some(i);
                }
                let color = if m.error {
                    ui.visuals().error_fg_color
                } else {
                    ui.visuals().text_color()
                };
                ui.colored_label(color, &m.text);
            });
        }
        if let Some(i) = dismiss {
            self.messages.remove(i);
        }
        if self.messages.is_empty() {
            ui.weak("Drop a DICOM folder here, or File > Open.");
        }
    }

    fn side_ui(&mut self, ui: &mut Ui) {
        egui::ScrollArea::vertical().show(ui, |ui| {
            let messages = self.run_panel.ui(ui, self.study.as_ref());
            for m in messages {
                self.message(m.error, m.text);
            }
            ui.separator();
            if let Some(problem) = reading::reader_ui(ui, &mut self.profile) {
                self.error(problem);
            }
            let export = self.review.ui(
                ui,
                &self.run_panel.runs,
                self.study.as_mut(),
                &self.profile.settings.reader,
            );
            if let Some(kind) = export {
                self.ask_path(match kind {
                    review::ExportKind::Json => files::PathJob::ExportJson,
                    review::ExportKind::Csv => files::PathJob::ExportCsv,
                });
            }
            if let Some(imported) = &mut self.imported {
                ui.separator();
                imported.ui(ui, self.study.as_mut());
            }
        });
    }

    fn central_ui(&mut self, ui: &mut Ui) {
        if let Some(picker) = &mut self.picker {
            if let Some(choice) = picker.ui(ui) {
                let source = Source::Path(picker.root.clone());
                self.open(source, Some(choice));
            }
            return;
        }
        let Some(study) = &mut self.study else {
            ui.centered_and_justified(|ui| {
                if self.load.is_some() {
                    ui.spinner();
                } else {
                    ui.label("No study open. File > Open, or drop a DICOM folder here.");
                }
            });
            return;
        };
        study.follow_reading_window(self.run_panel.reading_window());
        let mut overlay = run_panel::Overlay::new(&self.run_panel, &self.review);
        overlay.imported = self.imported.as_ref();
        slice_view::layout_ui(ui, study, &overlay);
        let corrected = study.axes_edit.corrected.take();
        if let Some(drawn) = study.tools.drawn.take() {
            let mut finding = tools::added_finding(
                &drawn,
                &study.volume.geometry,
                "",
                &tessera_core::sr::now_dt(),
            );
            finding.measurements = measures::of_added(&finding, study);
            match self.review.reading.add(finding) {
                Ok(()) => self.info("added a finding (it goes into the SR as the reader's own)"),
                Err(e) => self.error(e),
            }
        }
        if let Some((i, axes)) = corrected {
            match self.review.reading.set_axes(i, axes) {
                Ok(()) => self.info(format!(
                    "finding {}: your axes kept in the review ({:.1} x {:.1} mm, mean {:.1} mm)",
                    i + 1,
                    axes.long_axis_mm,
                    axes.short_axis_mm,
                    axes.mean_diameter_mm()
                )),
                Err(e) => self.error(e),
            }
        }
    }

    /// Writes the last run's detections (det.json with the review, or the LUNA16 CSV) to
    /// `path`.
    fn export(&mut self, kind: review::ExportKind, path: &std::path::Path) {
        let Some(record) = self.run_panel.runs.last() else {
            return;
        };
        let inputs: Vec<PathBuf> = self.study.iter().map(|s| s.source.clone()).collect();
        let review = self.review.reading.review.as_ref();
        match review::export(record, kind, path, &inputs, review) {
            Ok(()) => self.info(format!("saved {}", path.display())),
            Err(e) => self.error(format!("{e:#}")),
        }
    }

    /// Writes the last run's findings (and the reader's decisions) as a DICOM SR at `path`,
    /// refused when that would write into or over the study's files.
    pub fn export_sr(&self, selection: Selection, path: &std::path::Path) -> anyhow::Result<usize> {
        let record = self.run_panel.runs.last().context("no run to export")?;
        let inputs: Vec<PathBuf> = self.study.iter().map(|s| s.source.clone()).collect();
        tessera_dicom::io::check_output(path, &inputs, false)?;
        let review = self.review.reading.review.as_ref();
        let options = SrOptions::now(selection);
        tessera_core::sr::write(path, &record.report, review, &options)
            .with_context(|| format!("exporting the SR to {}", path.display()))
    }

    /// Shows the findings of the SR at `path` over the open study.
    pub fn import_sr(&mut self, path: &std::path::Path) {
        let Some(study) = &self.study else {
            return self.error("open the study the SR is about first");
        };
        match imported::Imported::load(path, study) {
            Ok(imported) => {
                let outside = imported.boxes.iter().filter(|b| b.is_none()).count();
                self.info(format!(
                    "{}: {} finding(s){}",
                    path.display(),
                    imported.findings.len(),
                    if outside > 0 {
                        format!(", {outside} outside the open volume")
                    } else {
                        String::new()
                    }
                ));
                self.imported = Some(imported);
            }
            Err(e) => self.error(format!("{e:#}")),
        }
    }

    /// The PACS browser's window, and what its clicks ask for.
    fn pacs_ui(&mut self, ctx: &egui::Context) {
        let settings = &mut self.profile.settings;
        let Some(request) = self.pacs.window_ui(ctx, &mut settings.pacs_url) else {
            return;
        };
        if request == pacs::Request::SaveUrl {
            if let Err(e) = self.profile.save_settings() {
                self.error(format!("{e:#}"));
            }
            return;
        }
        let server = match self.profile.settings.pacs_server() {
            Ok(server) => server,
            Err(e) => return self.error(format!("{e:#}")),
        };
        match request {
            pacs::Request::Search => self.pacs.search(server, ctx),
            pacs::Request::Series(uid) => self.pacs.list_series(server, uid, ctx),
            pacs::Request::Retrieve {
                study_uid,
                series_uid,
            } => {
                let cache = &self.profile.places.retrieved;
                self.pacs
                    .retrieve(server, study_uid, series_uid, cache, ctx);
            }
            pacs::Request::SaveUrl => {}
        }
    }

    /// Sends the last run's accepted findings as an SR to the configured PACS.
    pub fn send_sr(&mut self) {
        let built = || -> anyhow::Result<(tessera_pacs::Server, Vec<u8>)> {
            let server = self.profile.settings.pacs_server()?;
            let record = self.run_panel.runs.last().context("no run to send")?;
            let review = self.review.reading.review.as_ref();
            let options = SrOptions::now(Selection::AcceptedOnly);
            let (doc, _) = tessera_core::sr::document(&record.report, review, &options)?;
            let bytes = tessera_dicom::dicom::sr::sr_bytes(&doc)?;
            Ok((server, bytes))
        };
        match built() {
            Ok((server, bytes)) => self.pacs.send_sr(server, bytes, &self.ctx.clone()),
            Err(e) => self.error(format!("{e:#}")),
        }
    }

    /// The frame's shortcut presses, each applied once, in order: 1-5 window presets, 0 resets
    /// the views, C and H hide the crosshair and the corner text, S and M step the slab's
    /// thickness and projection, the review's keys (`reading`), and Up/Down/Page Up/Page Down scroll the view
    /// under the pointer.
    fn shortcuts(&mut self, ctx: &egui::Context, typing_at_start: bool) {
        let Some(study) = &mut self.study else {
            return;
        };
        let presets = [Key::Num1, Key::Num2, Key::Num3, Key::Num4, Key::Num5];
        for press in keys::shortcut_presses(ctx, typing_at_start) {
            if let Some(i) = presets.iter().position(|k| *k == press.key) {
                study.apply_preset(i);
            } else if press.key == Key::Num0 {
                study.reset_views();
            } else if press.key == Key::C {
                study.show_crosshair = !study.show_crosshair;
            } else if press.key == Key::H {
                study.show_text = !study.show_text;
            } else if press.key == Key::S {
                study.next_slab(study.hovered);
            } else if press.key == Key::M {
                study.next_slab_mode(study.hovered);
            } else if let Some(step) = reading::Reading::step_of(press) {
                if let Some(record) = self.run_panel.runs.last() {
                    self.review
                        .apply(step, record, Some(study), &self.profile.settings.reader);
                }
            } else if let Some(plane) = study.hovered {
                let slices = match press.key {
                    Key::ArrowUp => 1,
                    Key::ArrowDown => -1,
                    Key::PageUp => keys::PAGE_SLICES,
                    Key::PageDown => -keys::PAGE_SLICES,
                    _ => 0,
                };
                study.scroll(plane, slices);
            }
        }
    }

    /// Saves the next rendered frame as a PNG at `path`.
    pub fn save_png(&mut self, path: PathBuf) {
        self.screenshot = Some(review::ScreenshotJob::start(&self.ctx, path));
    }
}

impl eframe::App for TesseraApp {
    fn ui(&mut self, ui: &mut Ui, _frame: &mut eframe::Frame) {
        TesseraApp::ui(self, ui);
    }
}
