//! The phantom: deterministic, readable by the loader, nodules where the truth says.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use tessera_core::phantom::structures::Attachment;
use tessera_core::phantom::{self, PhantomSpec, TRUTH_FILE, Truth};
use tessera_dicom::dicom;
use tessera_dicom::volume::Voxels;

fn small(seed: u64) -> PhantomSpec {
    PhantomSpec {
        seed,
        size: [192, 160, 40],
        spacing_mm: [1.6, 1.8, 4.0],
        nodules: 4,
        noise_hu: 18.0,
        masses: 0,
    }
}

fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let p = e.unwrap().path();
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

#[test]
fn same_seed_gives_byte_identical_files() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    phantom::write_series(&phantom::generate(&small(11)).unwrap(), a.path()).unwrap();
    phantom::write_series(&phantom::generate(&small(11)).unwrap(), b.path()).unwrap();
    let (fa, fb) = (files(a.path()), files(b.path()));
    assert_eq!(fa.len(), 41); // 40 slices and truth.json
    assert!(fa == fb, "same seed wrote different files");
    let c = tempfile::tempdir().unwrap();
    phantom::write_series(&phantom::generate(&small(12)).unwrap(), c.path()).unwrap();
    assert!(files(c.path()) != fa, "another seed wrote the same files");
}

#[test]
fn voxels_do_not_depend_on_the_thread_count() {
    let many = phantom::generate(&small(5)).unwrap();
    let one = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap()
        .install(|| phantom::generate(&small(5)).unwrap());
    assert!(many.volume.voxels == one.volume.voxels);
}

#[test]
fn loader_reads_back_the_written_geometry_and_voxels() {
    let spec = small(3);
    let made = phantom::generate(&spec).unwrap();
    let dir = tempfile::tempdir().unwrap();
    phantom::write_series(&made, dir.path()).unwrap();
    let (volume, report) = dicom::open(dir.path(), None, Default::default()).unwrap();
    assert_eq!(report.skipped.len(), 1, "only truth.json is skipped");
    assert_eq!(volume.geometry.size, made.volume.geometry.size);
    for axis in 0..3 {
        assert!((volume.geometry.spacing_mm[axis] - spec.spacing_mm[axis]).abs() < 1e-9);
        assert!(
            (volume.geometry.origin_lps_mm()[axis] - made.volume.geometry.origin_lps_mm()[axis])
                .abs()
                < 1e-6
        );
    }
    assert!(volume.warnings.is_empty(), "{:?}", volume.warnings);
    assert!(volume.voxels == made.volume.voxels);
    assert_eq!(volume.info.series_uid, made.truth.series_uid);
    let truth: Truth =
        serde_json::from_slice(&std::fs::read(dir.path().join(TRUTH_FILE)).unwrap()).unwrap();
    assert_eq!(truth, made.truth);
}

#[test]
fn nodules_lie_in_the_lungs_and_show_in_the_image() {
    for seed in [1, 2, 3, 4] {
        let spec = PhantomSpec {
            nodules: 6,
            ..small(seed)
        };
        let made = phantom::generate(&spec).unwrap();
        let geometry = &made.volume.geometry;
        let Voxels::I16(hu) = &made.volume.voxels else {
            panic!("i16 phantom")
        };
        assert_eq!(made.truth.nodules.len(), 6);
        for n in &made.truth.nodules {
            assert!(
                phantom::lung_at(&spec, geometry, n.center_lps_mm).is_some(),
                "seed {seed}: nodule {} centre outside the lungs",
                n.id
            );
            assert!(
                (3.0..=30.0).contains(&n.diameter_mm),
                "diameter {}",
                n.diameter_mm
            );
            for axis in 0..3 {
                assert!(n.box_voxel.min[axis] < n.box_voxel.max[axis]);
                assert!(n.box_voxel.max[axis] <= geometry.size[axis]);
            }
            // The image agrees: the centre is denser than aerated lung.
            let c = n.center_voxel.map(|v| v.round() as usize);
            let centre_hu = hu[[c[2], c[1], c[0]]];
            assert!(
                centre_hu > -700,
                "seed {seed}: nodule {} centre is {centre_hu} HU",
                n.id
            );
            // A free nodule has lung all around it, a pleural one reaches out of the lung.
            let r = n.diameter_mm / 2.0;
            let around = |k: f64| {
                shell(n.center_lps_mm, k * r)
                    .iter()
                    .filter(|p| phantom::lung_at(&spec, geometry, **p).is_some())
                    .count()
            };
            match n.attachment {
                Attachment::Free => assert_eq!(around(1.2), 26, "seed {seed}: nodule {}", n.id),
                Attachment::Pleura => assert!(around(1.2) < 26, "seed {seed}: nodule {}", n.id),
                Attachment::Vessel => {}
            }
        }
    }
}

