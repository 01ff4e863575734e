//! What the fuzz targets run (`fuzz/`, cargo-fuzz on nightly), kept here so that the inputs
//! a fuzzer once crashed on are replayed by a stable test in CI
//! (`tests/tests/fuzz_regressions.rs`, inputs in `tests/fuzz-regressions/<target>/`).
//!
//! Each body may return any error; it must never panic, abort or hang.

// Test helpers: a broken fixture is a bug in the harness, so failing loudly is right.
#![allow(clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use tessera_dicom::dicom::write::{CtSlice, PixelEncoding, write_ct_slice};
use tessera_dicom::dicom::{self, LoadOptions};
use tessera_dicom::volume::SeriesInfo;

/// What a fuzz target runs on one input.
pub type Body = fn(&[u8]);

/// The fuzz targets, by name (the folders of `tests/fuzz-regressions/` and `fuzz/fuzz_targets/`).
pub const TARGETS: [(&str, Body); 6] = [
    ("dicom_series", dicom_series),
    ("model_card", model_card),
    ("det_json", det_json),
    ("sr_file", sr_file),
    ("nifti_file", nifti_file),
    ("metaimage_file", metaimage_file),
];

/// A per-process scratch folder (in memory where the system has one).
fn scratch(name: &str) -> PathBuf {
    let base = Path::new("/dev/shm");
    let base = if base.is_dir() {
        base.to_path_buf()
    } else {
        std::env::temp_dir()
    };
    let dir = base.join(format!("tessera-fuzz-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch folder");
    dir
}

/// Two valid 16x16 slices at z = 0 and z = 4 mm, written once: the fuzzed file joins them, so
/// that grouping, sorting, gap handling and decoding all see it.
fn neighbours() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = scratch("series");
        let info = SeriesInfo {
            frame_of_reference_uid: "2.25.80".into(),
            series_uid: "2.25.77".into(),
            study_uid: "2.25.78".into(),
            modality: "CT".into(),
            ..SeriesInfo::default()
        };
        for (k, z) in [(0i16, 0.0), (1, 4.0)] {
            let stored: Vec<i16> = (0..256).map(|i| i * 3 + k * 50).collect();
            write_ct_slice(
                &dir.join(format!("n{k}.dcm")),
                &CtSlice {
                    info: &info,
                    sop_instance_uid: format!("2.25.79{k}"),
                    instance_number: i64::from(k) + 1,
                    position_lps_mm: [0.0, 0.0, z],
                    orientation: [1.0, 0.0, 0.0, 0.0, 1.0, 0.0],
                    pixel_spacing_mm: [0.8, 0.8],
                    slice_thickness_mm: 2.0,
                    columns: 16,
                    rows: 16,
                    stored: &stored,
                    rescale_slope: 1.0,
                    rescale_intercept: -1024.0,
                    image_type: "ORIGINAL\\PRIMARY\\AXIAL",
                    encoding: PixelEncoding::Native,
                },
            )
            .expect("a neighbour slice");
        }
        dir
    })
}

/// Bytes -> series -> volume: the fuzzed file beside two valid slices of a series, scanned,
/// laid out and decoded with and without gaps allowed.
pub fn dicom_series(data: &[u8]) {
    let dir = neighbours();
    let victim = dir.join("victim.dcm");
    if std::fs::write(&victim, data).is_err() {
        return;
    }
    let Ok(report) = dicom::scan(dir) else {
        return;
    };
    for series in &report.series {
        for allow_gaps in [false, true] {
            let options = LoadOptions { allow_gaps };
            if let Ok(layout) = dicom::layout(series, options) {
                let _ = dicom::decode(series, &layout);
            }
            let _ = dicom::load_series(series, options);
        }
    }
}

/// Bytes -> a `.nii` file (gzip-compressed or not) -> a volume.
pub fn nifti_file(data: &[u8]) {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let dir = DIR.get_or_init(|| scratch("nifti"));
    let path = dir.join("v.nii");
    if std::fs::write(&path, data).is_ok() {
        let _ = tessera_dicom::image_file::read(&path);
    }
}

/// Bytes -> a MetaImage header and its voxels: as `.mha` (voxels after the header), and as
/// `.mhd` beside a fixed 4 KiB data file `v.raw` that its `ElementDataFile` may name.
pub fn metaimage_file(data: &[u8]) {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let dir = scratch("metaimage");
        let raw: Vec<u8> = (0..4096u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(dir.join("v.raw"), raw).expect("the fixed data file");
        dir
    });
    for name in ["v.mha", "v.mhd"] {
        let path = dir.join(name);
        if std::fs::write(&path, data).is_ok() {
            let _ = tessera_dicom::image_file::read(&path);
        }
    }
}

