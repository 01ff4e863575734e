//! Review of a finished run: score threshold, a sortable detection table, selection that moves
//! the views, seam flags, comparison with the previous run (parity), export, and the switches
//! of the overlays (seams, blend weights, lung field).

use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, channel};

use anyhow::Context as _;
use egui::Ui;
use image::ImageEncoder as _;
use tessera_core::parity::{ParityReport, Tolerances, compare};

use super::reading::{Reading, Step, decision_label};
use super::run_panel::RunRecord;
use super::study::Study;
use super::{gallery, measures};
use crate::common::settings::Profile;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortBy {
    Score,
    Size,
    Z,
}

/// A row of the table: a detection of the run, or a finding the reader added.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Row {
    Detection(usize),
    Added(usize),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportKind {
    Json,
    Csv,
}

/// What the user is reviewing.
#[derive(Debug)]
pub struct ReviewPanel {
    pub threshold: f32,
    /// The selected row: a detection or a finding the reader drew, never both.
    pub selected: Option<Row>,
    pub sort: SortBy,
    pub show_seams: bool,
    pub show_weights: bool,
    /// The run's lung field, when its model has one.
    pub show_lungs: bool,
    /// Highlight differences against the previous run.
    pub compare: bool,
    parity: Option<ParityReport>,
    /// The reader's decisions on the last run.
    pub reading: Reading,
    /// The findings as thumbnails.
    pub gallery: gallery::Gallery,
    /// Lines for the message bar (error?, text), taken by the app each frame.
    pub notices: Vec<(bool, String)>,
}

impl Default for ReviewPanel {
    fn default() -> Self {
        Self {
            threshold: 0.0,
            selected: None,
            sort: SortBy::Score,
            show_seams: false,
            show_weights: false,
            show_lungs: false,
            compare: false,
            parity: None,
            reading: Reading::default(),
            gallery: gallery::Gallery::default(),
            notices: Vec::new(),
        }
    }
}

impl ReviewPanel {
    /// A new study: a fresh review, the overlay toggles kept.
    pub fn study_changed(&mut self) {
        let mut reading = std::mem::take(&mut self.reading);
        reading.review = None;
        *self = Self {
            show_seams: self.show_seams,
            show_weights: self.show_weights,
            show_lungs: self.show_lungs,
            reading,
            notices: std::mem::take(&mut self.notices),
            ..Self::default()
        };
    }

    /// A new run: its threshold, and its parity against the previous one.
    pub fn run_finished(&mut self, runs: &[RunRecord], profile: &Profile) {
        self.selected = None;
        if let Some(last) = runs.last() {
            self.threshold = last.report.config.score_threshold;
            if let Some(notice) = self.reading.run_finished(&last.report, profile) {
                self.notices.push((false, notice));
            }
        }
        self.parity = match runs {
            [.., previous, last] => Some(compare(
                &previous.report,
                &last.report,
                Tolerances::default(),
            )),
            _ => None,
        };
    }

    /// Indices (in the previous run) of detections the last run does not have.
    pub fn only_in_previous(&self) -> Vec<usize> {
        self.parity
            .as_ref()
            .map_or_else(Vec::new, |p| p.only_a.clone())
    }

    /// Indices of the last run's detections at or above the threshold, in table order.
    pub fn rows(&self, record: &RunRecord) -> Vec<usize> {
        let d = &record.report.detections;
        let mut rows: Vec<usize> = (0..d.len())
            .filter(|&i| d[i].score >= self.threshold)
            .collect();
        match self.sort {
            SortBy::Score => rows.sort_by(|&a, &b| d[b].score.total_cmp(&d[a].score)),
            SortBy::Size => {
                rows.sort_by(|&a, &b| d[b].mean_diameter_mm().total_cmp(&d[a].mean_diameter_mm()));
            }
            SortBy::Z => {
                rows.sort_by(|&a, &b| d[a].center_lps_mm[2].total_cmp(&d[b].center_lps_mm[2]));
            }
        }
        rows
    }

    /// Selects detection `i` of `record` and moves the crosshair to its centre (axially, to
    /// the slice it was measured on).
    pub fn select(&mut self, i: usize, record: &RunRecord, study: Option<&mut Study>) {
        self.selected = Some(Row::Detection(i));
        if let (Some(d), Some(study)) = (record.report.detections.get(i), study) {
            study.set_cursor(gallery::detection_center_voxel(d));
        }
    }

