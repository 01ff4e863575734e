//! File > Open from PACS: the studies on the configured DICOMweb server, a study's series,
//! and retrieval of its CT series (progress, cancel) into the user's cache, then the usual
//! open. And "Send SR to PACS". Every request runs on the `tessera-pacs` thread.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, channel};

use egui::Ui;
use tessera_pacs::{Progress, SeriesRow, Server, StudyQuery, StudyRow};

/// What the worker reports.
#[derive(Debug)]
enum Answer {
    Studies(Vec<StudyRow>),
    Series(String, Vec<SeriesRow>),
    Progress(Progress),
    Retrieved(PathBuf),
    Sent(String),
    Failed(String),
}

/// A request in flight.
#[derive(Debug)]
struct Job {
    rx: Receiver<Answer>,
    cancel: Arc<AtomicBool>,
    what: String,
}

/// The browser's state; `open` shows its window.
#[derive(Debug, Default)]
pub struct PacsBrowser {
    pub open: bool,
    pub patient_filter: String,
    pub studies: Vec<StudyRow>,
    /// The study whose series are listed, and its series.
    pub series: Option<(String, Vec<SeriesRow>)>,
    job: Option<Job>,
    progress: Option<Progress>,
}

/// What the browser asks the app to do.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Open this retrieved folder.
    Open(PathBuf),
    Message {
        error: bool,
        text: String,
    },
}

impl PacsBrowser {
    pub fn is_busy(&self) -> bool {
        self.job.is_some()
    }