/// 26 points around `centre` at `radius` mm (cube corners, edges and faces, normalised).
fn shell(centre: [f64; 3], radius: f64) -> Vec<[f64; 3]> {
    let mut out = Vec::new();
    for x in [-1.0f64, 0.0, 1.0] {
        for y in [-1.0f64, 0.0, 1.0] {
            for z in [-1.0f64, 0.0, 1.0] {
                let n = (x * x + y * y + z * z).sqrt();
                if n > 0.0 {
                    out.push([
                        centre[0] + radius * x / n,
                        centre[1] + radius * y / n,
                        centre[2] + radius * z / n,
                    ]);
                }
            }
        }
    }
    out
}

#[test]
fn full_size_phantom_round_trips_at_an_unusual_spacing() {
    let spec = PhantomSpec {
        seed: 21,
        size: [512, 512, 300],
        spacing_mm: [0.62, 0.66, 0.9],
        nodules: 6,
        noise_hu: 18.0,
        masses: 0,
    };
    let made = phantom::generate(&spec).unwrap();
    let dir = tempfile::tempdir().unwrap();
    phantom::write_series(&made, dir.path()).unwrap();
    let (volume, _) = dicom::open(dir.path(), None, Default::default()).unwrap();
    assert_eq!(volume.geometry.size, [512, 512, 300]);
    assert!((volume.geometry.spacing_mm[2] - 0.9).abs() < 1e-6);
    assert!(volume.voxels == made.volume.voxels);
}

#[test]
fn impossible_requests_are_refused_clearly() {
    let tiny = PhantomSpec {
        size: [4, 64, 64],
        ..small(1)
    };
    assert_eq!(
        phantom::generate(&tiny).unwrap_err().to_string(),
        "phantom size 4x64x64 is too small: each axis needs at least 8 voxels"
    );
    let crowded = PhantomSpec {
        size: [64, 64, 16],
        spacing_mm: [1.0, 1.0, 2.0],
        nodules: 40,
        ..small(1)
    };
    let err = phantom::generate(&crowded).unwrap_err().to_string();
    assert!(err.starts_with("could place only "), "{err}");
    assert!(
        err.ends_with("ask for fewer nodules or a larger field of view"),
        "{err}"
    );
}

#[test]
fn masses_come_after_the_same_nodules_and_are_large_solid_and_in_the_lungs() {
    let spec = PhantomSpec {
        size: [256, 256, 160],
        spacing_mm: [1.4, 1.4, 2.0],
        nodules: 5,
        ..small(31)
    };
    let without = phantom::generate(&spec).unwrap();
    let with = phantom::generate(&PhantomSpec {
        masses: 2,
        ..spec.clone()
    })
    .unwrap();
    // The nodules' stream is untouched: a spec without masses is the phantom it always was.
    assert_eq!(with.truth.nodules[..5], without.truth.nodules[..]);
    assert_eq!(with.truth.nodules.len(), 7);
    let text = serde_json::to_string(&without.truth).unwrap();
    assert!(!text.contains("masses"), "{text}");
    let Voxels::I16(hu) = &with.volume.voxels else {
        panic!("phantom voxels are i16")
    };
    for mass in &with.truth.nodules[5..] {
        assert!((20.0..=50.0).contains(&mass.diameter_mm), "{mass:?}");
        for other in &with.truth.nodules {
            let d: f64 = (0..3)
                .map(|a| (other.center_lps_mm[a] - mass.center_lps_mm[a]).powi(2))
                .sum::<f64>()
                .sqrt();
            assert!(
                other.id == mass.id || d > mass.diameter_mm / 2.0,
                "{mass:?} {other:?}"
            );
        }
        let side = phantom::lung_at(&spec, &with.volume.geometry, mass.center_lps_mm);
        assert!(side.is_some(), "mass centre outside the lungs: {mass:?}");
        let [x, y, z] = mass.center_voxel.map(|v| v.round() as usize);
        assert!(hu[[z, y, x]] > -250, "{} HU at {mass:?}", hu[[z, y, x]]);
    }
    let crowded = PhantomSpec {
        size: [64, 64, 16],
        spacing_mm: [1.0, 1.0, 2.0],
        masses: 10,
        ..spec
    };
    let err = phantom::generate(&crowded).unwrap_err().to_string();
    assert!(
        err.ends_with("ask for fewer masses or a larger field of view"),
        "{err}"
    );
}
