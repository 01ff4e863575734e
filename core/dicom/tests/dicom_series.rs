//! Synthetic DICOM series, one per edge case, written by the test and read back.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use tessera_dicom::dicom::write::{CtSlice, PixelEncoding, write_ct_slice};
use tessera_dicom::dicom::{self, DicomError, LoadOptions};
use tessera_dicom::volume::FilledSlice;
use tessera_dicom::volume::{SeriesInfo, Voxels};

const ALLOW_GAPS: LoadOptions = LoadOptions { allow_gaps: true };
const COLS: u16 = 12;
const ROWS: u16 = 10;
/// Geometry is stored as decimal strings of at most 16 characters: good to 1e-6 mm here.
const MM_TOLERANCE: f64 = 1e-6;

fn info(uid: &str) -> SeriesInfo {
    SeriesInfo {
        frame_of_reference_uid: "2.25.2".into(),
        series_uid: uid.into(),
        study_uid: "2.25.1".into(),
        modality: "CT".into(),
        series_description: "synthetic".into(),
        ..SeriesInfo::default()
    }
}

/// Stored values that identify the slice and the pixel: `slice * 100 + y * 2 + x`.
fn stored(slice: usize) -> Vec<i16> {
    (0..usize::from(ROWS) * usize::from(COLS))
        .map(|i| (slice * 100 + (i / usize::from(COLS)) * 2 + i % usize::from(COLS)) as i16)
        .collect()
}

struct SliceSpec {
    file: String,
    z_mm: f64,
    /// In-plane shift along y, for tilted stacks.
    y_mm: f64,
    values: Vec<i16>,
    slope: f64,
    intercept: f64,
    encoding: PixelEncoding,
    uid: &'static str,
    size: (u16, u16),
}

fn slice(index: usize, z_mm: f64) -> SliceSpec {
    SliceSpec {
        file: format!("s{index:03}.dcm"),
        z_mm,
        y_mm: 0.0,
        values: stored(index),
        slope: 1.0,
        intercept: -1024.0,
        encoding: PixelEncoding::Native,
        uid: "2.25.100",
        size: (COLS, ROWS),
    }
}

fn write(dir: &Path, specs: &[SliceSpec]) {
    for (i, s) in specs.iter().enumerate() {
        let info = info(s.uid);
        write_ct_slice(
            &dir.join(&s.file),
            &CtSlice {
                info: &info,
                sop_instance_uid: format!("2.25.{}", 1000 + i),
                instance_number: i as i64 + 1,
                position_lps_mm: [-10.0, -20.0 + s.y_mm, s.z_mm],
                orientation: [1.0, 0.0, 0.0, 0.0, 1.0, 0.0],
                pixel_spacing_mm: [0.5, 0.75],
                slice_thickness_mm: 2.0,
                columns: s.size.0,
                rows: s.size.1,
                stored: &s.values,
                rescale_slope: s.slope,
                rescale_intercept: s.intercept,
                image_type: "ORIGINAL\\PRIMARY\\AXIAL",
                encoding: s.encoding.clone(),
            },
        )
        .unwrap();
    }
}

fn hu_i16(volume: &tessera_dicom::Volume) -> &ndarray::Array3<i16> {
    match &volume.voxels {
        Voxels::I16(a) => a,
        Voxels::F32(_) => panic!("expected an i16 volume"),
    }
}

