//! File > Open batch results: a batch's studies (its `ID/batch.json` records) as a list; opening
//! a row opens that study with the run's detections from its det.json, and the reader's stored
//! review of that run when there is one, so that a reader goes through a batch study by study.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use egui::Ui;
use tessera_core::report::DetectionReport;
use tessera_dicom::volume::{Volume, format_size};
use tessera_plan::bytes::format_bytes;
use tessera_plan::model::{Model, ModelCard};
use tessera_plan::plan::TileSpec;
use tessera_plan::request::DetectConfig;

use super::run_panel::RunRecord;
use crate::common::batch::{StudyRecord, collect};

/// The batch results window.
#[derive(Debug, Default)]
pub struct BatchResults {
    /// The batch's folder, once one is open.
    pub dir: Option<PathBuf>,
    pub records: Vec<StudyRecord>,
    pub open: bool,
}

/// A row the reader chose: the study to open, and the run to show on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chosen {
    pub study: PathBuf,
    pub detections: PathBuf,
}

impl BatchResults {
    /// Reads the batch in `dir` and opens the window.
    pub fn load(&mut self, dir: PathBuf) -> anyhow::Result<()> {
        let records = collect(&dir)
            .with_context(|| format!("reading the batch results in {}", dir.display()))?;
        if records.is_empty() {
            anyhow::bail!(
                "{} holds no batch results (no ID/batch.json)",
                dir.display()
            );
        }
        self.records = records;
        self.dir = Some(dir);
        self.open = true;
        Ok(())
    }

    /// The row `id`'s study and det.json, when it ran.
    pub fn choose(&self, id: &str) -> Option<Chosen> {
        let dir = self.dir.as_ref()?;
        let record = self.records.iter().find(|r| r.id == id && r.is_done())?;
        Some(Chosen {
            study: record.study_path.clone(),
            detections: dir.join(&record.id).join("det.json"),
        })
    }

    /// The window; the row the reader opened, if any.
    pub fn ui(&mut self, ctx: &egui::Context) -> Option<Chosen> {
        let mut chosen = None;
        let mut open = self.open;
        egui::Window::new("Batch results")
            .open(&mut open)
            .show(ctx, |ui| chosen = self.table_ui(ui));
        self.open = open && chosen.is_none();
        chosen
    }

    fn table_ui(&self, ui: &mut Ui) -> Option<Chosen> {
        let failed = self.records.iter().filter(|r| !r.is_done()).count();
        if let Some(dir) = &self.dir {
            ui.label(dir.display().to_string());
        }
        ui.label(format!(
            "{} studies: {} done, {failed} failed",
            self.records.len(),
            self.records.len() - failed
        ));
        let mut chosen = None;
        egui::ScrollArea::vertical()
            .max_height(400.0)
            .show(ui, |ui| {
                egui::Grid::new("batch_rows")
                    .striped(true)
                    .num_columns(6)
                    .show(ui, |ui| {
                        for h in [
                            "",
                            "Study",
                            "Status",
                            "Detections",
                            "Peak memory",
                            "Plan or error",
                        ] {
                            ui.strong(h);
                        }
                        ui.end_row();
                        for r in &self.records {
                            let open = ui
                                .add_enabled(r.is_done(), egui::Button::new("Open"))
                                .on_hover_text(format!("Open {} with this run's detections", r.id));
                            if open.clicked() {
                                chosen = self.choose(&r.id);
                            }
                            ui.label(&r.id).on_hover_text(&r.study);
                            ui.label(r.status.to_string());
                            ui.label(r.detections.to_string());
                            ui.label(if r.peak_memory_bytes > 0 {
                                format_bytes(r.peak_memory_bytes)
                            } else {
                                "-".into()
                            });
                            ui.label(r.error.as_deref().unwrap_or(&r.plan));
                            ui.end_row();
                        }
                    });
            });
        chosen
    }
}

/// A finished run rebuilt from its det.json on `volume`: the model it names (found among
/// `models` by its hash; its folder is returned too), the plan its settings make, the grid it
/// ran on.
pub fn run_from_file(
    path: &Path,
    volume: &Volume,
    models: &[PathBuf],
) -> anyhow::Result<(RunRecord, PathBuf)> {
    let report = DetectionReport::read_json(path)?;
    // Cards first (no hashing), then the one model whose card names the run's hash.
    let (model, model_dir) = models
        .iter()
        .filter(|dir| ModelCard::read(dir).is_ok_and(|c| c.sha256 == report.model.sha256))
        .find_map(|dir| Model::load(dir).ok().map(|m| (m, dir.clone())))
        .with_context(|| {
            format!(
                "the model of {} ({}, sha256 {}) is not among the installed models",
                path.display(),
                report.model.name,
                report.model.sha256
            )
        })?;
    let defaults = DetectConfig::defaults_for(&model);
    let config = DetectConfig {
        tile: TileSpec {
            patch: report.config.patch,
            overlap: report.config.overlap,
            blend: report.config.blend,
            allow_single_pass: true,
            memory_budget_bytes: None,
        },
        ..defaults
    };
    let model_geometry = tessera_plan::request::model_geometry(&volume.geometry, &model);
    let plan = tessera_plan::request::plan_for(model_geometry.size, &model, &config, 0)
        .with_context(|| format!("the plan of {}", path.display()))?;
    let record = RunRecord {
        label: format!(
            "batch {} {}",
            format_size(report.config.patch),
            report.config.blend
        ),
        report,
        plan,
        model_geometry,
        lung_field: None,
    };
    Ok((record, model_dir))
}
