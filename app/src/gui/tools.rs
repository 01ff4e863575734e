//! The views' measuring tools: rulers (drag a line, its length in mm; as many as drawn) and "add finding"
//! (drag a box around something the detector missed). Coordinates are continuous study voxel
//! edges (voxel `j` spans `[j, j + 1)`) until they become LPS millimetres.

use egui::{Align2, FontId, Pos2, Stroke, StrokeKind};
use tessera_core::review::AddedFinding;
use tessera_dicom::view::Plane;
use tessera_dicom::volume::{Geometry, StudyVoxelBox};

use super::colors;

/// What a primary-button drag on a view does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Tool {
    /// Window/level (shift: move the crosshair).
    #[default]
    Navigate,
    Ruler,
    AddFinding,
}

/// A line or box being dragged, or the last ruler, on one plane at one slice.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stroke3 {
    pub plane: Plane,
    pub from: [f64; 3],
    pub to: [f64; 3],
}

/// The tools' state, per study.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolState {
    pub tool: Tool,
    pub drag: Option<Stroke3>,
    /// Every ruler drawn, each on its slice, until cleared.
    pub rulers: Vec<Stroke3>,
    /// A box the reader finished drawing, for the review to take.
    pub drawn: Option<Stroke3>,
}

impl ToolState {
    /// A drag of the active tool: started, moved or ended at `edge` (in-plane coordinates
    /// from the pointer, the slice's centre across). Returns whether the tool took it.
    pub fn drag(&mut self, plane: Plane, edge: [f64; 3], phase: Phase) -> bool {
        if self.tool == Tool::Navigate {
            return false;
        }
        match (phase, &mut self.drag) {
            (Phase::Start, drag) => {
                *drag = Some(Stroke3 {
                    plane,
                    from: edge,
                    to: edge,
                });
            }
            (Phase::Move, Some(d)) if d.plane == plane => d.to = edge,
            (Phase::End, drag) => {
                if let Some(mut d) = drag.take()
                    && d.plane == plane
                {
                    d.to = edge;
                    match self.tool {
                        Tool::Ruler => self.rulers.push(d),
                        Tool::AddFinding => self.drawn = Some(d),
                        Tool::Navigate => {}
                    }
                }
            }
            _ => {}
        }
        true
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Start,
    Move,
    End,
}

/// Length of a stroke in millimetres (through the study's geometry, so tilt and anisotropic
/// spacing are measured as they are).
pub fn length_mm(stroke: &Stroke3, geometry: &Geometry) -> f64 {
    let world = |p: [f64; 3]| geometry.world_from_voxel.apply(p.map(|v| v - 0.5));
    let (a, b) = (world(stroke.from), world(stroke.to));
    tessera_dicom::geometry::norm(std::array::from_fn(|k| a[k] - b[k]))
}

/// The finding a drawn box stands for: its in-plane sides as drawn, the third side their mean
/// (a nodule is about round), centred on the slice it was drawn on.
pub fn added_finding(stroke: &Stroke3, geometry: &Geometry, note: &str, now: &str) -> AddedFinding {
    let n = stroke.plane.normal_axis();
    let (c, r) = stroke.plane.image_axes();
    let spacing = geometry.spacing_mm;
    let mut lo = [0.0; 3];
    let mut hi = [0.0; 3];
    for axis in [c, r] {
        lo[axis] = stroke.from[axis].min(stroke.to[axis]);
        hi[axis] = stroke.from[axis].max(stroke.to[axis]);
    }
    let in_plane_mm = ((hi[c] - lo[c]) * spacing[c] + (hi[r] - lo[r]) * spacing[r]) / 2.0;
    let half_voxels = in_plane_mm / spacing[n] / 2.0;
    lo[n] = stroke.from[n] - half_voxels;
    hi[n] = stroke.from[n] + half_voxels;
    let centre: [f64; 3] = std::array::from_fn(|a| (lo[a] + hi[a]) / 2.0 - 0.5);
    AddedFinding {
        center_lps_mm: geometry.world_from_voxel.apply(centre),
        size_mm: std::array::from_fn(|a| (hi[a] - lo[a]) * spacing[a]),
        note: note.into(),
        added_at: now.into(),
        measurements: None,
        lung_rads: None,
        decision: Some(tessera_core::review::Decision::Accepted),
    }
}

/// The study voxels of a box given by its centre and its sides along the volume's axes.
pub fn study_box(
    center_lps_mm: [f64; 3],
    size_mm: [f64; 3],
    geometry: &Geometry,
) -> Option<StudyVoxelBox> {
    let centre = geometry.world_from_voxel.inverse()?.apply(center_lps_mm);
    let half = |a: usize| size_mm[a] / geometry.spacing_mm[a] / 2.0;
    StudyVoxelBox::covering(
        std::array::from_fn(|a| centre[a] - half(a)),
        std::array::from_fn(|a| centre[a] + half(a)),
        geometry.size,
    )
}

/// The drag in progress and the ruler, when on `plane` at slice `index`; `screen` maps
/// in-plane edge coordinates (column, row) to the screen.
pub fn draw(
    painter: &egui::Painter,
    tools: &ToolState,
    geometry: &Geometry,
    (plane, index): (Plane, usize),
    screen: &dyn Fn(f64, f64) -> Pos2,
) {
    let (c, r) = plane.image_axes();
    let n = plane.normal_axis();
    let on_slice = |s: &Stroke3| s.plane == plane && s.from[n].floor() as usize == index;
    let ends = |s: &Stroke3| (screen(s.from[c], s.from[r]), screen(s.to[c], s.to[r]));
    let stroke = Stroke::new(1.5, colors::TOOL);
    let dragged = tools.drag.filter(|_| tools.tool == Tool::Ruler);
    for s in tools
        .rulers
        .iter()
        .chain(dragged.as_ref())
        .filter(|s| on_slice(s))
    {
        let (a, b) = ends(s);
        painter.line_segment([a, b], stroke);
        painter.text(
            b + egui::vec2(4.0, 0.0),
            Align2::LEFT_CENTER,
            format!("{:.1} mm", length_mm(s, geometry)),
            FontId::proportional(12.0),
            colors::TOOL,
        );
    }
    if let Some(s) = tools
        .drag
        .filter(|_| tools.tool == Tool::AddFinding)
        .filter(on_slice)
    {
        let (a, b) = ends(&s);
        painter.rect_stroke(
            egui::Rect::from_two_pos(a, b),
            0.0,
            stroke,
            StrokeKind::Outside,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_drawn_box_becomes_a_finding_and_maps_back_to_its_voxels() {
        let g = Geometry::axis_aligned([100, 80, 40], [0.5, 0.5, 2.0], [-25.0, -20.0, 10.0]);
        // Axial slice 10 (centre edge 10.5), columns 20..30, rows 40..50: 5 x 5 mm.
        let drawn = Stroke3 {
            plane: Plane::Axial,
            from: [20.0, 50.0, 10.5],
            to: [30.0, 40.0, 10.5],
        };
        let f = added_finding(&drawn, &g, "", "");
        assert_eq!(f.size_mm, [5.0, 5.0, 5.0]);
        // Voxel centre (24.5, 44.5, 10): -25 + 12.25, -20 + 22.25, 10 + 20.
        assert_eq!(f.center_lps_mm, [-12.75, 2.25, 30.0]);
        let b = study_box(f.center_lps_mm, f.size_mm, &g);
        assert_eq!(b.map(|b| (b.min, b.max)), Some(([20, 40, 9], [30, 50, 12])));
        let ruler = Stroke3 {
            plane: Plane::Axial,
            from: [0.0, 0.0, 0.5],
            to: [6.0, 8.0, 0.5],
        };
        assert_eq!(length_mm(&ruler, &g), 5.0);
    }
}
