//! Opening a study off the UI thread, the series picker, and the per-study view state.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, TryRecvError, channel};
use std::time::Instant;

use tessera_dicom::dicom::{self, ScanReport};
use tessera_dicom::view::{Plane, Slab, SlabMode, WindowLevel};
use tessera_dicom::{Volume, volume::format_size};

use crate::common::series::{SeriesRow, row};

/// What to open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The built-in demo study (written to the cache on first use).
    Demo,
    Path(PathBuf),
}

enum LoadMessage {
    Stage(String),
    Choose(PathBuf, Vec<SeriesRow>),
    Loaded(PathBuf, Box<Volume>),
    Failed(String),
}

/// A load in flight on the `tessera-load` thread.
#[derive(Debug)]
pub struct LoadJob {
    rx: Receiver<LoadMessage>,
    stage: String,
    started: Instant,
}

impl std::fmt::Debug for LoadMessage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LoadMessage")
    }
}

/// What a poll found.
#[derive(Debug)]
pub enum LoadPoll {
    Pending,
    Choose(Picker),
    Loaded(Box<Study>),
    Failed(String),
}

impl LoadJob {
    pub fn start(
        source: Source,
        series_uid: Option<String>,
        options: dicom::LoadOptions,
        ctx: egui::Context,
    ) -> Self {
        let (tx, rx) = channel();
        let spawned = std::thread::Builder::new()
            .name("tessera-load".into())
            .spawn(move || {
                let send = |m: LoadMessage| {
                    let _ = tx.send(m); // the window may have closed
                    ctx.request_repaint();
                };
                send(match load(source, series_uid.as_deref(), options, &send) {
                    Ok(m) => m,
                    Err(e) => LoadMessage::Failed(format!("{e:#}")),
                });
            });
        let (tx_failed, rx_failed) = channel();
        let rx = match spawned {
            Ok(_) => rx,
            Err(e) => {
                let _ = tx_failed.send(LoadMessage::Failed(format!(
                    "cannot start the loading thread: {e}"
                )));
                rx_failed
            }
        };
        Self {
            rx,
            stage: "opening".into(),
            started: Instant::now(),
        }
    }

    pub fn stage_text(&self) -> String {
        format!(
            "{} ({:.1} s)",
            self.stage,
            self.started.elapsed().as_secs_f64()
        )
    }

    pub fn poll(&mut self) -> LoadPoll {
        loop {
            match self.rx.try_recv() {
                Ok(LoadMessage::Stage(s)) => self.stage = s,
                Ok(LoadMessage::Choose(root, rows)) => {
                    return LoadPoll::Choose(Picker { root, rows });
                }
                Ok(LoadMessage::Loaded(path, volume)) => {
                    return LoadPoll::Loaded(Box::new(Study::new(*volume, path)));
                }
                Ok(LoadMessage::Failed(e)) => return LoadPoll::Failed(e),
                Err(TryRecvError::Empty) => return LoadPoll::Pending,
                Err(TryRecvError::Disconnected) => {
                    return LoadPoll::Failed("the loading thread stopped unexpectedly".into());
                }
            }
        }
    }
}

fn load(
    source: Source,
    series_uid: Option<&str>,
    options: dicom::LoadOptions,
    send: &dyn Fn(LoadMessage),
) -> anyhow::Result<LoadMessage> {
    let path = match source {
        Source::Demo => {
            send(LoadMessage::Stage("preparing the demo study".into()));
            crate::common::demo::demo_study_dir()?
        }
        Source::Path(p) => p,
    };
    if tessera_dicom::image_file::format_of(&path).is_some() {
        send(LoadMessage::Stage(format!("reading {}", path.display())));
        let volume = tessera_dicom::image_file::read(&path)?;
        return Ok(LoadMessage::Loaded(path, Box::new(volume)));
    }
    send(LoadMessage::Stage(format!("scanning {}", path.display())));
    let report = dicom::scan(&path)?;
    let candidates: Vec<&dicom::SeriesFiles> = report.series.iter().collect();
    let series = match (series_uid, candidates.len()) {
        (_, 0) => anyhow::bail!(no_series(&path, &report)),
        (Some(uid), _) => candidates
            .into_iter()
            .find(|s| s.first().info.series_uid == uid)
            .ok_or_else(|| anyhow::anyhow!("series {uid} is not in {}", path.display()))?,
        (None, 1) => candidates[0],
        (None, _) => {
            return Ok(LoadMessage::Choose(
                path,
                report.series.iter().map(|s| row(s, options)).collect(),
            ));
        }
    };
    send(LoadMessage::Stage(format!(
        "decoding {} frame(s) of {}",
        series.frame_count(),
        path.display()
    )));
    let volume = dicom::load_series(series, options)?;
    Ok(LoadMessage::Loaded(path, Box::new(volume)))
}

