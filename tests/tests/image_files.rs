//! NIfTI and MetaImage volumes, made from a DICOM series by the converters their users use
//! (dcm2niix, plastimatch: independent readers of DICOM geometry), read back to the same voxels
//! at the same patient positions as the series itself; and refused clearly when damaged.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;

use tessera_dicom::dicom::{self, LoadOptions};
use tessera_dicom::volume::Volume;
use tessera_dicom::{image_file, study};
use tessera_tests::{shared_data, small_phantom_made, tool};

/// How far (in voxels) a converted voxel's position may lie from the DICOM voxel it is: both
/// converters store positions and spacing as `f32`, about 1e-5 mm at these coordinates.
const POSITION_TOLERANCE_VX: f64 = 1e-3;

/// Every voxel of `other` (every `step`-th along x and y) sits on a voxel of `dicom` and holds
/// its value; the sizes hold the same count, and no two voxels land on the same one.
fn assert_same_voxels(dicom: &Volume, other: &Volume, step: usize, what: &str) {
    assert_eq!(
        dicom.geometry.voxel_count(),
        other.geometry.voxel_count(),
        "{what}: voxel count"
    );
    let dicom_from_world = dicom.geometry.world_from_voxel.inverse().unwrap();
    let [nx, ny, nz] = other.geometry.size;
    let mut seen = vec![false; dicom.geometry.voxel_count()];
    let [dx, dy, _] = dicom.geometry.size;
    for z in 0..nz {
        for y in (0..ny).step_by(step) {
            for x in (0..nx).step_by(step) {
                let world = other
                    .geometry
                    .world_from_voxel
                    .apply([x as f64, y as f64, z as f64]);
                let at = dicom_from_world.apply(world);
                let index = at.map(|c| c.round());
                let off = (0..3).map(|i| (at[i] - index[i]).abs()).fold(0.0, f64::max);
                assert!(
                    off < POSITION_TOLERANCE_VX,
                    "{what}: voxel [{x}, {y}, {z}] lies {off:.2e} voxels off the DICOM grid ({at:?})"
                );
                let index = index.map(|c| c as usize);
                let flat = (index[2] * dy + index[1]) * dx + index[0];
                assert!(!seen[flat], "{what}: two voxels at DICOM voxel {index:?}");
                seen[flat] = true;
                assert_eq!(
                    other.voxels.hu_at([x, y, z]),
                    dicom.voxels.hu_at(index),
                    "{what}: HU of voxel [{x}, {y}, {z}] (DICOM voxel {index:?})"
                );
            }
        }
    }
}

