//! A large finding's box measured on the image. The detector's size head undershoots real
//! lesions of 10 mm and more (its boxes are about two thirds of the readers' diameter on
//! LIDC-IDRI; phantom masses, whose edges it learnt, get 0.93), so a finding whose box is at
//! least [`MIN_SIDE_MM`] gets the box of the solid voxels connected to its centre:
//! 1. within a cube around it ([`REACH`] times its box each side, at most
//!    [`MAX_HALF_SIDE_MM`]), voxels of at least [`SOLID_HU`] that are in the lung field (the
//!    chest wall and the mediastinum are not, so a lesion is cut from them where it touches);
//! 2. an opening by a ball of [`OPENING_RADIUS_MM`]: vessels and strands thinner than its
//!    diameter come off;
//! 3. the 6-connected component of the mask voxel nearest to the centre (within
//!    [`SEED_REACH_MM`]), and the solid voxels next to it (the opening shaves a voxel off a
//!    digital sphere's poles).
//!
//! The measured box replaces the detector's only when it is plausible: it does not touch the
//! cube's faces (nothing leaked out), its mean side is at least [`MIN_RATIO`] of the
//! detector's (a solid core inside a ground-glass lesion is not the lesion) and its centre
//! lies inside the detector's box (otherwise the component is mostly something the finding
//! touches, such as a vessel or a neighbour, and moving the centre there would move the
//! finding off its lesion). It never changes a score. It runs on the whole volume of the
//! model's grid, so tiling cannot change it.

use tessera_dicom::volume::Voxels;

use crate::decode::ModelGridBox;
use crate::lung::LungField;
use crate::mask::{Cube, ball_offsets};

/// Findings with a smaller mean box side keep the detector's box: small nodules are often on
/// a vessel, which the opening would take with them or leave in.
pub const MIN_SIDE_MM: f64 = 6.0;
/// Lesion voxels: halfway between lung parenchyma (about -850 HU) and soft tissue, so that the
/// edge of a partial-volume boundary lands where the lesion's edge is.
pub const SOLID_HU: f32 = -500.0;
/// Cuts structures thinner than 7.5 mm (vessels, fissures, a rim of chest wall) off the
/// lesion. 2.5 mm left the 33 mm lesion of LIDC-IDRI-0001 joined to its surroundings.
pub const OPENING_RADIUS_MM: f64 = 3.75;
/// The cube searched reaches this many times the detector's box side from the centre: the
/// size head's boxes are a half to four fifths of real lesions.
pub const REACH: f64 = 1.5;
/// ... and at least this far, at most this far (a 50 mm mass and its surroundings).
pub const MIN_HALF_SIDE_MM: f64 = 8.0;
pub const MAX_HALF_SIDE_MM: f64 = 40.0;
/// The lesion must have a solid voxel this close to the detector's centre.
pub const SEED_REACH_MM: f64 = 3.0;
/// A measured box smaller than this share of the detector's (mean side) is not used.
pub const MIN_RATIO: f64 = 0.6;

/// The box of the lesion at `bbox` (on the grid of `voxels` and `field`), or `None` when the
/// finding is small or the image does not give a plausible one (see the module docs).
pub fn measure_box(
    voxels: &Voxels,
    field: &LungField,
    bbox: &ModelGridBox,
) -> Option<ModelGridBox> {
    let spacing_mm = field.spacing_mm;
    let detected_mm = bbox.mean_side_mm(spacing_mm);
    if detected_mm < MIN_SIDE_MM || voxels.size() != field.size {
        return None;
    }
    let half_voxels = std::array::from_fn(|a| {
        (REACH * bbox.size[a] * spacing_mm[a]).clamp(MIN_HALF_SIDE_MM, MAX_HALF_SIDE_MM)
            / spacing_mm[a]
    });
    let cube = Cube::around(bbox.center, half_voxels, field.size);
    let solid =
        cube.map(|at| voxels.hu_at(at).is_some_and(|hu| hu >= SOLID_HU) && field.is_lung(at));
    let opened = cube.open(&solid, &ball_offsets(OPENING_RADIUS_MM, spacing_mm));
    let seed = cube.nearest_set(&opened, bbox.center, spacing_mm, SEED_REACH_MM)?;
    let lesion = cube.with_rim(&cube.component(&opened, seed)?, &solid);
    let (lo, hi) = cube.bounds(&lesion)?;
    let measured = ModelGridBox {
        center: std::array::from_fn(|a| (lo[a] + hi[a]) as f64 / 2.0),
        size: std::array::from_fn(|a| (hi[a] - lo[a] + 1) as f64),
    };
    (bbox.contains(measured.center) && measured.mean_side_mm(spacing_mm) >= MIN_RATIO * detected_mm)
        .then_some(measured)
}