#[test]
fn regular_series_round_trips_in_position_order() {
    let dir = tempfile::tempdir().unwrap();
    // File names in reverse of position order: sorting must use positions.
    let specs: Vec<SliceSpec> = (0..5)
        .map(|i| SliceSpec {
            file: format!("f{}.dcm", 9 - i),
            ..slice(i, 30.0 + 2.0 * i as f64)
        })
        .collect();
    write(dir.path(), &specs);
    let (volume, report) = dicom::open(dir.path(), None, Default::default()).unwrap();
    assert_eq!(report.series.len(), 1);
    assert!(report.skipped.is_empty());
    assert_eq!(volume.geometry.size, [12, 10, 5]);
    let g = &volume.geometry;
    for (got, want) in g.spacing_mm.iter().zip([0.5, 0.75, 2.0]) {
        assert!(
            (got - want).abs() < MM_TOLERANCE,
            "spacing {:?}",
            g.spacing_mm
        );
    }
    assert_eq!(g.origin_lps_mm(), [-10.0, -20.0, 30.0]);
    let corner = g.world_from_voxel.apply([11.0, 9.0, 4.0]);
    assert!((corner[0] - (-10.0 + 11.0 * 0.5)).abs() < MM_TOLERANCE);
    assert!((corner[1] - (-20.0 + 9.0 * 0.75)).abs() < MM_TOLERANCE);
    assert!((corner[2] - 38.0).abs() < MM_TOLERANCE);
    assert!(volume.warnings.is_empty(), "{:?}", volume.warnings);
    let a = hu_i16(&volume);
    // HU = stored - 1024, slice k at z index k, pixel (x, y) at [z, y, x].
    assert_eq!(a[[3, 4, 5]], (300 + 4 * 2 + 5) as i16 - 1024);
    assert_eq!(a[[0, 0, 0]], -1024);
}

#[test]
fn a_missing_slice_is_refused_unless_gaps_are_allowed_then_filled_and_listed() {
    let dir = tempfile::tempdir().unwrap();
    // Positions 0, 2, 4, 8, 10: the slice at 6 mm is missing.
    let specs: Vec<SliceSpec> = [0.0, 2.0, 4.0, 8.0, 10.0]
        .iter()
        .enumerate()
        .map(|(i, z)| slice(i, *z))
        .collect();
    write(dir.path(), &specs);
    let err = dicom::open(dir.path(), None, LoadOptions::default()).unwrap_err();
    assert!(matches!(err, DicomError::MissingSlices { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("about 1 slice(s) missing"), "{text}");
    assert!(text.contains("--allow-gaps"), "{text}");

    let (volume, _) = dicom::open(dir.path(), None, ALLOW_GAPS).unwrap();
    assert_eq!(volume.geometry.size[2], 6);
    let text = volume.warnings.join("\n");
    assert!(text.contains("uneven slice spacing"), "{text}");
    assert!(text.contains("1 interpolated"), "{text}");
    assert!(text.contains("about 1 missing slice"), "{text}");
    assert!(
        text.contains(
            "slice 3 at (-10.00, -20.00, 6.00) mm is interpolated (no file at this position)"
        ),
        "{text}"
    );
    assert_eq!(
        volume.filled_slices,
        vec![FilledSlice {
            index: 3,
            position_lps_mm: [-10.0, -20.0, 6.0],
            file: None,
        }]
    );
    let a = hu_i16(&volume);
    // Slice 3 (6 mm) is halfway between input slices 2 (4 mm) and 3 (8 mm): 250 + pixel - 1024.
    assert_eq!(a[[3, 1, 1]], 250 + 3 - 1024);
    assert_eq!(a[[4, 1, 1]], 300 + 3 - 1024);
}

#[test]
fn an_unreadable_slice_in_mid_series_is_named_and_never_silently_filled() {
    let dir = tempfile::tempdir().unwrap();
    let specs: Vec<SliceSpec> = (0..5)
        .map(|i| SliceSpec {
            // A slope of 0 makes every voxel the intercept: not a measurement.
            slope: if i == 2 { 0.0 } else { 1.0 },
            ..slice(i, 2.0 * i as f64)
        })
        .collect();
    write(dir.path(), &specs);
    let report = dicom::scan(dir.path()).unwrap();
    assert_eq!(report.series.len(), 1);
    assert_eq!(report.series[0].unreadable.len(), 1);
    let err = dicom::load_series(&report.series[0], LoadOptions::default()).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("s002.dcm: RescaleSlope 0 is not a finite, non-zero number"),
        "{text}"
    );

    let volume = dicom::load_series(&report.series[0], ALLOW_GAPS).unwrap();
    assert_eq!(volume.geometry.size[2], 5);
    assert_eq!(volume.filled_slices.len(), 1);
    let filled = &volume.filled_slices[0];
    assert_eq!(filled.index, 2);
    assert_eq!(
        filled.file.as_deref(),
        Some(dir.path().join("s002.dcm").as_path())
    );
    let text = volume.warnings.join("\n");
    assert!(text.contains("in place of unreadable"), "{text}");
    assert!(
        text.contains(
            "1 unreadable file(s) left out of the series, 0 of them at no known position"
        ),
        "{text}"
    );
}

#[test]
fn duplicate_positions_are_dropped_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let mut specs: Vec<SliceSpec> = (0..4).map(|i| slice(i, 2.0 * i as f64)).collect();
    specs.push(SliceSpec {
        file: "dup.dcm".into(),
        ..slice(9, 4.0)
    });
    write(dir.path(), &specs);
    let (volume, _) = dicom::open(dir.path(), None, Default::default()).unwrap();
    assert_eq!(volume.geometry.size[2], 4);
    assert!(
        volume
            .warnings
            .iter()
            .any(|w| w.contains("1 duplicate slice position")),
        "{:?}",
        volume.warnings
    );
    // The first by InstanceNumber (slice 2, instance 3) is kept over the duplicate (instance 5).
    assert_eq!(hu_i16(&volume)[[2, 0, 0]], 200 - 1024);
}