fn no_series(path: &std::path::Path, report: &ScanReport) -> String {
    let mut text = format!(
        "no DICOM image series in {} ({} file(s) looked at, {} skipped)",
        path.display(),
        report.files_seen,
        report.skipped.len()
    );
    if let Some(first) = report.skipped.first() {
        text.push_str(&format!(
            "; e.g. {}: {}",
            first.path.display(),
            first.reason
        ));
    }
    text
}

/// A folder with several series: the user chooses one.
#[derive(Debug)]
pub struct Picker {
    pub root: PathBuf,
    pub rows: Vec<SeriesRow>,
}

impl Picker {
    /// The chosen series UID, once the user clicks one.
    pub fn ui(&mut self, ui: &mut egui::Ui) -> Option<String> {
        let mut chosen = None;
        ui.heading(format!(
            "{} holds {} series: choose one",
            self.root.display(),
            self.rows.len()
        ));
        egui::Grid::new("series_picker")
            .striped(true)
            .num_columns(5)
            .show(ui, |ui| {
                for h in ["", "Description", "Size", "Frames", "Warnings"] {
                    ui.strong(h);
                }
                ui.end_row();
                for r in &self.rows {
                    let openable = r.error.is_none();
                    if ui
                        .add_enabled(openable, egui::Button::new("Open"))
                        .clicked()
                    {
                        chosen = Some(r.series_uid.clone());
                    }
                    let description = if r.description.is_empty() {
                        "(no description)"
                    } else {
                        &r.description
                    };
                    let scout = if r.localizer { " [scout]" } else { "" };
                    ui.label(format!("{} {description}{scout}", r.modality));
                    ui.label(format_size(r.size));
                    ui.label(r.frames.to_string());
                    let notes: Vec<String> =
                        r.error.iter().chain(r.warnings.iter()).cloned().collect();
                    ui.label(notes.join("; "));
                    ui.end_row();
                }
            });
        chosen
    }
}

/// Zoom and pan of one view (zoom 1: the slice fits the view).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ViewTransform {
    pub zoom: f32,
    pub pan: egui::Vec2,
}

impl Default for ViewTransform {
    fn default() -> Self {
        Self {
            zoom: 1.0,
            pan: egui::Vec2::ZERO,
        }
    }
}

/// The slab thicknesses the S key steps through (then back to slices).
pub const SLAB_STEPS_MM: [f64; 3] = [5.0, 10.0, 20.0];

/// The presets on keys 1-5: lung, soft tissue, bone, brain, the file's own.
pub const PRESET_NAMES: [&str; 5] = ["lung", "soft tissue", "bone", "brain", "file"];

/// An open study and how it is being looked at.
pub struct Study {
    pub volume: Arc<Volume>,
    pub source: PathBuf,
    /// The crosshair, voxel `[x, y, z]`.
    pub cursor: [usize; 3],
    pub window: WindowLevel,
    /// The window the chosen model's findings are read in (its card's), last followed.
    pub reading_window: Option<WindowLevel>,
    pub views: [ViewTransform; 3],
    pub maximised: Option<Plane>,
    /// The view under the pointer this frame (set while the views are drawn): where the
    /// scroll keys go.
    pub hovered: Option<Plane>,
    /// Wheel scroll not yet a whole slice (a touchpad's small steps).
    pub(super) wheel_carried: f32,
    /// The ruler and "add finding" tools.
    pub tools: super::tools::ToolState,
    /// The selected finding's axes as handles, and the reader's correction of them.
    pub axes_edit: super::axes_edit::AxesEdit,
    /// Where each view's image was drawn last frame (axial, coronal, sagittal).
    pub view_images: [Option<egui::Rect>; 3],
    /// Each view (axial, coronal, sagittal) drawn as a thick slab (MIP, MinIP or average),
    /// or as slices.
    pub slabs: [Option<Slab>; 3],
    pub show_crosshair: bool,
    /// The views' corner text and orientation letters.
    pub show_text: bool,
    pub(super) textures: [Option<(TextureKey, egui::TextureHandle)>; 3],
}

impl std::fmt::Debug for Study {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Study")
            .field("source", &self.source)
            .field("size", &self.volume.geometry.size)
            .field("cursor", &self.cursor)
            .finish_non_exhaustive()
    }
}

/// What a cached slice texture shows.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct TextureKey {
    pub index: usize,
    pub window: WindowLevel,
    pub slab: Option<Slab>,
}

pub const PLANES: [Plane; 3] = [Plane::Axial, Plane::Coronal, Plane::Sagittal];

