//! Nodule measurements on the study's voxels, against nodules of known diameter, volume and
//! type painted as the phantom paints them (partial volume, the scanner's blur, noise) on
//! voxels of a screening protocol (0.7 x 0.7 x 1.25 mm).

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use ndarray::Array3;
use tessera_core::measure::{Method, NoduleType, measure};
use tessera_core::phantom::structures::{Attachment, Nodule, NoduleKind, Tube, coverage};
use tessera_core::phantom::{add_noise_and_quantise, blur};
use tessera_dicom::volume::{Geometry, StudyVoxelBox, Voxels};

const SPACING_MM: [f64; 3] = [0.7, 0.7, 1.25];
const LUNG_HU: f32 = -850.0;
const VESSEL_HU: f32 = 40.0;

struct Case {
    kind: NoduleKind,
    diameter_mm: f64,
    /// A vessel of this radius runs past, touching the nodule.
    vessel_radius_mm: Option<f64>,
}

/// Lung around one nodule (and its vessel), its centre off the voxel grid; the box of the
/// voxels the sphere overlaps.
fn scene(case: &Case, seed: u64) -> (Voxels, Geometry, StudyVoxelBox) {
    let r = case.diameter_mm / 2.0;
    let size: [usize; 3] =
        std::array::from_fn(|a| ((2.0 * (r + 14.0)) / SPACING_MM[a]).ceil() as usize);
    let center: [f64; 3] = std::array::from_fn(|a| (size[a] as f64 / 2.0 + 0.3) * SPACING_MM[a]);
    let nodule = Nodule {
        centre: center,
        diameter_mm: case.diameter_mm,
        kind: case.kind,
        attachment: Attachment::Free,
    };
    let vessel = case.vessel_radius_mm.map(|radius| {
        let x = center[0] + r + radius * 0.6;
        Tube {
            a: [x, 0.0, center[2]],
            b: [x, size[1] as f64 * SPACING_MM[1], center[2]],
            radius_a_mm: radius,
            radius_b_mm: radius,
            hu: VESSEL_HU,
            wall: None,
        }
    });
    let pv_mm = SPACING_MM[0];
    let mut hu = Array3::from_shape_fn((size[2], size[1], size[0]), |(z, y, x)| {
        let p = [x, y, z].map(|v| v as f64);
        let p: [f64; 3] = std::array::from_fn(|a| p[a] * SPACING_MM[a]);
        let mut value = LUNG_HU;
        if let Some(tube) = &vessel {
            let (d, radius) = tube.distance_and_radius(p);
            value += coverage(radius - d, pv_mm) as f32 * (tube.hu - value);
        }
        let d = (0..3)
            .map(|a| (p[a] - center[a]).powi(2))
            .sum::<f64>()
            .sqrt();
        if let Some((target, f)) = nodule.paint(d, pv_mm) {
            value += f as f32 * (target.max(value) - value);
        }
        value
    });
    blur(&mut hu);
    let voxels = Voxels::I16(add_noise_and_quantise(&hu, 18.0, seed));
    let geometry = Geometry::axis_aligned(size, SPACING_MM, [0.0; 3]);
    let c: [f64; 3] = std::array::from_fn(|a| center[a] / SPACING_MM[a]);
    let box_voxel = StudyVoxelBox::covering(
        std::array::from_fn(|a| c[a] - r / SPACING_MM[a]),
        std::array::from_fn(|a| c[a] + r / SPACING_MM[a]),
        size,
    )
    .unwrap();
    (voxels, geometry, box_voxel)
}

fn nodule_type(kind: NoduleKind) -> NoduleType {
    match kind {
        NoduleKind::Solid => NoduleType::Solid,
        NoduleKind::PartSolid => NoduleType::PartSolid,
        NoduleKind::GroundGlass => NoduleType::GroundGlass,
    }
}