#[test]
fn mixed_sizes_split_the_series() {
    let dir = tempfile::tempdir().unwrap();
    let mut specs: Vec<SliceSpec> = (0..3).map(|i| slice(i, 2.0 * i as f64)).collect();
    specs.push(SliceSpec {
        file: "odd.dcm".into(),
        size: (8, 8),
        values: vec![0; 64],
        ..slice(3, 6.0)
    });
    write(dir.path(), &specs);
    let report = dicom::scan(dir.path()).unwrap();
    assert_eq!(report.series.len(), 2);
    for s in &report.series {
        let note = s.split_note.as_deref().unwrap_or_default();
        assert!(note.contains("split into 2 parts"), "{note}");
    }
    let (volume, _) = dicom::open(dir.path(), None, Default::default()).unwrap();
    assert_eq!(volume.geometry.size, [12, 10, 3]);
}

#[test]
fn non_dicom_and_truncated_files_are_reported_not_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let specs: Vec<SliceSpec> = (0..3).map(|i| slice(i, 2.0 * i as f64)).collect();
    write(dir.path(), &specs);
    std::fs::write(dir.path().join("notes.txt"), "not an image").unwrap();
    // A header cut short: the scan skips it and says why.
    let bytes = std::fs::read(dir.path().join("s000.dcm")).unwrap();
    std::fs::write(dir.path().join("cut-header.dcm"), &bytes[..200]).unwrap();
    let report = dicom::scan(dir.path()).unwrap();
    assert_eq!(report.files_seen, 5);
    assert_eq!(report.series.len(), 1);
    let reasons: Vec<String> = report
        .skipped
        .iter()
        .map(|s| {
            format!(
                "{}: {}",
                s.path.file_name().unwrap().to_string_lossy(),
                s.reason
            )
        })
        .collect();
    assert_eq!(reasons.len(), 2, "{reasons:?}");
    assert!(
        reasons
            .iter()
            .any(|r| r.starts_with("notes.txt: no DICM marker")),
        "{reasons:?}"
    );
    assert!(
        reasons.iter().any(|r| r.starts_with("cut-header.dcm: ")),
        "{reasons:?}"
    );
}

#[test]
fn truncated_pixel_data_fails_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let specs: Vec<SliceSpec> = (0..3).map(|i| slice(i, 2.0 * i as f64)).collect();
    write(dir.path(), &specs);
    let victim = dir.path().join("s001.dcm");
    let bytes = std::fs::read(&victim).unwrap();
    std::fs::write(&victim, &bytes[..bytes.len() - 50]).unwrap();
    let report = dicom::scan(dir.path()).unwrap();
    let err = dicom::load_series(&report.series[0], Default::default()).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("s001.dcm"), "{text}");
}

#[test]
fn single_slice_loads_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), &[slice(0, 5.0)]);
    let (volume, _) = dicom::open(dir.path(), None, Default::default()).unwrap();
    assert_eq!(volume.geometry.size, [12, 10, 1]);
    assert_eq!(volume.geometry.spacing_mm[2], 2.0);
    assert!(
        volume.warnings[0].contains("single slice"),
        "{:?}",
        volume.warnings
    );
}