/// Where `plane` is in [`PLANES`] (the order of the views' state).
pub fn plane_index(plane: Plane) -> usize {
    PLANES.iter().position(|p| *p == plane).unwrap_or(0)
}

impl Study {
    pub fn new(volume: Volume, source: PathBuf) -> Self {
        let cursor = volume.geometry.size.map(|n| n / 2);
        let mut study = Self {
            volume: Arc::new(volume),
            source,
            cursor,
            window: WindowLevel::LUNG,
            reading_window: None,
            views: [ViewTransform::default(); 3],
            maximised: None,
            hovered: None,
            wheel_carried: 0.0,
            tools: super::tools::ToolState::default(),
            axes_edit: super::axes_edit::AxesEdit::default(),
            view_images: [None; 3],
            slabs: [None; 3],
            show_crosshair: true,
            show_text: true,
            textures: [None, None, None],
        };
        study.window = study.file_window().unwrap_or(WindowLevel::LUNG);
        study
    }

    /// The window the file suggests (its first WindowCenter/Width), if any.
    pub fn file_window(&self) -> Option<WindowLevel> {
        self.volume
            .info
            .window_hu
            .map(|(center, width)| WindowLevel {
                center_hu: center as f32,
                width_hu: width as f32,
            })
    }

    pub fn apply_preset(&mut self, i: usize) {
        let preset = match i {
            0 => Some(WindowLevel::LUNG),
            1 => Some(WindowLevel::SOFT_TISSUE),
            2 => Some(WindowLevel::BONE),
            3 => Some(WindowLevel::BRAIN),
            _ => self.file_window(),
        };
        if let Some(w) = preset {
            self.window = w;
        }
    }

    pub fn reset_views(&mut self) {
        self.views = [ViewTransform::default(); 3];
        self.maximised = None;
        self.window = self
            .reading_window
            .or(self.file_window())
            .unwrap_or(WindowLevel::LUNG);
    }

    /// Goes to the chosen model's reading window when it is new (the study was opened, or
    /// another model chosen); a window the reader set is kept otherwise.
    pub fn follow_reading_window(&mut self, window: Option<WindowLevel>) {
        if window != self.reading_window {
            self.reading_window = window;
            if let Some(w) = window {
                self.window = w;
            }
        }
    }

    /// The views a slab key acts on: the one under the pointer, else all three.
    fn slab_targets(plane: Option<Plane>) -> Vec<usize> {
        plane.map_or_else(|| vec![0, 1, 2], |p| vec![plane_index(p)])
    }

    /// The next slab thickness of [`SLAB_STEPS_MM`] (after the last: slices again), on the
    /// view `plane` or, with none, on all three (stepping from the first's).
    pub fn next_slab(&mut self, plane: Option<Plane>) {
        let targets = Self::slab_targets(plane);
        let from = targets.first().and_then(|k| self.slabs[*k]);
        let mode = from.map_or(SlabMode::Mip, |s| s.mode);
        let now = from.map_or(0.0, |s| s.thickness_mm);
        let next = SLAB_STEPS_MM
            .into_iter()
            .find(|t| *t > now + 1e-9)
            .map(|thickness_mm| Slab { thickness_mm, mode });
        for k in targets {
            self.slabs[k] = next;
        }
    }

    /// The next projection (MIP, MinIP, average) of the slab on `plane` or, with none, of
    /// every view's slab (from the first's).
    pub fn next_slab_mode(&mut self, plane: Option<Plane>) {
        let targets = Self::slab_targets(plane);
        let Some(from) = targets.iter().find_map(|k| self.slabs[*k].map(|s| s.mode)) else {
            return;
        };
        let i = SlabMode::ALL.iter().position(|m| *m == from).unwrap_or(0);
        let next = SlabMode::ALL[(i + 1) % SlabMode::ALL.len()];
        for k in targets {
            if let Some(slab) = &mut self.slabs[k] {
                slab.mode = next;
            }
        }
    }

    /// Moves the slice shown in `plane` by `delta`, within the volume.
    pub fn scroll(&mut self, plane: Plane, delta: i64) {
        let axis = plane.normal_axis();
        let n = self.volume.geometry.size[axis] as i64;
        if n > 0 {
            self.cursor[axis] = (self.cursor[axis] as i64 + delta).clamp(0, n - 1) as usize;
        }
    }

    /// Sets the crosshair to the voxel nearest `voxel` (fractional `[x, y, z]`).
    pub fn set_cursor(&mut self, voxel: [f64; 3]) {
        let size = self.volume.geometry.size;
        self.cursor = std::array::from_fn(|a| {
            (voxel[a].round().max(0.0) as usize).min(size[a].saturating_sub(1))
        });
    }
}