    /// Selects the reader's finding `k` and moves the crosshair to it (axially, to the slice
    /// it was measured on).
    pub fn select_added(&mut self, k: usize, study: Option<&mut Study>) {
        self.selected = Some(Row::Added(k));
        let added = self.reading.review.as_ref().and_then(|r| r.added.get(k));
        if let (Some(a), Some(study)) = (added, study)
            && let Some(at) = gallery::added_center_voxel(a, &study.volume.geometry)
        {
            study.set_cursor(at);
        }
    }

    /// The table's rows in order: the detections at the threshold (`rows`, [`Self::rows`]),
    /// then the reader's own.
    fn table_rows(&self, rows: &[usize]) -> Vec<Row> {
        let added = self.reading.review.as_ref().map_or(0, |r| r.added.len());
        rows.iter()
            .copied()
            .map(Row::Detection)
            .chain((0..added).map(Row::Added))
            .collect()
    }

    /// The selected detection, when a detection is selected.
    pub fn selected_detection(&self) -> Option<usize> {
        match self.selected {
            Some(Row::Detection(i)) => Some(i),
            _ => None,
        }
    }

    /// The selected finding of the reader's, when one is selected.
    pub fn selected_added(&self) -> Option<usize> {
        match self.selected {
            Some(Row::Added(k)) => Some(k),
            _ => None,
        }
    }

    /// Moves through the findings in table order (the reader's after the detector's), or
    /// decides the selected one.
    pub fn apply(
        &mut self,
        step: Step,
        record: &RunRecord,
        study: Option<&mut Study>,
        reader: &str,
    ) {
        let rows = self.table_rows(&self.rows(record));
        let at = self
            .selected
            .and_then(|s| rows.iter().position(|r| *r == s));
        let target = match (step, at) {
            (Step::Decide(decision), _) => {
                let decided = match self.selected {
                    Some(Row::Detection(i)) => self.reading.decide(i, decision, reader),
                    Some(Row::Added(k)) => self.reading.decide_added(k, decision),
                    None => Ok(()),
                };
                if let Err(e) = decided {
                    self.notices.push((true, e));
                }
                return;
            }
            (Step::Next, Some(at)) => rows.get(at + 1).or(rows.last()),
            (Step::Previous, Some(at)) => rows.get(at.saturating_sub(1)),
            (Step::Next | Step::Previous, None) => rows.first(),
        };
        match target {
            Some(Row::Detection(i)) => self.select(*i, record, study),
            Some(Row::Added(k)) => self.select_added(*k, study),
            None => {}
        }
    }

    /// The review panel; returns an export the user asked for.
    pub fn ui(
        &mut self,
        ui: &mut Ui,
        runs: &[RunRecord],
        mut study: Option<&mut Study>,
        reader: &str,
    ) -> Option<ExportKind> {
        ui.heading("Detections");
        let Some(record) = runs.last() else {
            ui.weak("No run yet.");
            return None;
        };
        let mut export = None;
        ui.label(format!(
            "{}: {} detection(s), {:.1} s, peak {} ({})",
            record.label,
            record.report.detections.len(),
            record.report.stats.elapsed_s,
            tessera_plan::bytes::format_bytes(record.report.stats.memory.peak_memory_bytes),
            record.report.stats.device_name
        ));
        ui.add(egui::Slider::new(&mut self.threshold, 0.0..=1.0).text("score threshold"));
        ui.horizontal(|ui| {
            ui.checkbox(&mut self.show_seams, "Seams");
            ui.checkbox(&mut self.show_weights, "Blend weights");
            ui.add_enabled(
                record.lung_field.is_some(),
                egui::Checkbox::new(&mut self.show_lungs, "Lung field"),
            )
            .on_disabled_hover_text("This run's model has no lung field");
            ui.add_enabled(
                runs.len() >= 2,
                egui::Checkbox::new(&mut self.compare, "Compare with previous run"),
            );
        });
        if self.compare
            && let Some(p) = &self.parity
        {
            parity_ui(ui, p);
        }
        ui.horizontal(|ui| {
            if ui.button("Export JSON…").clicked() {
                export = Some(ExportKind::Json);
            }
            if ui.button("Export CSV…").clicked() {
                export = Some(ExportKind::Csv);
            }
        });
        if record.report.model.rescore_sha256.is_some() {
            ui.weak(format!(
                "Scores are rescored ({} candidates by the model's second stage); hover a score for the detector's own.",
                record.report.stats.rescored
            ));
        }
        if let Some(coarse) = &record.report.stats.coarse {
            ui.weak(format!(
                "A coarse pass at {:.1} mm ({} window(s), {:.1} s) added {} large candidate(s).",
                coarse.spacing_mm[0], coarse.windows, coarse.seconds, coarse.candidates
            ));
        }
        let rows = self.rows(record);
        let (step, problem) = self
            .reading
            .ui(ui, self.selected, record.report.detections.len());
        self.notices.extend(problem.map(|p| (true, p)));
        let added = self.reading.review.as_ref().map_or(0, |r| r.added.len());
        if self.selected_added().is_some_and(|k| k >= added) {
            self.selected = None; // removed
        }
        if let Some(step) = step {
            self.apply(step, record, study.as_deref_mut(), reader);
        }
        self.lung_rads_ui(ui, record, &rows);
        let only_now: Vec<usize> = if self.compare {
            self.parity
                .as_ref()
                .map_or_else(Vec::new, |p| p.only_b.clone())
        } else {
            Vec::new()
        };
        self.gallery_ui(ui, (record, runs.len()), &rows, study.as_deref_mut());
        self.table_ui(ui, record, &rows, &only_now, study);
        if rows.is_empty() {
            ui.weak("Nothing at this threshold.");
        }
        export
    }

