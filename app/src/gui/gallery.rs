//! The findings gallery: every finding at the threshold, and every one the reader drew, as a
//! small axial crop centred on it (its coronal on hover), with its score and the reader's
//! decision, in the table's order; a click goes there.

use std::collections::HashMap;

use egui::{Color32, Sense, Stroke, StrokeKind, TextureHandle, Ui, vec2};
use tessera_core::pipeline::Detection;
use tessera_core::review::{AddedFinding, Decision};
use tessera_dicom::Geometry;
use tessera_dicom::view::{Plane, WindowLevel, crop_image};

use super::reading::decision_label;
use super::review::Row;
use super::study::Study;

/// Thumbnails' side on screen, and in image pixels.
const THUMB_PX: f32 = 96.0;
const CROP_PX: usize = 96;
/// The crop reaches this many box sides each side of the centre, at least this far.
const CROP_REACH: f64 = 1.0;
const MIN_HALF_MM: f64 = 12.0;

/// One thumbnail: a row of the table, where it is and how large, and what it says.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    pub row: Row,
    /// Its centre in continuous study voxels (voxel `i` centred on `i`), on the axial slice
    /// its axes were measured on when they were.
    pub center_voxel: [f64; 3],
    /// Its largest side, mm: how far the crop reaches.
    pub side_mm: f64,
    /// Under the crop: `3 · 0.91`, or `R1` for the reader's.
    pub caption: String,
    pub decision: Option<Decision>,
}

/// Where a detection is shown: its box's centre in continuous study voxels (voxel `i` centred
/// on `i`), axially on the slice its axes were measured on. The table, the keys and the
/// gallery all go here.
pub fn detection_center_voxel(d: &Detection) -> [f64; 3] {
    let b = &d.box_voxel;
    let mut at: [f64; 3] =
        std::array::from_fn(|a| (b.min[a] + b.max[a].max(b.min[a] + 1)) as f64 / 2.0 - 0.5);
    if let Some(m) = &d.measurements {
        at[2] = m.axes.slice as f64;
    }
    at
}

/// Where the reader's finding is shown: where it was drawn, axially on its measured slice;
/// `None` when the study's geometry cannot place it.
pub fn added_center_voxel(a: &AddedFinding, g: &Geometry) -> Option<[f64; 3]> {
    let mut at = g.world_from_voxel.inverse()?.apply(a.center_lps_mm);
    if let Some(m) = &a.measurements {
        at[2] = m.axes.slice as f64;
    }
    Some(at)
}

impl Item {
    /// Detection `i` of a run: its box's centre, on its measured slice.
    pub fn detection(d: &Detection, i: usize, decision: Option<Decision>, g: &Geometry) -> Self {
        let b = &d.box_voxel;
        Self {
            row: Row::Detection(i),
            center_voxel: detection_center_voxel(d),
            side_mm: (0..3)
                .map(|a| (b.max[a] - b.min[a]) as f64 * g.spacing_mm[a])
                .fold(0.0, f64::max),
            caption: format!("{} · {:.2}", i + 1, d.score),
            decision,
        }
    }

    /// The reader's finding `k`, where it was drawn (on its measured slice when measured);
    /// `None` when the study's geometry cannot place it.
    pub fn added(a: &AddedFinding, k: usize, g: &Geometry) -> Option<Self> {
        Some(Self {
            row: Row::Added(k),
            center_voxel: added_center_voxel(a, g)?,
            side_mm: a.size_mm.into_iter().fold(0.0, f64::max),
            caption: format!("R{}", k + 1),
            decision: Some(a.decision()),
        })
    }
}

/// What a cached thumbnail shows.
#[derive(Debug, Clone, Copy, PartialEq)]
struct ThumbKey {
    run: usize,
    center_voxel: [f64; 3],
    half_mm: f64,
    plane: Plane,
    window: WindowLevel,
}