    /// Starts `work` on the PACS thread; its answer arrives through [`Self::poll`].
    fn start(
        &mut self,
        what: &str,
        ctx: &egui::Context,
        work: impl FnOnce(&dyn Fn(Answer), &AtomicBool) -> Answer + Send + 'static,
    ) {
        let (tx, rx) = channel();
        let cancel = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&cancel);
        let ctx = ctx.clone();
        let spawned = std::thread::Builder::new()
            .name("tessera-pacs".into())
            .spawn(move || {
                let send = |a: Answer| {
                    let _ = tx.send(a); // the window may have closed
                    ctx.request_repaint();
                };
                let answer = work(&send, &flag);
                send(answer);
            });
        self.progress = None;
        match spawned {
            Ok(_) => {
                self.job = Some(Job {
                    rx,
                    cancel,
                    what: what.into(),
                });
            }
            Err(e) => {
                self.job = None;
                let (tx, rx) = channel();
                let _ = tx.send(Answer::Failed(format!("cannot start the PACS thread: {e}")));
                self.job = Some(Job {
                    rx,
                    cancel,
                    what: what.into(),
                });
            }
        }
    }

    pub fn search(&mut self, server: Server, ctx: &egui::Context) {
        let query = StudyQuery {
            patient_name: Some(self.patient_filter.trim().to_string()).filter(|p| !p.is_empty()),
            limit: Some(200),
            ..StudyQuery::default()
        };
        self.series = None;
        self.start("searching studies", ctx, move |_, _| {
            match server.search_studies(&query) {
                Ok(rows) => Answer::Studies(rows),
                Err(e) => Answer::Failed(e.to_string()),
            }
        });
    }

    pub fn list_series(&mut self, server: Server, study_uid: String, ctx: &egui::Context) {
        self.start("listing series", ctx, move |_, _| {
            match server.search_series(&study_uid) {
                Ok(rows) => Answer::Series(study_uid, rows),
                Err(e) => Answer::Failed(e.to_string()),
            }
        });
    }

    /// Retrieves the CT series of `study_uid` (or `series_uid`) under `cache`, reusing an
    /// earlier complete retrieval of the same series.
    pub fn retrieve(
        &mut self,
        server: Server,
        study_uid: String,
        series_uid: Option<String>,
        cache: &std::path::Path,
        ctx: &egui::Context,
    ) {
        let folder = cache
            .join(&study_uid)
            .join(series_uid.as_deref().unwrap_or("ct"));
        self.start("retrieving", ctx, move |send, cancel| {
            if folder.is_dir() && std::fs::read_dir(&folder).is_ok_and(|mut d| d.next().is_some()) {
                // Renamed into place only when complete: what is there is whole.
                return Answer::Retrieved(folder);
            }
            if let Some(parent) = folder.parent()
                && let Err(e) = std::fs::create_dir_all(parent)
            {
                return Answer::Failed(format!("creating {}: {e}", parent.display()));
            }
            let cancelled = || cancel.load(Ordering::Relaxed);
            let mut progress = |p: &Progress| send(Answer::Progress(*p));
            match server.retrieve_ct(
                &study_uid,
                series_uid.as_deref(),
                &folder,
                &cancelled,
                &mut progress,
            ) {
                Ok(r) => Answer::Retrieved(r.dir),
                Err(e) => Answer::Failed(format!(
                    "retrieving study {study_uid}: {e}; nothing was kept"
                )),
            }
        });
    }

    /// Stores `sr` (Part 10 bytes) on the server.
    pub fn send_sr(&mut self, server: Server, sr: Vec<u8>, ctx: &egui::Context) {
        self.start("sending the SR", ctx, move |_, _| {
            match server.store(&[sr]) {
                Ok(stored) => Answer::Sent(format!(
                    "the PACS stored the SR ({} instance(s)) at {}",
                    stored.stored.len(),
                    server.base_url()
                )),
                Err(e) => Answer::Failed(format!("sending the SR: {e}")),
            }
        });
    }

    pub fn cancel(&self) {
        if let Some(job) = &self.job {
            job.cancel.store(true, Ordering::Relaxed);
        }
    }

    /// Takes the worker's answers since the last frame.
    pub fn poll(&mut self) -> Option<Outcome> {
        let job = self.job.as_ref()?;
        let mut outcome = None;
        let mut done = false;
        while let Ok(answer) = job.rx.try_recv() {
            match answer {
                Answer::Progress(p) => self.progress = Some(p),
                Answer::Studies(rows) => {
                    self.studies = rows;
                    done = true;
                }
                Answer::Series(uid, rows) => {
                    self.series = Some((uid, rows));
                    done = true;
                }
                Answer::Retrieved(dir) => {
                    self.open = false;
                    outcome = Some(Outcome::Open(dir));
                    done = true;
                }
                Answer::Sent(text) => {
                    outcome = Some(Outcome::Message { error: false, text });
                    done = true;
                }
                Answer::Failed(text) => {
                    outcome = Some(Outcome::Message { error: true, text });
                    done = true;
                }
            }
        }
        if done {
            self.job = None;
            self.progress = None;
        }
        outcome
    }

    /// The job line: what runs, its progress, and Cancel.
    pub fn job_ui(&self, ui: &mut Ui) {
        let Some(job) = &self.job else {
            return;
        };
        ui.horizontal(|ui| {
            ui.spinner();
            let mut text = job.what.clone();
            if let Some(p) = &self.progress {
                text.push_str(&format!(
                    ": series {}/{}, {:.1} MiB",
                    (p.series_done + 1).min(p.series_total),
                    p.series_total,
                    p.bytes as f64 / f64::from(1u32 << 20)
                ));
            }
            ui.label(text);
            if ui.button("Cancel retrieval").clicked() {
                self.cancel();
            }
        });
    }
}

/// What the reader clicked in the browser window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    Search,
    Series(String),
    Retrieve {
        study_uid: String,
        series_uid: Option<String>,
    },
    /// The URL field lost focus: keep it in the settings.
    SaveUrl,
}

