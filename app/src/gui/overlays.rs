//! Translucent maps over a slice, from the model's grid: the blend weights of a plan and the
//! lung field of a run.

use egui::{Color32, Rect};
use tessera_dicom::view::Plane;
use tessera_maps::lung::LungField;
use tessera_maps::stitch::axis_weight_sum;
use tessera_plan::blend::BlendMode;
use tessera_plan::grid_map::GridMap;
use tessera_plan::plan::TilePlan;

/// The blend weight map on this slice: the sum of the windows' weights (Gaussian or constant)
/// normalised to its maximum; in halo mode, each window's core tinted in turn so that the
/// partition shows.
pub fn draw_weights(
    painter: &egui::Painter,
    image: Rect,
    slice: (Plane, usize),
    plan: &TilePlan,
    grid: &GridMap,
    study_size: [usize; 3],
) {
    // Per axis and model voxel (the windows form a product grid, so the 3-D values are
    // products or sums of these): the weight summed over the windows, and the core it is in.
    let sums: [Vec<f32>; 3] = std::array::from_fn(|a| axis_weight_sum(plan, a));
    let cores: [Vec<usize>; 3] = std::array::from_fn(|a| {
        (0..plan.padded_size[a])
            .map(|v| plan.core_at(a, v))
            .collect()
    });
    let max: f32 = sums
        .iter()
        .map(|s| s.iter().copied().fold(0.0, f32::max))
        .product();
    // Study voxels past the padded grid take its last voxel's values.
    let last: [usize; 3] = std::array::from_fn(|a| plan.padded_size[a].saturating_sub(1));
    fill_cells(painter, image, slice, study_size, grid, |m| {
        let m: [usize; 3] = std::array::from_fn(|a| m[a].min(last[a]));
        Some(if plan.spec.blend == BlendMode::Halo {
            let k: usize = (0..3).filter_map(|a| cores[a].get(m[a])).sum();
            if k.is_multiple_of(2) {
                Color32::from_rgba_unmultiplied(255, 140, 0, 40)
            } else {
                Color32::from_rgba_unmultiplied(0, 140, 255, 40)
            }
        } else {
            let weight: f32 = (0..3)
                .map(|a| sums[a].get(m[a]).copied().unwrap_or(0.0))
                .product();
            let v = weight / max.max(f32::MIN_POSITIVE);
            Color32::from_rgba_unmultiplied(
                255,
                (255.0 * v) as u8,
                0,
                (90.0 * (1.0 - v) + 20.0) as u8,
            )
        })
    });
}

/// The run's lung field on this slice: findings outside it were dropped (or flagged).
pub fn draw_lung_field(
    painter: &egui::Painter,
    image: Rect,
    slice: (Plane, usize),
    field: &LungField,
    grid: &GridMap,
    study_size: [usize; 3],
) {
    fill_cells(painter, image, slice, study_size, grid, |m| {
        field
            .contains(m.map(|v| v as f64))
            .then_some(Color32::from_rgba_unmultiplied(40, 200, 120, 45))
    });
}

/// Cells a side at most: enough to see a map's pattern, few enough to draw every frame on a
/// software renderer.
const MAX_CELLS: usize = 128;

/// Covers the slice `(plane, index)` of a study of `study_size` voxels, shown in `image`, with
/// cells ([`MAX_CELLS`] a side at most), each coloured from the model voxel `[x, y, z]` nearest
/// the study voxel at its corner; `None` leaves it clear.
fn fill_cells(
    painter: &egui::Painter,
    image: Rect,
    (plane, index): (Plane, usize),
    study_size: [usize; 3],
    grid: &GridMap,
    color: impl Fn([usize; 3]) -> Option<Color32>,
) {
    let (c, r) = plane.image_axes();
    let n = plane.normal_axis();
    let (w, h) = (study_size[c], study_size[r]);
    // The grids share their axes: each axis maps on its own, once per study voxel.
    let model_of = |axis: usize, len: usize| -> Vec<usize> {
        (0..len).map(|v| grid.model_voxel(axis, v)).collect()
    };
    let (model_c, model_r) = (model_of(c, w), model_of(r, h));
    let model_n = grid.model_voxel(n, index);
    let step_c = w.div_ceil(MAX_CELLS).max(1);
    let step_r = h.div_ceil(MAX_CELLS).max(1);
    let sx = image.width() / w as f32;
    let sy = image.height() / h as f32;
    for row in (0..h).step_by(step_r) {
        // Coronal and sagittal images show the last slice at the top.
        let vr = if plane == Plane::Axial {
            row
        } else {
            h - 1 - row
        };
        for col in (0..w).step_by(step_c) {
            let mut model = [0; 3];
            (model[c], model[r], model[n]) = (model_c[col], model_r[vr], model_n);
            if let Some(color) = color(model) {
                let cell = Rect::from_min_size(
                    image.min + egui::vec2(col as f32 * sx, row as f32 * sy),
                    egui::vec2(step_c as f32 * sx, step_r as f32 * sy),
                );
                painter.rect_filled(cell, 0.0, color);
            }
        }
    }
}