#[test]
fn unsupported_transfer_syntax_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let specs: Vec<SliceSpec> = (0..2)
        .map(|i| SliceSpec {
            encoding: PixelEncoding::Encapsulated {
                // JPEG-LS needs the charls codec, which this build leaves out.
                transfer_syntax_uid: "1.2.840.10008.1.2.4.80".into(),
                fragments: vec![vec![0xFF, 0xD8, 0xFF, 0xD9]],
            },
            ..slice(i, 2.0 * i as f64)
        })
        .collect();
    write(dir.path(), &specs);
    let report = dicom::scan(dir.path()).unwrap();
    let err = dicom::load_series(&report.series[0], Default::default()).unwrap_err();
    assert!(
        matches!(err, DicomError::UnsupportedTransferSyntax { .. }),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.starts_with("unsupported transfer syntax JPEG-LS Lossless"),
        "{text}"
    );
    assert!(text.contains("(1.2.840.10008.1.2.4.80) in "), "{text}");
    assert!(text.contains("s000.dcm"), "{text}");
}

#[test]
fn fractional_rescale_gives_f32_hu() {
    let dir = tempfile::tempdir().unwrap();
    let specs: Vec<SliceSpec> = (0..3)
        .map(|i| SliceSpec {
            slope: 0.5,
            intercept: -1000.25,
            ..slice(i, 2.0 * i as f64)
        })
        .collect();
    write(dir.path(), &specs);
    let (volume, _) = dicom::open(dir.path(), None, Default::default()).unwrap();
    let Voxels::F32(a) = &volume.voxels else {
        panic!("expected f32 voxels")
    };
    assert_eq!(a[[2, 1, 3]], (200.0 + 2.0 + 3.0) * 0.5 - 1000.25);
}

#[test]
fn gantry_tilt_is_kept_as_shear_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    // Each slice 2 mm up and 0.5 mm posterior: a tilt of atan(0.25) = 14.04 degrees.
    let specs: Vec<SliceSpec> = (0..4)
        .map(|i| SliceSpec {
            y_mm: 0.5 * i as f64,
            ..slice(i, 2.0 * i as f64)
        })
        .collect();
    write(dir.path(), &specs);
    let (volume, _) = dicom::open(dir.path(), None, Default::default()).unwrap();
    let text = volume.warnings.join("\n");
    assert!(text.contains("gantry tilt 14.04 deg"), "{text}");
    let g = &volume.geometry;
    assert!((g.tilt_deg() - 14.036).abs() < 0.01, "{}", g.tilt_deg());
    let p = g.world_from_voxel.apply([0.0, 0.0, 3.0]);
    assert!(
        (p[1] - (-20.0 + 1.5)).abs() < MM_TOLERANCE && (p[2] - 6.0).abs() < MM_TOLERANCE,
        "{p:?}"
    );
    assert!((g.spacing_mm[2] - 2.0).abs() < MM_TOLERANCE);
}

#[test]
fn loading_never_modifies_the_input() {
    let dir = tempfile::tempdir().unwrap();
    let specs: Vec<SliceSpec> = (0..3).map(|i| slice(i, 2.0 * i as f64)).collect();
    write(dir.path(), &specs);
    let snapshot = |d: &Path| -> Vec<(PathBuf, Vec<u8>, std::time::SystemTime)> {
        let mut v: Vec<_> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| {
                let p = e.unwrap().path();
                let modified = std::fs::metadata(&p).unwrap().modified().unwrap();
                (p.clone(), std::fs::read(&p).unwrap(), modified)
            })
            .collect();
        v.sort();
        v
    };
    let before = snapshot(dir.path());
    dicom::open(dir.path(), None, Default::default()).unwrap();
    assert_eq!(snapshot(dir.path()), before);
}

#[test]
fn empty_folder_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("readme.txt"), "hello").unwrap();
    let err = dicom::open(dir.path(), None, Default::default()).unwrap_err();
    let text = err.to_string();
    assert!(text.starts_with("no DICOM image series found in"), "{text}");
    assert!(text.contains("readme.txt: no DICM marker"), "{text}");
}

#[test]
fn missing_path_is_a_clear_error() {
    let err = dicom::scan(Path::new("/definitely/not/here")).unwrap_err();
    assert!(
        err.to_string()
            .starts_with("cannot read /definitely/not/here"),
        "{err}"
    );
}
