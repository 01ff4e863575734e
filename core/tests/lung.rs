//! The lung field on synthetic chest CTs whose nodules are known, and on volumes without lungs.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use ndarray::Array3;
use tessera_core::phantom::{self, PhantomSpec};
use tessera_dicom::volume::Voxels;
use tessera_maps::lung;

/// Every nodule of several phantoms (solid, part-solid, ground glass; free, against the pleura,
/// against a vessel) has its centre in the field; the field is mostly lung, not mediastinum,
/// and the air around the patient is out.
#[test]
fn phantom_nodules_are_inside_and_the_body_is_outside() {
    let mut nodules = 0;
    for seed in [3, 11, 27] {
        let spec = PhantomSpec {
            seed,
            size: [200, 200, 120],
            spacing_mm: [1.6, 1.6, 2.5],
            nodules: 10,
            ..PhantomSpec::default()
        };
        let made = phantom::generate(&spec).unwrap();
        let volume = &made.volume;
        let field = lung::segment(&volume.voxels, volume.geometry.spacing_mm);
        for n in &made.truth.nodules {
            assert!(
                field.contains(n.center_voxel),
                "seed {seed}: {:?} {:?} nodule of {:.0} mm at {:?} is outside",
                n.kind,
                n.attachment,
                n.diameter_mm,
                n.center_voxel
            );
            nodules += 1;
        }
        assert!(
            !field.contains([0.0, 0.0, 60.0]),
            "seed {seed}: outside air"
        );
        // Soft tissue and bone in the field: vessels, nodules and the margin only.
        let (mut inside, mut dense) = (0usize, 0usize);
        let [nx, ny, nz] = volume.geometry.size;
        for z in 0..nz {
            for y in 0..ny {
                for x in 0..nx {
                    if field.contains([x as f64, y as f64, z as f64]) {
                        inside += 1;
                        dense += usize::from(volume.voxels.hu_at([x, y, z]).unwrap() > -300.0);
                    }
                }
            }
        }
        assert_eq!(inside, field.voxels());
        assert!(inside > 0, "seed {seed}: no lungs found");
        let share = dense as f64 / inside as f64;
        assert!(
            share < 0.25,
            "seed {seed}: {:.0} % of the field is dense",
            share * 100.0
        );
    }
    assert_eq!(nodules, 30);
}

/// No lungs, no field: soft tissue only, or air only (all of it touches the border).
#[test]
fn volumes_without_lungs_have_an_empty_field() {
    for hu in [40i16, -1000] {
        let voxels = Voxels::I16(Array3::from_elem((20, 30, 40), hu));
        let field = lung::segment(&voxels, [1.0, 1.0, 1.0]);
        assert_eq!(field.size, [40, 30, 20]);
        assert_eq!(field.voxels(), 0, "{hu} HU");
        assert_eq!(field.volume_ml(), 0.0);
    }
}

/// A box of tissue holding two air cavities, one large, one small: the large one is lung,
/// the small one (under the share of the largest) is not; a hole in the large one is filled.
#[test]
fn small_air_pockets_are_not_lung_and_holes_are_filled() {
    let mut a = Array3::from_elem((30, 60, 80), -1000i16);
    a.slice_mut(ndarray::s![.., 5..55, 5..75]).fill(40); // the body
    a.slice_mut(ndarray::s![5..25, 10..50, 40..72]).fill(-850); // lung, 20x40x32
    a.slice_mut(ndarray::s![14..16, 28..32, 54..58]).fill(30); // a nodule in it
    a.slice_mut(ndarray::s![10..14, 20..24, 10..14]).fill(-900); // gas, 4x4x4
    let field = lung::segment(&Voxels::I16(a), [5.0, 5.0, 5.0]);
    assert!(field.contains([56.0, 30.0, 15.0]), "the nodule");
    assert!(field.contains([50.0, 20.0, 10.0]), "the lung");
    assert!(!field.contains([12.0, 22.0, 12.0]), "the gas pocket");
    assert!(!field.contains([2.0, 2.0, 15.0]), "outside air");
}