/// Bytes -> `model.json` -> a loaded, checked model (its ONNX file is the test model's).
pub fn model_card(data: &[u8]) {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let dir = DIR.get_or_init(|| scratch("model"));
    if std::fs::write(dir.join("model.json"), data).is_err() {
        return;
    }
    if let Ok(model) = tessera_plan::model::Model::load(dir) {
        let card = &model.card;
        let _ = card.grid();
        let _ = card.receptive_radius();
    }
}

/// Bytes -> `det.json` -> a report, compared with itself and written as CSV.
pub fn det_json(data: &[u8]) {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let dir = DIR.get_or_init(|| scratch("det"));
    let path = dir.join("det.json");
    if std::fs::write(&path, data).is_err() {
        return;
    }
    if let Ok(report) = tessera_core::report::DetectionReport::read_json(&path) {
        let _ = tessera_core::parity::compare(&report, &report, Default::default());
        let _ = report.luna16_csv();
    }
}

/// Bytes -> an SR file (from a PACS, say) -> its content tree -> its findings, placed on a
/// small volume.
pub fn sr_file(data: &[u8]) {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    let dir = DIR.get_or_init(|| scratch("sr"));
    let path = dir.join("sr.dcm");
    if std::fs::write(&path, data).is_err() {
        return;
    }
    let Ok(read) = dicom::sr::read_sr(&path) else {
        return;
    };
    if let Ok(findings) = tessera_core::sr::findings(&read, &path) {
        let geometry = tessera_dicom::volume::Geometry::axis_aligned(
            [64, 64, 32],
            [0.7, 0.7, 2.5],
            [-20.0, -20.0, 0.0],
        );
        for f in &findings {
            let _ = f.study_box(&geometry);
        }
    }
}

/// Seeds made at run time (so that no DICOM file is committed): for `sr_file`, an SR with one
/// reviewed finding as Tessera writes it, and the same cut short.
pub fn generated_seeds(target: &str) -> Vec<(String, Vec<u8>)> {
    if target != "sr_file" {
        return Vec::new();
    }
    let source = seed_source();
    let Ok(bytes) = dicom::sr::sr_bytes(&seed_sr(&source)) else {
        return Vec::new();
    };
    let cut = bytes[..bytes.len().saturating_sub(200)].to_vec();
    vec![("valid-sr".into(), bytes), ("cut-short-sr".into(), cut)]
}

fn seed_source() -> tessera_dicom::volume::SeriesSource {
    tessera_dicom::volume::SeriesSource {
        study_uid: "2.25.11".into(),
        series_uid: "2.25.12".into(),
        frame_of_reference_uid: "2.25.13".into(),
        modality: "CT".into(),
        study_description: String::new(),
        identity: tessera_dicom::volume::StudyIdentity::default(),
        instances: vec![tessera_dicom::volume::SourceInstance {
            sop_class_uid: dicom::write::CT_IMAGE_STORAGE.into(),
            sop_instance_uid: "2.25.14".into(),
        }],
        axes_lps: [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
    }
}

fn seed_sr(source: &tessera_dicom::volume::SeriesSource) -> dicom::sr::SrDocument<'_> {
    use dicom::sr::{GraphicType3d, Item, Relationship, Value};
    use tessera_core::sr::codes as c;
    let contains = |concept, value| Item::new(Relationship::Contains, concept, value);
    let group = Item::container(c::measurement_group())
        .with(contains(
            c::tracking_identifier(),
            Value::Text("seed".into()),
        ))
        .with(contains(
            c::volume_surface(),
            Value::Scoord3d {
                graphic_type: GraphicType3d::Ellipsoid,
                points_lps_mm: vec![
                    [-5.0, 0.0, 0.0],
                    [5.0, 0.0, 0.0],
                    [0.0, -5.0, 0.0],
                    [0.0, 5.0, 0.0],
                    [0.0, 0.0, -5.0],
                    [0.0, 0.0, 5.0],
                ],
                frame_of_reference_uid: source.frame_of_reference_uid.clone(),
            },
        ))
        .with(contains(
            c::certainty_of_finding(),
            Value::Num {
                value: 87.5,
                units: c::percent(),
            },
        ))
        .with(contains(
            c::reader_decision(),
            Value::Code(c::decision("accepted")),
        ));
    dicom::sr::SrDocument {
        source,
        sop_instance_uid: "2.25.15".into(),
        series_uid: "2.25.16".into(),
        series_number: 1,
        instance_number: 1,
        series_description: String::new(),
        manufacturer: "Tessera".into(),
        model_name: "seed".into(),
        software_versions: String::new(),
        content_date: "20261204".into(),
        content_time: "120000".into(),
        complete: true,
        private_schemes: Vec::new(),
        root: Item::container(c::imaging_measurement_report())
            .with(Item::container(c::imaging_measurements()).with(group)),
    }
}