fn run(tool: &Path, args: &[&std::ffi::OsStr]) {
    let out = Command::new(tool).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{} failed: {}",
        tool.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The phantom the engine tests use, written as a DICOM series into `dir/dicom`.
fn phantom_series(dir: &Path) -> (PathBuf, Volume) {
    let series = dir.join("dicom");
    let made = small_phantom_made();
    tessera_core::phantom::write_series(&made, &series).unwrap();
    let (volume, _) = dicom::open(&series, None, LoadOptions::default()).unwrap();
    assert_eq!(volume.voxels, made.volume.voxels);
    (series, volume)
}

/// `dcm2niix` on `series`: `vol.nii` (or `vol.nii.gz`) in `out`.
fn dcm2niix(dcm2niix: &Path, series: &Path, out: &Path, gz: bool) -> PathBuf {
    std::fs::create_dir_all(out).unwrap();
    let z = if gz { "y" } else { "n" };
    run(
        dcm2niix,
        &[
            "-z".as_ref(),
            z.as_ref(),
            "-f".as_ref(),
            "vol".as_ref(),
            "-o".as_ref(),
            out.as_os_str(),
            series.as_os_str(),
        ],
    );
    out.join(if gz { "vol.nii.gz" } else { "vol.nii" })
}

#[test]
fn nifti_from_dcm2niix_holds_the_series_voxels_at_their_positions() {
    let Some(converter) = tool("dcm2niix", "dcm2niix") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (series, volume) = phantom_series(dir.path());
    for gz in [false, true] {
        let path = dcm2niix(
            &converter,
            &series,
            &dir.path().join(format!("nii-{gz}")),
            gz,
        );
        let (nifti, report) = study::open(&path, None, LoadOptions::default()).unwrap();
        assert!(report.series.is_empty());
        assert!(nifti.instances.is_empty(), "cites no DICOM instance");
        assert!(nifti.warnings.is_empty(), "{:?}", nifti.warnings);
        // dcm2niix stores the rows the other way; they are read back in DICOM's order.
        assert_eq!(nifti.geometry.flips_to_lps(), [false; 3]);
        assert_eq!(nifti.geometry.tilt_deg(), 0.0);
        assert_same_voxels(&volume, &nifti, 1, &path.display().to_string());
    }
}

#[test]
fn metaimage_from_plastimatch_holds_the_series_voxels_at_their_positions() {
    let Some(converter) = tool("plastimatch", "plastimatch") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (series, volume) = phantom_series(dir.path());
    for name in ["vol.mhd", "vol.mha"] {
        let path = dir.path().join(name);
        run(
            &converter,
            &[
                "convert".as_ref(),
                "--input".as_ref(),
                series.as_os_str(),
                "--output-img".as_ref(),
                path.as_os_str(),
            ],
        );
        let (image, _) = study::open(&path, None, LoadOptions::default()).unwrap();
        assert!(image.warnings.is_empty(), "{:?}", image.warnings);
        assert_same_voxels(&volume, &image, 1, name);
    }
    let inputs = study::input_files(&dir.path().join("vol.mhd"), &Default::default());
    assert_eq!(
        inputs,
        [dir.path().join("vol.mhd"), dir.path().join("vol.raw")]
    );
    // Outputs may go beside a volume file (it is a whole study), never over it or its data.
    use tessera_dicom::io::{OutputError, check_output};
    check_output(&dir.path().join("det.json"), &inputs, false).unwrap();
    for input in &inputs {
        assert!(matches!(
            check_output(input, &inputs, true),
            Err(OutputError::IsInput { .. })
        ));
    }
}

#[test]
fn nifti_of_a_real_chest_ct_holds_its_voxels_at_their_positions() {
    let (Some(converter), Some(series)) = (
        tool("dcm2niix", "dcm2niix"),
        shared_data("lidc/LIDC-IDRI-0001"),
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (volume, _) = dicom::open(&series, None, LoadOptions::default()).unwrap();
    let path = dcm2niix(&converter, &series, dir.path(), true);
    let (nifti, _) = study::open(&path, None, LoadOptions::default()).unwrap();
    assert_same_voxels(&volume, &nifti, 5, "LIDC-IDRI-0001 as NIfTI");
}

/// A header (NIfTI-1, little-endian, int16, sform as given) and `voxels` samples.
fn nifti_bytes(dim: [i16; 5], datatype: i16, srow: [[f32; 4]; 3], voxels: usize) -> Vec<u8> {
    let mut b = vec![0u8; 352];
    b[0..4].copy_from_slice(&348i32.to_le_bytes());
    for (i, d) in dim.iter().enumerate() {
        b[40 + 2 * i..42 + 2 * i].copy_from_slice(&d.to_le_bytes());
    }
    b[70..72].copy_from_slice(&datatype.to_le_bytes());
    b[72..74].copy_from_slice(&16i16.to_le_bytes());
    for (i, p) in [1.0f32, 1.0, 1.0, 1.0].iter().enumerate() {
        b[76 + 4 * i..80 + 4 * i].copy_from_slice(&p.to_le_bytes());
    }
    b[108..112].copy_from_slice(&352f32.to_le_bytes());
    b[123] = 2; // xyzt_units: millimetres
    b[254..256].copy_from_slice(&1i16.to_le_bytes()); // sform_code
    for (r, row) in srow.iter().enumerate() {
        for (c, v) in row.iter().enumerate() {
            let at = 280 + 16 * r + 4 * c;
            b[at..at + 4].copy_from_slice(&v.to_le_bytes());
        }
    }
    b[344..348].copy_from_slice(b"n+1\0");
    b.extend((0..voxels).flat_map(|i| (i as i16 - 1000).to_le_bytes()));
    b
}

const DIAGONAL: [[f32; 4]; 3] = [
    [-0.5, 0.0, 0.0, 10.0],
    [0.0, -0.75, 0.0, 20.0],
    [0.0, 0.0, 2.0, -30.0],
];

#[test]
fn a_hand_made_nifti_is_placed_in_lps_as_its_sform_says() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v.nii");
    std::fs::write(&path, nifti_bytes([3, 4, 3, 2, 1], 4, DIAGONAL, 24)).unwrap();
    let v = image_file::read(&path).unwrap();
    assert_eq!(v.geometry.size, [4, 3, 2]);
    assert_eq!(v.geometry.spacing_mm, [0.5, 0.75, 2.0]);
    // RAS (-0.5 x + 10, -0.75 y + 20, 2 z - 30) is LPS (0.5 x - 10, 0.75 y - 20, 2 z - 30).
    assert_eq!(
        v.geometry.world_from_voxel.apply([1.0, 2.0, 1.0]),
        [-9.5, -18.5, -28.0]
    );
    assert_eq!(
        v.voxels.hu_at([1, 2, 1]),
        Some((12 + 8 + 1) as f32 - 1000.0)
    );
}

#[test]
fn damaged_or_unsupported_volume_files_are_refused_naming_the_file_and_reason() {
    let dir = tempfile::tempdir().unwrap();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "truncated.nii",
            nifti_bytes([3, 4, 3, 2, 1], 4, DIAGONAL, 20),
            "the voxels end after 40 of the 48 bytes the header gives",
        ),
        (
            "series.nii",
            nifti_bytes([4, 4, 3, 2, 5], 4, DIAGONAL, 120),
            "a series of volumes, not one CT volume",
        ),
        (
            "huge.nii",
            nifti_bytes([3, 16000, 16000, 16000, 1], 4, DIAGONAL, 0),
            "voxels, over the 1073741824 a volume may have",
        ),
        (
            "rgb.nii",
            nifti_bytes([3, 4, 3, 2, 1], 128, DIAGONAL, 24),
            "its datatype 128 is not one value per voxel",
        ),
        (
            "flat.nii",
            nifti_bytes([3, 4, 3, 2, 1], 4, [[0.0; 4]; 3], 24),
            "a spacing of 0 mm along axis 0",
        ),
        ("text.nii", b"hello".to_vec(), "not a NIfTI-1 header"),
        (
            "list.mhd",
            b"NDims = 3\nDimSize = 2 2 2\nElementType = MET_SHORT\nElementDataFile = LIST\n".to_vec(),
            "spread over several files",
        ),
        (
            "nodata.mhd",
            b"NDims = 3\nDimSize = 2 2 2\nElementType = MET_SHORT\nElementDataFile = gone.raw\n"
                .to_vec(),
            "gone.raw",
        ),
        (
            "noheader.mhd",
            b"\x00\x01binary".to_vec(),
            "not a MetaImage header",
        ),
        (
            "4d.mha",
            b"NDims = 4\nElementDataFile = LOCAL\n".to_vec(),
            "NDims is 4; only 3D volumes are read",
        ),
        (
            "short.mha",
            b"NDims = 3\nDimSize = 2 2 2\nElementType = MET_SHORT\nElementDataFile = LOCAL\n\x01\x02"
                .to_vec(),
            "the voxels end after 2 of the 16 bytes",
        ),
    ];
    for (name, bytes, reason) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, &bytes).unwrap();
        let message = study::open(&path, None, LoadOptions::default())
            .unwrap_err()
            .to_string();
        assert!(
            message.contains(&path.display().to_string()) && message.contains(reason),
            "{name}: {message}"
        );
        assert_eq!(std::fs::read(&path).unwrap(), bytes, "{name} is unchanged");
    }
}

