//! The findings gallery: every finding at the threshold as a small axial crop centred on it
//! (its coronal on hover), with its score and the reader's decision, in the table's order;
//! a click goes there.

use std::collections::HashMap;

use egui::{Color32, Sense, Stroke, StrokeKind, TextureHandle, Ui, vec2};
use tessera_dicom::view::{Plane, WindowLevel, crop_image};

use super::reading::decision_label;
use super::run_panel::RunRecord;
use super::study::Study;

/// Thumbnails' side on screen, and in image pixels.
const THUMB_PX: f32 = 96.0;
const CROP_PX: usize = 96;
/// The crop reaches this many box sides each side of the centre, at least this far.
const CROP_REACH: f64 = 1.0;
const MIN_HALF_MM: f64 = 12.0;

/// What a cached thumbnail shows.
#[derive(Debug, Clone, Copy, PartialEq)]
struct ThumbKey {
    run: usize,
    index: usize,
    plane: Plane,
    window: WindowLevel,
}

#[derive(Default)]
pub struct Gallery {
    pub open: bool,
    thumbs: HashMap<(usize, Plane), (ThumbKey, TextureHandle)>,
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
    /// The strip of `rows` (the table's order) of `record` (run number `run`); returns the
    /// finding clicked.
    pub fn ui(
        &mut self,
        ui: &mut Ui,
        (record, run): (&RunRecord, usize),
        rows: &[usize],
        study: &Study,
        selected: Option<usize>,
        decision: &dyn Fn(usize) -> Option<tessera_core::review::Decision>,
    ) -> Option<usize> {
        let mut clicked = None;
        egui::ScrollArea::horizontal()
            .id_salt("gallery")
            .show(ui, |ui| {
                ui.horizontal(|ui| {
                    for &i in rows {
                        let Some(axial) = self.thumb(ui, (record, run), i, Plane::Axial, study)
                        else {
                            continue;
                        };
                        let d = &record.report.detections[i];
                        ui.vertical(|ui| {
                            let (rect, response) =
                                ui.allocate_exact_size(vec2(THUMB_PX, THUMB_PX), Sense::click());
                            response.widget_info(|| {
                                egui::WidgetInfo::labeled(
                                    egui::Role::Button,
                                    true,
                                    format!("finding {} thumbnail", i + 1),
                                )
                            });
                            let uv = egui::Rect::from_min_max(
                                egui::pos2(0.0, 0.0),
                                egui::pos2(1.0, 1.0),
                            );
                            ui.painter().image(axial, rect, uv, Color32::WHITE);
                            let (text, color) = decision_label(decision(i));
                            let frame = if selected == Some(i) {
                                Stroke::new(2.5, super::colors::SELECTED)
                            } else {
                                Stroke::new(1.0, color)
                            };
                            ui.painter()
                                .rect_stroke(rect, 0.0, frame, StrokeKind::Inside);
                            let response = response.on_hover_ui(|ui| {
                                if let Some(coronal) =
                                    self.thumb(ui, (record, run), i, Plane::Coronal, study)
                                {
                                    ui.label("Coronal");
                                    ui.image((coronal, vec2(2.0 * THUMB_PX, 2.0 * THUMB_PX)));
                                }
                            });
                            if response.clicked() {
                                clicked = Some(i);
                            }
                            ui.label(format!("{} · {:.2}", i + 1, d.score));
                            ui.colored_label(color, if text.is_empty() { "—" } else { text });
                        });
                    }
                });
            });
        clicked
    }

    /// The crop of finding `i` on `plane`, made once per run, finding, plane and window.
    fn thumb(
        &mut self,
        ui: &Ui,
        (record, run): (&RunRecord, usize),
        i: usize,
        plane: Plane,
        study: &Study,
    ) -> Option<egui::TextureId> {
        let d = record.report.detections.get(i)?;
        let key = ThumbKey {
            run,
            index: i,
            plane,
            window: study.window,
        };
        if let Some((cached, handle)) = self.thumbs.get(&(i, plane))
            && *cached == key
        {
            return Some(handle.id());
        }
        let g = &study.volume.geometry;
        let b = &d.box_voxel;
        let mut center: [f64; 3] =
            std::array::from_fn(|a| (b.min[a] + b.max[a]) as f64 / 2.0 - 0.5);
        // On the slice its axes were measured on, where it is widest.
        if let Some(m) = &d.measurements {
            center[2] = m.axes.slice as f64;
        }
        let side_mm = (0..3)
            .map(|a| (b.max[a] - b.min[a]) as f64 * g.spacing_mm[a])
            .fold(0.0, f64::max);
        let half_mm = (CROP_REACH * side_mm).max(MIN_HALF_MM);
        let image = crop_image(
            &study.volume.voxels,
            g,
            plane,
            center,
            half_mm,
            CROP_PX,
            study.window,
        );
        let color = egui::ColorImage::from_gray([image.width, image.height], &image.pixels);
        let handle = ui.ctx().load_texture(
            format!("gallery-{i}-{plane:?}"),
            color,
            egui::TextureOptions::LINEAR,
        );
        let id = handle.id();
        self.thumbs.insert((i, plane), (key, handle));
        Some(id)
    }
}