    /// The gallery's switch and strip (the table's rows); a click selects the finding.
    fn gallery_ui(
        &mut self,
        ui: &mut Ui,
        (record, run): (&RunRecord, usize),
        rows: &[usize],
        study: Option<&mut Study>,
    ) {
        ui.checkbox(&mut self.gallery.open, "Gallery")
            .on_hover_text("Every finding at the threshold and every one you drew, as an axial crop (hover: coronal), in the table's order");
        let Some(open) = study.as_deref().filter(|_| self.gallery.open) else {
            return;
        };
        let g = &open.volume.geometry;
        let detections = &record.report.detections;
        let added = self.reading.review.as_ref().map(|r| r.added.as_slice());
        let items: Vec<gallery::Item> = self
            .table_rows(rows)
            .into_iter()
            .filter_map(|row| match row {
                Row::Detection(i) => Some(gallery::Item::detection(
                    detections.get(i)?,
                    i,
                    self.reading.decision(i),
                    g,
                )),
                Row::Added(k) => gallery::Item::added(added?.get(k)?, k, g),
            })
            .collect();
        let clicked = self.gallery.ui(ui, run, &items, open, self.selected);
        match clicked {
            Some(Row::Detection(i)) => self.select(i, record, study),
            Some(Row::Added(k)) => self.select_added(k, study),
            None => {}
        }
    }

    /// The selected finding's Lung-RADS category (the reader can change it), and the study's.
    fn lung_rads_ui(&mut self, ui: &mut Ui, record: &RunRecord, rows: &[usize]) {
        let detections = &record.report.detections;
        let review = self.reading.review.as_ref();
        if let Some(i) = self.selected_detection()
            && let Some(d) = detections.get(i)
            && let Some(choice) = measures::lung_rads_ui(ui, d, review, i)
            && let Err(e) = self.reading.set_lung_rads(i, choice)
        {
            self.notices.push((true, e));
        }
        let review = self.reading.review.as_ref();
        let added = self.selected_added().zip(review);
        if let Some((k, a)) = added.and_then(|(k, r)| Some((k, r.added.get(k)?)))
            && let Some(choice) = measures::added_lung_rads_ui(ui, a, k, &record.report)
            && let Err(e) = self.reading.set_added_lung_rads(k, choice)
        {
            self.notices.push((true, e));
        }
        let review = self.reading.review.as_ref();
        if let Some(study) = measures::study_lung_rads(&record.report, rows, review) {
            ui.label(format!(
                "Study Lung-RADS {} (suggestion): {}",
                study.category.label(),
                study.rule
            ))
            .on_hover_text(format!(
                "{}: the findings at this threshold, rejected ones left out; what the rules also need (priors, calcification, shape, airway findings) is the reader's",
                tessera_core::lungrads::VERSION
            ));
        }
    }