#[test]
fn detections_on_a_nifti_are_those_on_its_series_and_refuse_an_sr() {
    let Some(converter) = tool("dcm2niix", "dcm2niix") else {
        return;
    };
    if !tessera_tests::runtime_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (series, _) = phantom_series(dir.path());
    let path = dcm2niix(&converter, &series, &dir.path().join("nii"), true);
    let report_of = |path: &Path| {
        use tessera_core::pipeline;
        use tessera_plan::model::{Model, shipped_models_dir};
        use tessera_plan::request::DetectConfig;
        let model = Model::load(&shipped_models_dir().join("tessera-test-tiny")).unwrap();
        let (volume, _) = study::open(path, None, LoadOptions::default()).unwrap();
        let mut config = DetectConfig::new([64, 64, 32]);
        config.score_threshold = Some(0.2);
        let cancel = tessera_plan::device::CancelToken::new();
        let result = pipeline::detect(&volume, &model, &config, &cancel, &mut |_| {}).unwrap();
        tessera_core::report::DetectionReport::from_result(&result)
    };
    let (from_dicom, from_nifti) = (report_of(&series), report_of(&path));
    assert!(!from_dicom.detections.is_empty());
    assert_eq!(from_dicom.detections.len(), from_nifti.detections.len());
    for (a, b) in from_dicom.detections.iter().zip(&from_nifti.detections) {
        assert_eq!(a.score, b.score);
        for i in 0..3 {
            // The converters store positions as f32.
            assert!(
                (a.center_lps_mm[i] - b.center_lps_mm[i]).abs() < 1e-3,
                "{a:?} vs {b:?}"
            );
        }
    }
    let options = tessera_core::sr::SrOptions::now(tessera_core::sr::Selection::All);
    let refused = tessera_core::sr::document(&from_nifti, None, &options).unwrap_err();
    assert!(
        refused.to_string().contains("not read from DICOM"),
        "{refused}"
    );
}