impl PacsBrowser {
    /// The "Open from PACS" window: server URL, patient filter, studies, a study's series.
    pub fn window_ui(&mut self, ctx: &egui::Context, url: &mut String) -> Option<Request> {
        let mut open = self.open;
        let mut request = None;
        egui::Window::new("Open from PACS")
            .open(&mut open)
            .default_size([760.0, 460.0])
            .show(ctx, |ui| {
                ui.horizontal(|ui| {
                    ui.label("DICOMweb URL");
                    let field = ui.add(
                        egui::TextEdit::singleline(url)
                            .hint_text("http://localhost:8042/dicom-web")
                            .desired_width(320.0),
                    );
                    if field.lost_focus() {
                        request = Some(Request::SaveUrl);
                    }
                });
                ui.horizontal(|ui| {
                    ui.label("Patient");
                    ui.add(
                        egui::TextEdit::singleline(&mut self.patient_filter)
                            .hint_text("name, wildcards: DOE*")
                            .desired_width(200.0),
                    );
                    if ui
                        .add_enabled(!self.is_busy(), egui::Button::new("Search"))
                        .clicked()
                    {
                        request = Some(Request::Search);
                    }
                });
                self.job_ui(ui);
                ui.separator();
                egui::ScrollArea::vertical().show(ui, |ui| {
                    if let Some(r) = self.studies_ui(ui).or_else(|| self.series_ui(ui)) {
                        request = Some(r);
                    }
                });
            });
        self.open = open;
        request
    }

    fn studies_ui(&self, ui: &mut Ui) -> Option<Request> {
        let mut request = None;
        if self.studies.is_empty() {
            ui.weak("No studies listed: Search.");
            return None;
        }
        let busy = self.is_busy();
        egui::Grid::new("pacs_studies")
            .striped(true)
            .num_columns(7)
            .show(ui, |ui| {
                for h in ["", "", "Patient", "ID", "Date", "Modalities", "Description"] {
                    ui.strong(h);
                }
                ui.end_row();
                for s in &self.studies {
                    if ui.add_enabled(!busy, egui::Button::new("Series")).clicked() {
                        request = Some(Request::Series(s.study_uid.clone()));
                    }
                    let has_ct = s.modalities.iter().any(|m| m == "CT");
                    if ui
                        .add_enabled(!busy && has_ct, egui::Button::new("Open CT"))
                        .on_disabled_hover_text("no CT series in this study")
                        .clicked()
                    {
                        request = Some(Request::Retrieve {
                            study_uid: s.study_uid.clone(),
                            series_uid: None,
                        });
                    }
                    ui.label(s.patient_name.replace('^', " "));
                    ui.label(&s.patient_id);
                    ui.label(&s.study_date);
                    ui.label(s.modalities.join(", "));
                    ui.label(&s.description);
                    ui.end_row();
                }
            });
        request
    }

    fn series_ui(&self, ui: &mut Ui) -> Option<Request> {
        let (study_uid, rows) = self.series.as_ref()?;
        let mut request = None;
        ui.separator();
        ui.strong(format!("Series of {study_uid}"));
        let busy = self.is_busy();
        egui::Grid::new("pacs_series")
            .striped(true)
            .num_columns(5)
            .show(ui, |ui| {
                for h in ["", "Modality", "Number", "Description", "Instances"] {
                    ui.strong(h);
                }
                ui.end_row();
                for s in rows {
                    let ct = s.modality == "CT";
                    if ui
                        .add_enabled(!busy && ct, egui::Button::new("Open"))
                        .on_disabled_hover_text("Tessera opens CT series")
                        .clicked()
                    {
                        request = Some(Request::Retrieve {
                            study_uid: study_uid.clone(),
                            series_uid: Some(s.series_uid.clone()),
                        });
                    }
                    ui.label(&s.modality);
                    ui.label(s.number.map_or_else(String::new, |n| n.to_string()));
                    ui.label(&s.description);
                    ui.label(s.instances.map_or_else(String::new, |n| n.to_string()));
                    ui.end_row();
                }
            });
        request
    }
}