    /// The detections at the threshold, one row each; a click selects one (and moves the
    /// study's cursor to it). `*` marks those the previous run did not find.
    fn table_ui(
        &mut self,
        ui: &mut Ui,
        record: &RunRecord,
        rows: &[usize],
        only_now: &[usize],
        mut study: Option<&mut Study>,
    ) {
        egui::Grid::new("detections")
            .striped(true)
            .num_columns(8)
            .show(ui, |ui| {
                ui.strong("#");
                for (label, sort) in [
                    ("Score", SortBy::Score),
                    ("Ø mm", SortBy::Size),
                    ("Position LPS mm (z)", SortBy::Z),
                ] {
                    let marker = if self.sort == sort { " (sorted)" } else { "" };
                    let button = ui.button(format!("{label}{marker}"));
                    let button = match sort {
                        SortBy::Size => button.on_hover_text("Mean diameter: the mean of the axial long and short axes, as measured on the study (~: the box's, not segmented)"),
                        _ => button,
                    };
                    if button.clicked() {
                        self.sort = sort;
                    }
                }
                ui.strong("Type");
                ui.strong("Lung-RADS").on_hover_text("? : Tessera's suggestion, not yet the reader's");
                ui.strong("Seam");
                ui.strong("Decision");
                ui.end_row();
                for &i in rows {
                    let d = &record.report.detections[i];
                    let selected = self.selected == Some(Row::Detection(i));
                    let label = if only_now.contains(&i) {
                        format!("{}*", i + 1)
                    } else {
                        (i + 1).to_string()
                    };
                    if ui.selectable_label(selected, label).clicked() {
                        self.select(i, record, study.as_deref_mut());
                    }
                    let score =
                        ui.colored_label(super::colors::score(d.score), format!("{:.3}", d.score));
                    if let Some(detector) = d.detector_score {
                        score.on_hover_text(format!("rescored; the detector alone: {detector:.3}"));
                    }
                    let review = self.reading.review.as_ref();
                    ui.label(measures::size_text(d, review, i))
                        .on_hover_text(measures::size_hover(d));
                    ui.label(format!(
                        "{:.1}, {:.1}, {:.1}",
                        d.center_lps_mm[0], d.center_lps_mm[1], d.center_lps_mm[2]
                    ));
                    let kind = d.measurements.as_ref().and_then(|m| m.nodule_type);
                    ui.label(kind.map_or("", |k| k.label()));
                    let review = self.reading.review.as_ref();
                    match measures::lung_rads(d, review, i) {
                        Some((c, suggested, rule)) => {
                            ui.label(measures::lung_rads_text(c, suggested)).on_hover_text(rule);
                        }
                        None => {
                            ui.label("");
                        }
                    }
                    ui.label(if d.crosses_seam { "crosses" } else { "" });
                    let (text, color) = decision_label(self.reading.decision(i));
                    ui.colored_label(color, text);
                    ui.end_row();
                }
                self.added_rows_ui(ui, &record.report, study);
            });
    }

    /// The reader's own findings, after the detector's: `R1`, `R2`... with their size, type,
    /// category and decision; a click selects one.
    fn added_rows_ui(
        &mut self,
        ui: &mut Ui,
        report: &tessera_core::report::DetectionReport,
        study: Option<&mut Study>,
    ) {
        let Some(review) = &self.reading.review else {
            return;
        };
        let mut clicked = None;
        for (k, a) in review.added.iter().enumerate() {
            let selected = self.selected == Some(Row::Added(k));
            if ui
                .selectable_label(selected, format!("R{}", k + 1))
                .on_hover_text("A finding the reader drew")
                .clicked()
            {
                clicked = Some(k);
            }
            ui.colored_label(super::colors::ADDED, "reader");
            let (size, hover) = measures::added_size(a);
            ui.label(size).on_hover_text(hover);
            let [x, y, z] = a.center_lps_mm;
            ui.label(format!("{x:.1}, {y:.1}, {z:.1}"));
            let kind = a.measurements.as_ref().and_then(|m| m.nodule_type);
            ui.label(kind.map_or("", |k| k.label()));
            ui.label(measures::added_lung_rads(a, report).unwrap_or_default());
            ui.label("");
            let (text, color) = decision_label(Some(a.decision()));
            ui.colored_label(color, text);
            ui.end_row();
        }
        if let Some(k) = clicked {
            self.select_added(k, study);
        }
    }
}

