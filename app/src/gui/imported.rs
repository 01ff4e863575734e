//! An SR's findings over the open study (File > Open SR, `tessera view --sr`): Tessera's own
//! reports or any TID 1500 report with SCOORD3D regions in the study's frame of reference.

use std::path::{Path, PathBuf};

use egui::Ui;
use tessera_core::sr::SrFinding;
use tessera_dicom::volume::StudyVoxelBox;

use super::reading::decision_label;
use super::study::Study;

/// The findings of one SR, placed on the open study's voxels.
#[derive(Debug, Clone)]
pub struct Imported {
    pub path: PathBuf,
    pub findings: Vec<SrFinding>,
    /// Each finding's voxels (`None`: outside the volume).
    pub boxes: Vec<Option<StudyVoxelBox>>,
    pub selected: Option<usize>,
}

impl Imported {
    /// Reads `path` and places its findings on `study`; refused when the SR is about another
    /// series or frame of reference (its coordinates would land on the wrong anatomy).
    pub fn load(path: &Path, study: &Study) -> anyhow::Result<Self> {
        let read = tessera_dicom::dicom::sr::read_sr(path)?;
        let findings = tessera_core::sr::findings(&read, path)?;
        let info = &study.volume.info;
        if let Some(series) = &read.evidence_series_uid
            && *series != info.series_uid
        {
            anyhow::bail!(
                "{} reports on series {series}, but the open series is {}: open that series first",
                path.display(),
                info.series_uid
            );
        }
        if let Some(other) = findings.iter().find(|f| {
            !info.frame_of_reference_uid.is_empty()
                && f.frame_of_reference_uid != info.frame_of_reference_uid
        }) {
            anyhow::bail!(
                "{}: finding '{}' is in frame of reference {}, the open series in {}",
                path.display(),
                other.tracking_id,
                other.frame_of_reference_uid,
                info.frame_of_reference_uid
            );
        }
        let boxes = findings
            .iter()
            .map(|f| f.study_box(&study.volume.geometry))
            .collect();
        Ok(Self {
            path: path.to_path_buf(),
            findings,
            boxes,
            selected: None,
        })
    }

    /// The list of findings; a click moves the views to one.
    pub fn ui(&mut self, ui: &mut Ui, study: Option<&mut Study>) {
        ui.heading("SR findings");
        ui.label(format!(
            "{}: {} finding(s)",
            self.path.display(),
            self.findings.len()
        ));
        let mut clicked = None;
        egui::Grid::new("sr_findings")
            .striped(true)
            .num_columns(4)
            .show(ui, |ui| {
                for h in ["Finding", "Score", "Decision", "Note"] {
                    ui.strong(h);
                }
                ui.end_row();
                for (i, f) in self.findings.iter().enumerate() {
                    let placed = self.boxes[i].is_some();
                    if ui
                        .add_enabled(
                            placed,
                            egui::Button::selectable(self.selected == Some(i), &f.tracking_id),
                        )
                        .on_disabled_hover_text("outside the open volume")
                        .clicked()
                    {
                        clicked = Some(i);
                    }
                    ui.label(f.score.map_or_else(|| "-".into(), |s| format!("{s:.3}")));
                    let (text, color) = decision_label(f.decision);
                    ui.colored_label(color, text);
                    ui.label(&f.note);
                    ui.end_row();
                }
            });
        if let (Some(i), Some(study)) = (clicked, study) {
            self.select(i, study);
        }
    }

    /// Selects finding `i` and moves the views to its centre.
    pub fn select(&mut self, i: usize, study: &mut Study) {
        self.selected = Some(i);
        if let Some(Some(b)) = self.boxes.get(i) {
            study.set_cursor(std::array::from_fn(|a| {
                (b.min[a] + b.max[a] - 1) as f64 / 2.0
            }));
        }
    }
}