#[derive(Default)]
pub struct Gallery {
    pub open: bool,
    thumbs: HashMap<(Row, Plane), (ThumbKey, TextureHandle)>,
}

impl std::fmt::Debug for Gallery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gallery")
            .field("open", &self.open)
            .field("thumbs", &self.thumbs.len())
            .finish()
    }
}

impl Gallery {
    /// The strip of `items` (the table's order) of run number `run`; returns the row clicked.
    pub fn ui(
        &mut self,
        ui: &mut Ui,
        run: usize,
        items: &[Item],
        study: &Study,
        selected: Option<Row>,
    ) -> Option<Row> {
        let mut clicked = None;
        egui::ScrollArea::horizontal()
            .id_salt("gallery")
            .show(ui, |ui| {
                ui.horizontal(|ui| {
                    for item in items {
                        if self.item_ui(ui, run, item, study, selected) {
                            clicked = Some(item.row);
                        }
                    }
                });
            });
        clicked
    }

    /// One thumbnail with its caption and decision; whether it was clicked.
    fn item_ui(
        &mut self,
        ui: &mut Ui,
        run: usize,
        item: &Item,
        study: &Study,
        selected: Option<Row>,
    ) -> bool {
        let Some(axial) = self.thumb(ui, run, item, Plane::Axial, study) else {
            return false;
        };
        ui.vertical(|ui| {
            let (rect, response) = ui.allocate_exact_size(vec2(THUMB_PX, THUMB_PX), Sense::click());
            let name = match item.row {
                Row::Detection(i) => format!("finding {} thumbnail", i + 1),
                Row::Added(k) => format!("reader finding R{} thumbnail", k + 1),
            };
            response.widget_info(|| egui::WidgetInfo::labeled(egui::Role::Button, true, &name));
            let uv = egui::Rect::from_min_max(egui::pos2(0.0, 0.0), egui::pos2(1.0, 1.0));
            ui.painter().image(axial, rect, uv, Color32::WHITE);
            let (text, color) = decision_label(item.decision);
            let frame = if selected == Some(item.row) {
                Stroke::new(2.5, super::colors::SELECTED)
            } else {
                Stroke::new(1.0, color)
            };
            ui.painter()
                .rect_stroke(rect, 0.0, frame, StrokeKind::Inside);
            let response = response.on_hover_ui(|ui| {
                if let Some(coronal) = self.thumb(ui, run, item, Plane::Coronal, study) {
                    ui.label("Coronal");
                    ui.image((coronal, vec2(2.0 * THUMB_PX, 2.0 * THUMB_PX)));
                }
            });
            ui.label(&item.caption);
            ui.colored_label(color, if text.is_empty() { "—" } else { text });
            response.clicked()
        })
        .inner
    }

    /// The crop of `item` on `plane`, made again only when the run, the finding's place, the
    /// plane or the window changes.
    fn thumb(
        &mut self,
        ui: &Ui,
        run: usize,
        item: &Item,
        plane: Plane,
        study: &Study,
    ) -> Option<egui::TextureId> {
        let key = ThumbKey {
            run,
            center_voxel: item.center_voxel,
            half_mm: (CROP_REACH * item.side_mm).max(MIN_HALF_MM),
            plane,
            window: study.window,
        };
        if let Some((cached, handle)) = self.thumbs.get(&(item.row, plane))
            && *cached == key
        {
            return Some(handle.id());
        }
        let image = crop_image(
            &study.volume.voxels,
            &study.volume.geometry,
            plane,
            key.center_voxel,
            key.half_mm,
            CROP_PX,
            study.window,
        );
        let color = egui::ColorImage::from_gray([image.width, image.height], &image.pixels);
        let handle = ui.ctx().load_texture(
            format!("gallery-{:?}-{plane:?}", item.row),
            color,
            egui::TextureOptions::LINEAR,
        );
        let id = handle.id();
        self.thumbs.insert((item.row, plane), (key, handle));
        Some(id)
    }
}
