//! Real CT series from `../shared/data`: LIDC-IDRI chest CTs and the dcm_qa_ct edge cases.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use dicom_object::{Tag, open_file};
use dicom_pixeldata::PixelDecoder;
use ndarray::Axis;
use tessera_dicom::dicom;
use tessera_dicom::volume::Voxels;
use tessera_tests::shared_data;

/// Positions in the files are decimal strings; a few micrometres cover their rounding.
const POSITION_TOLERANCE_MM: f64 = 1e-3;
const IMAGE_POSITION_PATIENT: Tag = Tag(0x0020, 0x0032);
const GANTRY_DETECTOR_TILT: Tag = Tag(0x0018, 0x1120);

/// Checks slice `k` of the volume against the file at the same position, decoded independently
/// by dicom-pixeldata's own rescale path.
fn assert_slice_matches_file(volume: &tessera_dicom::Volume, dir: &Path, k: usize) {
    let z_mm = volume.geometry.world_from_voxel.apply([0.0, 0.0, k as f64])[2];
    let mut found = None;
    for entry in walk(dir) {
        let Ok(obj) = open_file(&entry) else { continue };
        let Some(ipp) = obj
            .get(IMAGE_POSITION_PATIENT)
            .and_then(|e| e.to_multi_float64().ok())
        else {
            continue;
        };
        if (ipp[2] - z_mm).abs() < POSITION_TOLERANCE_MM {
            found = Some(obj);
            break;
        }
    }
    let obj = found.unwrap_or_else(|| panic!("no file at z = {z_mm} mm for slice {k}"));
    let expected: Vec<f32> = obj.decode_pixel_data().unwrap().to_vec().unwrap();
    let Voxels::I16(voxels) = &volume.voxels else {
        panic!("LIDC is integer HU: expected i16")
    };
    let slice = voxels.index_axis(Axis(0), k);
    let got: Vec<f32> = slice.iter().map(|v| f32::from(*v)).collect();
    assert_eq!(got.len(), expected.len());
    let differing = got.iter().zip(&expected).filter(|(a, b)| a != b).count();
    assert_eq!(
        differing, 0,
        "slice {k}: {differing} voxels differ from the file"
    );
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out.sort();
    out
}

#[test]
fn lidc_0001_loads_with_the_published_geometry() {
    let Some(dir) = shared_data("lidc/LIDC-IDRI-0001") else {
        return;
    };
    let (volume, report) = dicom::open(&dir, None, Default::default()).unwrap();
    assert_eq!(report.series.len(), 1);
    // The reader-annotation XML is reported, not silently dropped.
    assert_eq!(report.skipped.len(), 1);
    assert!(
        report.skipped[0]
            .path
            .extension()
            .is_some_and(|e| e == "xml")
    );
    assert!(report.skipped[0].reason.contains("no DICM marker"));
    let g = &volume.geometry;
    assert_eq!(g.size, [512, 512, 133]);
    assert!((g.spacing_mm[0] - 0.703125).abs() < 1e-9);
    assert!(
        (g.spacing_mm[2] - 2.5).abs() < POSITION_TOLERANCE_MM,
        "{:?}",
        g.spacing_mm
    );
    assert!(volume.warnings.is_empty(), "{:?}", volume.warnings);
    assert!(volume.voxels.is_i16());
    for k in [0, 66, 132] {
        assert_slice_matches_file(&volume, &dir, k);
    }
}

#[test]
fn lidc_0003_loads() {
    let Some(dir) = shared_data("lidc/LIDC-IDRI-0003") else {
        return;
    };
    let (volume, _) = dicom::open(&dir, None, Default::default()).unwrap();
    let [nx, ny, nz] = volume.geometry.size;
    assert_eq!((nx, ny), (512, 512));
    assert!(nz > 50, "{nz} slices");
    assert_slice_matches_file(&volume, &dir, nz / 2);
}

#[test]
fn ge_head_ct_reports_tilt_and_uneven_gaps() {
    let Some(dir) = shared_data("dcm_qa_ct/GE") else {
        return;
    };
    // Uneven gaps: nothing is interpolated unless asked.
    let err = dicom::open(&dir, None, Default::default()).unwrap_err();
    assert!(
        matches!(err, dicom::DicomError::MissingSlices { .. }),
        "{err:?}"
    );
    let (volume, report) =
        dicom::open(&dir, None, dicom::LoadOptions { allow_gaps: true }).unwrap();
    assert_eq!(report.series.len(), 1);
    assert!(!volume.filled_slices.is_empty());
    // The files say GantryDetectorTilt +18.5; the geometry must agree.
    let tilt = open_file(dir.join("01.dcm"))
        .unwrap()
        .element(GANTRY_DETECTOR_TILT)
        .unwrap()
        .to_float64()
        .unwrap();
    assert!(
        (volume.geometry.tilt_deg() - tilt.abs()).abs() < 0.05,
        "{} vs {tilt}",
        volume.geometry.tilt_deg()
    );
    let text = volume.warnings.join("\n");
    assert!(text.contains("gantry tilt 18.5"), "{text}");
    assert!(text.contains("uneven slice spacing"), "{text}");
    assert_eq!(volume.geometry.size[0..2], [512, 512]);
}

#[test]
fn philips_folder_separates_scout_axial_and_secondary_captures() {
    let Some(dir) = shared_data("dcm_qa_ct/Philips") else {
        return;
    };
    let report = dicom::scan(&dir).unwrap();
    let scouts: Vec<_> = report
        .series
        .iter()
        .filter(|s| s.first().is_localizer())
        .collect();
    assert_eq!(scouts.len(), 1, "one scout series");
    let dicomdirs = report
        .skipped
        .iter()
        .filter(|s| s.reason.contains("DICOMDIR"))
        .count();
    assert!(dicomdirs >= 1);
    // Every file is accounted for: in a series or skipped with a reason.
    let in_series: usize = report.series.iter().map(|s| s.files.len()).sum();
    assert_eq!(in_series + report.skipped.len(), report.files_seen);
    let (volume, _) = dicom::open(&dir, None, Default::default()).unwrap();
    assert_eq!(volume.info.series_description, "STD BRAIN 5MM");
    assert_eq!(volume.geometry.size, [512, 512, 28]);
}

#[test]
fn every_shared_series_loads_or_fails_with_a_reason() {
    let Some(dir) = shared_data("") else { return };
    let report = dicom::scan(&dir).unwrap();
    assert!(report.series.len() >= 5);
    for series in &report.series {
        match dicom::load_series(series, Default::default()) {
            Ok(volume) => assert_eq!(volume.voxels.size(), volume.geometry.size),
            Err(e) => assert!(!e.to_string().is_empty()),
        }
    }
}
