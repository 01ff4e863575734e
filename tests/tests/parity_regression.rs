//! Parity as a permanent regression test: tiled runs against the whole-volume reference, and
//! golden detections that change only on purpose.
//!
//! The shipped trained detector does not exist yet; until it does, these run the engine's test
//! model (fixed random weights). Its heatmap is nearly flat, so blended modes are checked on the
//! maps (`engine.rs`), and detection-level parity here is for the exact (halo) mode.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use tessera_core::infer::arena::CpuAllocator;
use tessera_core::infer::{CancelToken, Device};
use tessera_core::model::{Model, Precision, shipped_models_dir};
use tessera_core::parity::{Tolerances, compare, compare_detections};
use tessera_core::phantom::{self, PhantomSpec};
use tessera_core::pipeline::{self, DEFAULT_NMS_IOU, DetectConfig};
use tessera_core::plan::{BlendMode, TileSpec};
use tessera_core::report::{DetectionRecord, DetectionReport};
use tessera_core::volume::Volume;
use tessera_tests::{runtime_available, shared_data};

/// Exact means exact: halo stitching reproduces the whole-volume run bit for bit.
const EXACT: Tolerances = Tolerances {
    score: 0.0,
    box_voxels: 0.0,
};
/// Golden files may be replayed on another CPU, whose vector units can round differently.
const GOLDEN: Tolerances = Tolerances {
    score: 1e-5,
    box_voxels: 0.01,
};

fn model() -> Model {
    Model::load(&shipped_models_dir().join("tessera-test-tiny")).unwrap()
}

fn config(patch: [usize; 3], blend: BlendMode, allow_single_pass: bool) -> DetectConfig {
    DetectConfig {
        tile: TileSpec {
            patch,
            overlap: 0.25,
            blend,
            allow_single_pass,
            memory_budget_bytes: None,
        },
        device: Device::Cpu,
        threads: 2,
        allocator: CpuAllocator::default(),
        score_threshold: Some(0.28),
        nms_iou: DEFAULT_NMS_IOU,
        ort_lib: None,
        precision: Precision::Fp32,
        memory_model: None,
    }
}

fn run(volume: &Volume, model: &Model, config: &DetectConfig) -> DetectionReport {
    let result = pipeline::detect(volume, model, config, &CancelToken::new(), &mut |_| {}).unwrap();
    DetectionReport::from_result(&result)
}

fn whole_patch(volume: &Volume) -> [usize; 3] {
    volume.geometry.size.map(|n| n.div_ceil(2) * 2)
}

fn assert_halo_matches_whole(volume: &Volume, patches: &[[usize; 3]]) {
    let model = model();
    let reference = run(
        volume,
        &model,
        &config(whole_patch(volume), BlendMode::Halo, true),
    );
    assert!(
        !reference.detections.is_empty(),
        "the reference found nothing: the test would prove nothing"
    );
    for patch in patches {
        let tiled = run(volume, &model, &config(*patch, BlendMode::Halo, false));
        assert!(tiled.stats.windows > 1);
        let parity = compare(&reference, &tiled, EXACT);
        assert!(
            parity.within_tolerance,
            "{patch:?}:\n{}",
            parity.to_markdown(&reference, &tiled, "whole", "tiled")
        );
    }
}

#[test]
fn halo_runs_match_the_whole_volume_on_a_phantom_at_four_patch_sizes() {
    if !runtime_available() {
        return;
    }
    let spec = PhantomSpec {
        seed: 31,
        size: [160, 144, 60],
        spacing_mm: [2.0, 2.2, 4.0],
        nodules: 4,
        noise_hu: 18.0,
    };
    let volume = phantom::generate(&spec).unwrap().volume;
    assert_halo_matches_whole(
        &volume,
        &[[160, 144, 24], [80, 72, 60], [64, 64, 32], [48, 40, 20]],
    );
}

#[test]
fn halo_runs_match_the_whole_volume_on_lidc() {
    if !runtime_available() {
        return;
    }
    for case in ["lidc/LIDC-IDRI-0001", "lidc/LIDC-IDRI-0003"] {
        let Some(dir) = shared_data(case) else {
            return;
        };
        let (volume, _) = tessera_core::dicom::open(&dir, None).unwrap();
        // The seed's fix: full axial context, tiled along z; and a narrower one.
        assert_halo_matches_whole(&volume, &[[512, 512, 64], [256, 256, 48]]);
    }
}

fn golden_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("golden/phantom-seed9-tessera-test-tiny.json")
}

/// Set `TESSERA_UPDATE_GOLDEN=1` to rewrite the golden file, on purpose, in the same commit as
/// the change that moves the detections.
#[test]
fn golden_detections_are_unchanged() {
    if !runtime_available() {
        return;
    }
    let spec = PhantomSpec {
        seed: 9,
        size: [128, 128, 48],
        spacing_mm: [2.5, 2.5, 5.0],
        nodules: 3,
        noise_hu: 18.0,
    };
    let volume = phantom::generate(&spec).unwrap().volume;
    let report = run(
        &volume,
        &model(),
        &config([64, 64, 32], BlendMode::Halo, false),
    );
    if std::env::var_os("TESSERA_UPDATE_GOLDEN").is_some() {
        let json = serde_json::to_vec_pretty(&report.detections).unwrap();
        std::fs::write(golden_path(), json).unwrap();
        eprintln!("golden file rewritten: {}", golden_path().display());
        return;
    }
    let golden: Vec<DetectionRecord> =
        serde_json::from_slice(&std::fs::read(golden_path()).unwrap()).unwrap();
    assert!(!golden.is_empty());
    let parity = compare_detections(
        &golden,
        &report.detections,
        report.plan.model_spacing_mm,
        GOLDEN,
    );
    assert!(
        parity.within_tolerance,
        "detections moved: if on purpose, rerun with TESSERA_UPDATE_GOLDEN=1 and commit the file\n{parity:?}"
    );
    // The world coordinates follow the boxes.
    for (g, d) in golden.iter().zip(&report.detections) {
        for a in 0..3 {
            assert!(
                (g.center_lps_mm[a] - d.center_lps_mm[a]).abs() < 0.05,
                "{g:?} vs {d:?}"
            );
        }
    }
}
