//! LIDC-IDRI reader annotations, read against the real series they annotate.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use tessera_dicom::lidc::{self, LidcError};
use tessera_dicom::{Volume, dicom};
use tessera_tests::shared_data;

/// Reads within this distance (mm) or half a diameter are the same nodule.
const SAME_NODULE_MM: f64 = 5.0;
/// The shipped detector's grid.
const MODEL_GRID_MM: f64 = 1.25;

fn load(case: &str) -> Option<(Volume, std::path::PathBuf)> {
    let dir = shared_data(case)?;
    let (volume, _) = dicom::open(&dir, None, Default::default()).unwrap();
    Some((volume, lidc::find_xml(&dir).unwrap()))
}

#[test]
fn lidc_0001_has_one_large_nodule_seen_by_all_four_readers_and_three_small_ones() {
    let Some((volume, xml)) = load("lidc/LIDC-IDRI-0001") else {
        return;
    };
    let reads = lidc::read(&xml, &volume.geometry, &volume.info.series_uid).unwrap();
    assert_eq!(reads.readers, 4);
    assert_eq!(reads.nodules.len(), 13);
    let groups = lidc::consensus(&reads, SAME_NODULE_MM);
    let shape: Vec<(usize, bool)> = groups.iter().map(|g| (g.readers, g.outlined)).collect();
    assert_eq!(shape, vec![(4, true), (3, false), (3, false), (3, false)]);
    let large = &groups[0];
    // Contours span about 42 x 51 pixels of 0.703 mm: the largest in-plane extent is ~35 mm.
    assert!(
        (25.0..40.0).contains(&large.diameter_mm),
        "{}",
        large.diameter_mm
    );
    // Nodules of 3 mm or more are characterised, small marks are not.
    assert!(large.reads.iter().all(|r| r.malignancy.is_some()));
    assert!(
        groups[1..]
            .iter()
            .flat_map(|g| &g.reads)
            .all(|r| r.malignancy.is_none())
    );
    // Inside the scanned volume.
    let voxel_from_world = volume.geometry.world_from_voxel.inverse().unwrap();
    let v = voxel_from_world.apply(large.center_lps_mm);
    for a in 0..3 {
        assert!(
            v[a] >= 0.0 && v[a] < volume.geometry.size[a] as f64,
            "{v:?}"
        );
    }
}

#[test]
fn lidc_0003_has_three_nodules_all_readers_agree_on_and_one_seen_once() {
    let Some((volume, xml)) = load("lidc/LIDC-IDRI-0003") else {
        return;
    };
    let reads = lidc::read(&xml, &volume.geometry, &volume.info.series_uid).unwrap();
    let groups = lidc::consensus(&reads, SAME_NODULE_MM);
    let readers: Vec<usize> = groups.iter().map(|g| g.readers).collect();
    assert_eq!(readers, vec![4, 4, 4, 1]);
    assert!(groups.iter().all(|g| g.outlined));
}

#[test]
fn annotations_of_another_series_are_refused() {
    let Some((volume, _)) = load("lidc/LIDC-IDRI-0001") else {
        return;
    };
    let Some((_, other_xml)) = load("lidc/LIDC-IDRI-0003") else {
        return;
    };
    let err = lidc::read(&other_xml, &volume.geometry, &volume.info.series_uid).unwrap_err();
    assert!(matches!(err, LidcError::OtherSeries { .. }), "{err}");
    assert!(err.to_string().contains("annotates series"), "{err}");
}

/// A case on the shipped detector's grid, its reads and its lung field there.
fn on_model_grid(case: &str) -> Option<(Volume, lidc::LidcReads, tessera_maps::lung::LungField)> {
    let (volume, xml) = load(case)?;
    let reads = lidc::read(&xml, &volume.geometry, &volume.info.series_uid).unwrap();
    let grid = tessera_plan::resample::resample(&volume, [MODEL_GRID_MM; 3])
        .unwrap()
        .unwrap();
    let field = tessera_maps::lung::segment(&grid.voxels, grid.geometry.spacing_mm);
    Some((grid, reads, field))
}

/// Every nodule a reader marked on the two cases lies in the lung field, on the grid the
/// shipped detector runs on: the field drops findings outside it, never a reader's nodule.
/// The field is also a plausible pair of lungs (2-9 litres).
#[test]
fn every_reader_nodule_is_inside_the_lung_field() {
    for case in ["lidc/LIDC-IDRI-0001", "lidc/LIDC-IDRI-0003"] {
        let Some((grid, reads, field)) = on_model_grid(case) else {
            return;
        };
        let ml = field.volume_ml();
        assert!((2000.0..9000.0).contains(&ml), "{case}: {ml} ml");
        let voxel_from_world = grid.geometry.world_from_voxel.inverse().unwrap();
        let outside: Vec<String> = lidc::consensus(&reads, SAME_NODULE_MM)
            .iter()
            .filter(|n| !field.contains(voxel_from_world.apply(n.center_lps_mm)))
            .map(|n| {
                format!(
                    "{:.0} mm nodule ({} readers) at {:?}",
                    n.diameter_mm, n.readers, n.center_lps_mm
                )
            })
            .collect();
        assert!(outside.is_empty(), "{case}: outside the field: {outside:?}");
    }
}

/// The two large lesions all four readers outlined (33 and 29 mm) get a box measured on the
/// image of about their size, where the detector's size head gives two thirds of it: given a
/// box of that size at the readers' centre, the measured box's mean side is between
/// [`MEASURED_MIN`] and [`MEASURED_MAX`] of the readers' diameter (their largest in-plane
/// extent, which the mean of three sides of an irregular lesion stays under).
#[test]
fn large_reader_lesions_get_a_box_of_their_size_measured_on_the_image() {
    use tessera_maps::decode::ModelGridBox;
    use tessera_maps::extent;
    const MEASURED_MIN: f64 = 0.75;
    const MEASURED_MAX: f64 = 1.1;
    const SIZE_HEAD_SHARE: f64 = 0.65;
    for case in ["lidc/LIDC-IDRI-0001", "lidc/LIDC-IDRI-0003"] {
        let Some((grid, reads, field)) = on_model_grid(case) else {
            return;
        };
        let voxel_from_world = grid.geometry.world_from_voxel.inverse().unwrap();
        let groups = lidc::consensus(&reads, SAME_NODULE_MM);
        let large: Vec<_> = groups
            .iter()
            .filter(|g| g.readers == 4 && g.diameter_mm >= 20.0)
            .collect();
        assert_eq!(large.len(), 1, "{case}");
        let lesion = large[0];
        let detected = ModelGridBox {
            center: voxel_from_world.apply(lesion.center_lps_mm),
            size: [SIZE_HEAD_SHARE * lesion.diameter_mm / MODEL_GRID_MM; 3],
        };
        let measured = extent::measure_box(&grid.voxels, &field, &detected)
            .unwrap_or_else(|| panic!("{case}: no box measured"));
        let side_mm = measured.mean_side_mm([MODEL_GRID_MM; 3]);
        let share = side_mm / lesion.diameter_mm;
        assert!(
            (MEASURED_MIN..MEASURED_MAX).contains(&share),
            "{case}: {side_mm:.1} mm for {:.1} mm ({:?} voxels)",
            lesion.diameter_mm,
            measured.size
        );
    }
}
