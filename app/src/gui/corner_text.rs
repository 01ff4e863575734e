//! The text over each view: orientation letters, patient, study and series, slice and
//! position (slices and voxels counted from 1), the slab, window/level and zoom, the HU under
//! the pointer, and a scale bar; each on a dark backing, so that it reads over bright anatomy.

use egui::{Align2, Color32, FontId, Pos2, Rect, Stroke, pos2, vec2};
use tessera_dicom::view::{Plane, orientation_letters};

use super::study::{Study, plane_index};

const MARGIN: f32 = 6.0;

/// A painter whose text sits on a dark backing.
pub struct Backed<'a>(pub &'a egui::Painter);

impl Backed<'_> {
    pub fn text(&self, at: Pos2, align: Align2, text: &str, font: FontId, color: Color32) {
        let galley = self.0.layout_no_wrap(text.to_owned(), font, color);
        let rect = align.anchor_size(at, galley.size());
        self.0
            .rect_filled(rect.expand(2.0), 2.0, Color32::from_black_alpha(150));
        self.0.galley(rect.min, galley, color);
    }
}

/// Everything over `plane`'s view in `rect`, unless the reader hid it; `hovered`: the voxel
/// under the pointer.
pub fn draw(
    painter: &egui::Painter,
    study: &Study,
    (plane, rect): (Plane, Rect),
    hovered: Option<[usize; 3]>,
    scale_px_per_mm: f32,
) {
    if !study.show_text {
        return;
    }
    let backed = Backed(painter);
    letters(&backed, study, plane, rect);
    corners(&backed, study, plane, rect);
    if let Some(voxel) = hovered
        && let Some(hu) = study.volume.voxels.hu_at(voxel)
    {
        let [x, y, z] = voxel.map(|v| v + 1);
        backed.text(
            pos2(rect.max.x - MARGIN, rect.min.y + MARGIN + 16.0),
            Align2::RIGHT_TOP,
            &format!("{hu:.0} HU\nx {x}, y {y}, slice {z}"),
            FontId::monospace(12.0),
            Color32::from_gray(220),
        );
    }
    scale_bar(painter, rect, scale_px_per_mm);
}

/// The patient directions at the four edges.
fn letters(painter: &Backed<'_>, study: &Study, plane: Plane, rect: Rect) {
    let [left, right, top, bottom] = orientation_letters(&study.volume.geometry, plane);
    let c = rect.center();
    for (letter, at, align) in [
        (left, pos2(rect.min.x + MARGIN, c.y), Align2::LEFT_CENTER),
        (right, pos2(rect.max.x - MARGIN, c.y), Align2::RIGHT_CENTER),
        (top, pos2(c.x, rect.min.y + MARGIN), Align2::CENTER_TOP),
        (
            bottom,
            pos2(c.x, rect.max.y - MARGIN),
            Align2::CENTER_BOTTOM,
        ),
    ] {
        painter.text(
            at,
            align,
            &letter.to_string(),
            FontId::proportional(16.0),
            Color32::from_rgb(255, 210, 80),
        );
    }
}

/// Who and what (top left), where (bottom left), how it is shown (bottom right).
fn corners(painter: &Backed<'_>, study: &Study, plane: Plane, rect: Rect) {
    let font = FontId::monospace(12.0);
    let color = Color32::from_gray(220);
    let g = &study.volume.geometry;
    let info = &study.volume.info;
    let n = plane.normal_axis();
    let index = study.cursor[n];
    let mut centre = [0.0; 3];
    centre[n] = index as f64;
    let position_mm = g.world_from_voxel.apply(centre)[n];
    let top_left = format!(
        "{plane:?}\n{}\n{}\n{}",
        non_empty(&info.patient_name, &info.patient_id),
        non_empty(&info.study_description, &info.study_date),
        non_empty(&info.series_description, &info.series_uid),
    );
    let slab = study.slabs[plane_index(plane)].map_or(String::new(), |s| {
        format!(
            "\n{} {:.0} mm (planes over {:.1} mm)",
            s.mode.label(),
            s.thickness_mm,
            s.covered_mm(g, plane)
        )
    });
    let bottom_left = format!(
        "slice {} / {}\n{position_mm:.1} mm{slab}",
        index + 1,
        g.size[n]
    );
    let zoom = study.views[plane_index(plane)].zoom;
    let bottom_right = format!(
        "W {:.0} L {:.0}\nzoom {zoom:.2}",
        study.window.width_hu, study.window.center_hu,
    );
    let bottom = rect.max.y - MARGIN - 18.0;
    for (text, at, align) in [
        (
            top_left,
            rect.min + vec2(MARGIN, MARGIN + 16.0),
            Align2::LEFT_TOP,
        ),
        (
            bottom_left,
            pos2(rect.min.x + MARGIN, bottom),
            Align2::LEFT_BOTTOM,
        ),
        (
            bottom_right,
            pos2(rect.max.x - MARGIN, bottom),
            Align2::RIGHT_BOTTOM,
        ),
    ] {
        painter.text(at, align, &text, font.clone(), color);
    }
}

fn non_empty<'a>(a: &'a str, b: &'a str) -> &'a str {
    if a.trim().is_empty() { b } else { a }
}

/// A bar of a round length (1, 2 or 5 x 10^k mm) about a fifth of the view wide.
fn scale_bar(painter: &egui::Painter, rect: Rect, px_per_mm: f32) {
    if px_per_mm <= 0.0 {
        return;
    }
    let target_mm = rect.width() / 5.0 / px_per_mm;
    let magnitude = 10f32.powf(target_mm.log10().floor());
    let mm = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * magnitude)
        .rfind(|m| *m <= target_mm)
        .unwrap_or(magnitude);
    let length = mm * px_per_mm;
    // Bottom right, above the window/zoom text.
    let y = rect.max.y - 64.0;
    let x1 = rect.max.x - 8.0;
    let stroke = Stroke::new(2.0, Color32::from_gray(230));
    painter.line_segment([pos2(x1 - length, y), pos2(x1, y)], stroke);
    painter.text(
        pos2(x1 - length / 2.0, y - 3.0),
        Align2::CENTER_BOTTOM,
        format!("{mm} mm"),
        FontId::monospace(11.0),
        Color32::from_gray(230),
    );
}