/// The parity line against the previous run.
fn parity_ui(ui: &mut Ui, p: &ParityReport) {
    let text = format!(
        "Parity with the previous run: {} matched, {} only before (magenta), {} only now; max score difference {:.2e}, max box face {:.2} voxels: {}",
        p.pairs.len(),
        p.only_a.len(),
        p.only_b.len(),
        p.max_score_difference,
        p.max_face_difference_voxels,
        if p.within_tolerance {
            "within tolerance"
        } else {
            "OUT of tolerance"
        }
    );
    let color = if p.within_tolerance {
        ui.visuals().text_color()
    } else {
        ui.visuals().warn_fg_color
    };
    ui.colored_label(color, text);
}

/// Writes the run's detections like `tessera detect` does (det.json or the LUNA16 CSV) to
/// `path`, refused when that would write into or over the study's files (`inputs`). A JSON
/// export takes the reader's review along (`NAME.review.json` beside it), as a set.
pub fn export(
    record: &RunRecord,
    kind: ExportKind,
    path: &Path,
    inputs: &[PathBuf],
    review: Option<&tessera_core::review::Review>,
) -> anyhow::Result<()> {
    tessera_dicom::io::check_output(path, inputs, false)?;
    let written = match (kind, review.filter(|r| !r.findings.is_empty())) {
        (ExportKind::Json, Some(review)) => {
            let review_path = review_beside(path);
            tessera_dicom::io::check_output(&review_path, inputs, false)?;
            let mut det = serde_json::to_vec_pretty(&record.report)?;
            det.push(b'\n');
            let mut decisions = serde_json::to_vec_pretty(review)?;
            decisions.push(b'\n');
            tessera_dicom::io::write_set(&[(path, &det), (&review_path, &decisions)])
                .map_err(anyhow::Error::from)
        }
        (ExportKind::Json, None) => record.report.write_json(path).map_err(anyhow::Error::from),
        (ExportKind::Csv, _) => record
            .report
            .write_luna16_csv(path)
            .map_err(anyhow::Error::from),
    };
    written.with_context(|| format!("exporting to {}", path.display()))
}

/// `det.json` -> `det.review.json`.
pub fn review_beside(det: &Path) -> PathBuf {
    let stem = det
        .file_stem()
        .map_or_else(|| "det".into(), |s| s.to_string_lossy().into_owned());
    det.with_file_name(format!("{stem}.review.json"))
}

/// A screenshot of the next frame, encoded to PNG and written atomically.
#[derive(Debug)]
pub struct ScreenshotJob {
    rx: Receiver<Result<PathBuf, String>>,
}

impl ScreenshotJob {
    pub fn start(ctx: &egui::Context, path: PathBuf) -> Self {
        let (tx, rx) = channel();
        let repaint = ctx.clone();
        ctx.request_screenshot(move |image| {
            let result = write_png(&image, &path).map(|()| path.clone());
            let _ = tx.send(result.map_err(|e| format!("{e:#}")));
            repaint.request_repaint();
        });
        Self { rx }
    }

    pub fn poll(&mut self) -> Option<Result<PathBuf, String>> {
        self.rx.try_recv().ok()
    }
}

/// Encodes `image` as PNG and writes it atomically.
pub fn write_png(image: &egui::ColorImage, path: &Path) -> anyhow::Result<()> {
    let [w, h] = image.size;
    let rgba: Vec<u8> = image.pixels.iter().flat_map(|c| c.to_array()).collect();
    let mut bytes = Vec::new();
    image::codecs::png::PngEncoder::new(&mut bytes)
        .write_image(&rgba, w as u32, h as u32, image::ExtendedColorType::Rgba8)
        .context("encoding the PNG")?;
    tessera_dicom::io::write_atomic(path, &bytes)
        .with_context(|| format!("writing {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn png_export_round_trips() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("layout.png");
        let mut image = egui::ColorImage::filled([3, 2], egui::Color32::from_rgb(10, 20, 30));
        image.pixels[4] = egui::Color32::from_rgb(200, 100, 50);
        write_png(&image, &path)?;
        let back = image::load_from_memory(&std::fs::read(&path)?)?.to_rgba8();
        assert_eq!(back.dimensions(), (3, 2));
        assert_eq!(back.get_pixel(1, 1).0, [200, 100, 50, 255]);
        assert_eq!(back.get_pixel(0, 0).0, [10, 20, 30, 255]);
        Ok(())
    }
}