/// The series' slices rewritten by `rewrite` (from, to) into `dir/name`: the same volume.
fn rewritten_series_is_the_same_volume(
    series: &Path,
    volume: &Volume,
    dir: &Path,
    name: &str,
    rewrite: &dyn Fn(&Path, &Path),
) {
    let out = dir.join(name);
    std::fs::create_dir_all(&out).unwrap();
    for entry in std::fs::read_dir(series).unwrap() {
        let from = entry.unwrap().path();
        if from.extension().is_some_and(|e| e == "dcm") {
            rewrite(&from, &out.join(from.file_name().unwrap()));
        }
    }
    let (read, report) = dicom::open(&out, None, LoadOptions::default()).unwrap();
    assert!(report.skipped.is_empty(), "{name}: {:?}", report.skipped);
    assert_eq!(read.geometry, volume.geometry, "{name}");
    assert_eq!(read.voxels, volume.voxels, "{name}");
    assert_eq!(read.info.series_uid, volume.info.series_uid, "{name}");
    assert_eq!(read.instances, volume.instances, "{name}");
}

#[test]
fn dicom_slices_without_preamble_or_meta_group_are_read_as_the_series() {
    let dir = tempfile::tempdir().unwrap();
    let (series, volume) = phantom_series(dir.path());
    // No preamble: `DICM` and the meta group first (some writers, pydicom's raw output).
    rewritten_series_is_the_same_volume(
        &series,
        &volume,
        dir.path(),
        "no-preamble",
        &|from, to| {
            std::fs::write(to, &std::fs::read(from).unwrap()[128..]).unwrap();
        },
    );
    let Some(dcmconv) = tool("dcmconv", "dcmtk") else {
        return;
    };
    // No preamble, no meta group: the data set alone (`dcmconv -F`), explicit and implicit VR.
    for (name, syntax) in [("bare-explicit", "+te"), ("bare-implicit", "+ti")] {
        rewritten_series_is_the_same_volume(&series, &volume, dir.path(), name, &|from, to| {
            run(
                &dcmconv,
                &[
                    "-F".as_ref(),
                    syntax.as_ref(),
                    from.as_os_str(),
                    to.as_os_str(),
                ],
            );
        });
    }
}