#[test]
fn nodules_are_measured_within_a_voxel_and_typed_right() {
    use NoduleKind::*;
    let voxel_mm = SPACING_MM.iter().copied().fold(0.0, f64::max);
    let mut cases = Vec::new();
    for d in [4.0, 6.0, 8.0, 12.0, 20.0] {
        cases.push(Case {
            kind: Solid,
            diameter_mm: d,
            vessel_radius_mm: None,
        });
    }
    for d in [8.0, 12.0, 20.0] {
        cases.push(Case {
            kind: PartSolid,
            diameter_mm: d,
            vessel_radius_mm: None,
        });
    }
    for d in [6.0, 12.0, 25.0] {
        cases.push(Case {
            kind: GroundGlass,
            diameter_mm: d,
            vessel_radius_mm: None,
        });
    }
    // Against a vessel a third (then a fifth) of its width: the vessel is not the nodule.
    cases.push(Case {
        kind: Solid,
        diameter_mm: 9.0,
        vessel_radius_mm: Some(1.5),
    });
    cases.push(Case {
        kind: PartSolid,
        diameter_mm: 15.0,
        vessel_radius_mm: Some(1.5),
    });
    let mut failures = Vec::new();
    for (i, case) in cases.iter().enumerate() {
        let (voxels, geometry, box_voxel) = scene(case, 100 + i as u64);
        let m = measure(&voxels, &geometry, &box_voxel, None);
        let d = case.diameter_mm;
        let true_mm3 = std::f64::consts::PI / 6.0 * d.powi(3);
        // A shell half a voxel thick.
        let shell_mm3 = std::f64::consts::PI * d * d * voxel_mm / 2.0;
        let volume = m.volume_mm3.unwrap_or(f64::NAN);
        println!(
            "{:?} {d} mm{}: {:?}, mean diameter {:.1} (long {:.2}, short {:.2}), volume {volume:.0} of {true_mm3:.0} mm3, mean {:.0} HU, solid {:?}",
            case.kind,
            if case.vessel_radius_mm.is_some() {
                " on a vessel"
            } else {
                ""
            },
            m.nodule_type,
            m.mean_diameter_mm,
            m.axes.long_axis_mm,
            m.axes.short_axis_mm,
            m.mean_hu.unwrap_or(f64::NAN),
            m.solid_mean_diameter_mm,
        );
        // The size (the mean diameter) within a voxel; the long axis too, away from vessels
        // (against one, the junction's fillet can lengthen a diagonal long axis).
        let ok = m.method == Method::Segmented
            && (m.mean_diameter_mm - d).abs() <= voxel_mm
            && (case.vessel_radius_mm.is_some() || (m.axes.long_axis_mm - d).abs() <= voxel_mm)
            && (volume - true_mm3).abs() <= shell_mm3
            && m.nodule_type == Some(nodule_type(case.kind));
        // A part-solid nodule's solid core is 0.45 of its diameter (the phantom's).
        let core_ok = case.kind != PartSolid
            || m.solid_mean_diameter_mm
                .is_some_and(|s| (s - 0.45 * d).abs() <= voxel_mm);
        if !(ok && core_ok) {
            failures.push(format!("{:?} {d} mm: {m:?}", case.kind));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn a_finding_the_image_cannot_segment_keeps_its_box_and_says_why() {
    // Nothing but lung: no voxel dense enough near the centre.
    let geometry = Geometry::axis_aligned([40, 40, 20], SPACING_MM, [0.0; 3]);
    let voxels = Voxels::I16(Array3::from_elem((20, 40, 40), -850));
    let box_voxel = StudyVoxelBox {
        min: [10, 12, 5],
        max: [20, 16, 9],
    };
    let m = measure(&voxels, &geometry, &box_voxel, None);
    assert_eq!(m.method, Method::Box);
    assert_eq!(
        (m.axes.long_axis_mm, m.axes.short_axis_mm),
        (7.0, 2.8),
        "{m:?}"
    );
    assert_eq!(m.mean_diameter_mm, 4.9);
    assert_eq!((m.volume_mm3, m.mean_hu, m.nodule_type), (None, None, None));
    assert!(m.how.contains("no voxel of -700 HU or more"), "{}", m.how);
}