#[cfg(test)]
mod tests {
    use ndarray::Array3;

    use super::*;

    const N: usize = 64;
    const LUNG_HU: i16 = -850;

    /// 1 mm voxels of lung, all of it in the field; `paint` sets tissue voxels.
    fn scene(paint: impl Fn([f64; 3]) -> bool) -> (Voxels, LungField) {
        let voxels = Array3::from_shape_fn((N, N, N), |(z, y, x)| {
            if paint([x as f64, y as f64, z as f64]) {
                40
            } else {
                LUNG_HU
            }
        });
        (Voxels::I16(voxels), LungField::filled([N; 3], [1.0; 3]))
    }

    fn ball(c: [f64; 3], r: f64) -> impl Fn([f64; 3]) -> bool {
        move |p| (0..3).map(|a| (p[a] - c[a]).powi(2)).sum::<f64>() <= r * r
    }

    fn detector_box(side: f64) -> ModelGridBox {
        ModelGridBox {
            center: [32.0; 3],
            size: [side; 3],
        }
    }

    #[test]
    fn a_lesion_gets_its_own_size_and_its_vessel_comes_off() {
        // A 21-voxel ball with a 3-voxel-wide vessel running through it along x, to the edge:
        // measured 21 voxels across along every axis, the vessel cut off.
        let lesion = ball([32.0; 3], 10.0);
        let (voxels, field) =
            scene(|p| lesion(p) || ((p[1] - 32.0).abs() <= 1.0 && (p[2] - 32.0).abs() <= 1.0));
        let measured = measure_box(&voxels, &field, &detector_box(14.0));
        assert_eq!(
            measured,
            Some(ModelGridBox {
                center: [32.0; 3],
                size: [21.0; 3]
            })
        );
    }

    #[test]
    fn small_findings_leaks_cores_and_neighbours_keep_the_detectors_box() {
        let (voxels, field) = scene(ball([32.0; 3], 10.0));
        assert_eq!(
            measure_box(&voxels, &field, &detector_box(5.0)),
            None,
            "5 mm"
        );
        // A slab 9 voxels thick: the opening keeps it and it reaches every face.
        let (voxels, field) = scene(|p| (p[2] - 32.0).abs() <= 4.0);
        assert_eq!(
            measure_box(&voxels, &field, &detector_box(14.0)),
            None,
            "leak"
        );
        // A 7-voxel core where the detector saw a 30 mm lesion.
        let (voxels, field) = scene(ball([32.0; 3], 3.0));
        assert_eq!(
            measure_box(&voxels, &field, &detector_box(20.0)),
            None,
            "core"
        );
        // Nothing solid near the centre.
        let (voxels, field) = scene(ball([20.0; 3], 4.0));
        assert_eq!(
            measure_box(&voxels, &field, &detector_box(14.0)),
            None,
            "no seed"
        );
        // A lesion mostly beside the detector's 8-voxel box (x 28 to 36), its edge at the
        // box's centre: its own centre (x 37.5) is outside, so it is something else. A box
        // of 14 voxels (x 25 to 39) holds that centre.
        let (voxels, field) = scene(ball([37.5, 32.0, 32.0], 6.0));
        assert_eq!(
            measure_box(&voxels, &field, &detector_box(8.0)),
            None,
            "off centre"
        );
        assert!(measure_box(&voxels, &field, &detector_box(14.0)).is_some());
    }

    #[test]
    fn tissue_outside_the_lung_field_is_not_the_lesion() {
        let (voxels, _) = scene(ball([32.0; 3], 10.0));
        let field = LungField::filled([N; 3], [1.0; 3]).without(|[x, _, _]| x > 36);
        let measured = measure_box(&voxels, &field, &detector_box(14.0));
        let Some(measured) = measured else {
            panic!("the lesion's part in the field is measured");
        };
        assert_eq!(measured.size[0], 15.0, "x from 22 to 36");
        assert_eq!(measured.size[1], 21.0);
    }
}
