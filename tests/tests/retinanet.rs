//! The RetinaNet family against MONAI itself: Tessera runs the CI test model
//! (`assets/models/tessera-test-retinanet`, lung_nodule_ct_detection's architecture on a narrow
//! backbone) on a phantom and must give MONAI's own `RetinaNetDetector` detections, detection
//! by detection, in its sliding-window modes and on the whole volume. The golden files come
//! from `training/monai_bundle/golden.py` (torch + MONAI, outside CI) on the same phantom.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

use serde::Deserialize;
use tessera_core::phantom::{self, PhantomSpec};
use tessera_core::pipeline::{self, DetectionResult};
use tessera_plan::blend::BlendMode;
use tessera_plan::device::CancelToken;
use tessera_plan::model::{Model, shipped_models_dir};
use tessera_plan::plan::PlanError;
use tessera_plan::request::DetectConfig;
use tessera_tests::runtime_available;

/// MONAI's figures, replayed here: ONNX Runtime against PyTorch rounds differently.
const SCORE: f64 = 1e-4;
const FACE_VOXELS: f64 = 0.1;

#[derive(Deserialize)]
struct Golden {
    image_size_xyz: [usize; 3],
    roi_xyz: Option<[usize; 3]>,
    overlap: Option<f64>,
    mode: Option<String>,
    score_threshold: f64,
    detections: Vec<MonaiDetection>,
}

#[derive(Deserialize)]
struct MonaiDetection {
    score: f64,
    box_xyzxyz: [f64; 6],
}

fn golden(name: &str) -> Golden {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join(format!("golden/retinanet/monai_{name}.json"));
    serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap()
}

fn model() -> Model {
    Model::load(&shipped_models_dir().join("tessera-test-retinanet")).unwrap()
}

/// The phantom the golden files were made on (`tessera phantom --seed 3 --size 224x208x112
/// --spacing 0.703125,0.703125,1.25 --nodules 12 --masses 1`), at the card's spacing.
fn parity_phantom() -> tessera_dicom::volume::Volume {
    let spec = PhantomSpec {
        seed: 3,
        size: [224, 208, 112],
        spacing_mm: [0.703125, 0.703125, 1.25],
        nodules: 12,
        noise_hu: 18.0,
        masses: 1,
    };
    phantom::generate(&spec).unwrap().volume
}

fn run(config: &DetectConfig) -> DetectionResult {
    pipeline::detect(
        &parity_phantom(),
        &model(),
        config,
        &CancelToken::new(),
        &mut |_| {},
    )
    .unwrap()
}

/// Every MONAI detection has one Tessera detection with the same box (each face within
/// [`FACE_VOXELS`]) and score (within [`SCORE`]), and there are no others, and at least
/// 50 were compared: fewer would prove little.
fn assert_same_detections(result: &DetectionResult, golden: &Golden, what: &str) {
    assert_eq!(
        result.model_geometry.size, golden.image_size_xyz,
        "{what}: not the golden's image"
    );
    let ours: Vec<([f64; 6], f64)> = result
        .detections
        .iter()
        .map(|d| {
            let (lo, hi) = (d.model_box.min(), d.model_box.max());
            (
                [lo[0], lo[1], lo[2], hi[0], hi[1], hi[2]],
                f64::from(d.score),
            )
        })
        .collect();
    assert_eq!(
        ours.len(),
        golden.detections.len(),
        "{what}: detection counts differ"
    );
    let mut used = vec![false; ours.len()];
    let (mut worst_face, mut worst_score) = (0.0f64, 0.0f64);
    for (i, theirs) in golden.detections.iter().enumerate() {
        let face = |b: &[f64; 6]| {
            (0..6)
                .map(|k| (b[k] - theirs.box_xyzxyz[k]).abs())
                .fold(0.0, f64::max)
        };
        let best = (0..ours.len())
            .filter(|j| !used[*j])
            .min_by(|a, b| face(&ours[*a].0).total_cmp(&face(&ours[*b].0)))
            .unwrap();
        let (f, s) = (face(&ours[best].0), (ours[best].1 - theirs.score).abs());
        assert!(
            f <= FACE_VOXELS && s <= SCORE,
            "{what}: MONAI's detection {i} (score {}, box {:?}) has no match: nearest box {:?} score {}, faces {f:.2e} voxels apart, scores {s:.2e}",
            theirs.score,
            theirs.box_xyzxyz,
            ours[best].0,
            ours[best].1
        );
        used[best] = true;
        worst_face = worst_face.max(f);
        worst_score = worst_score.max(s);
    }
    eprintln!(
        "{what}: {} detections compared with MONAI's, largest face difference {worst_face:.1e} voxels, largest score difference {worst_score:.1e}",
        ours.len()
    );
    assert!(
        ours.len() >= 50,
        "{what}: only {} detections: too few to prove parity",
        ours.len()
    );
}

/// The card's defaults (MONAI's sliding window) on two threads, in `blend`.
fn sliding(golden: &Golden, blend: BlendMode) -> DetectConfig {
    let mut config = DetectConfig::defaults_for(&model());
    config.threads = 2;
    assert_eq!(
        Some(config.tile.patch),
        golden.roi_xyz,
        "the card's patch is MONAI's roi"
    );
    assert_eq!(Some(config.tile.overlap), golden.overlap);
    assert_eq!(golden.mode.as_deref(), Some(blend.to_string().as_str()));
    assert!(
        (f64::from(model().card.default_score_threshold) - golden.score_threshold).abs() < 1e-6
    );
    config.tile.blend = blend;
    config
}

#[test]
fn the_test_retinanet_gives_monais_detections_in_its_sliding_window() {
    if !runtime_available() {
        return;
    }
    let golden = golden("sliding_window");
    let config = sliding(&golden, BlendMode::Constant);
    assert_eq!(
        DetectConfig::defaults_for(&model()).tile.blend,
        BlendMode::Constant
    );
    let result = run(&config);
    assert!(result.plan.windows.len() > 1, "{}", result.plan);
    assert_same_detections(&result, &golden, "sliding window, constant");
    // A lung nodule bundle has no lung field; its card says its findings are lung nodules.
    assert!(result.lung_rads);
    assert!(result.detections.iter().all(|d| d.lung_rads.is_some()));
    let across = result.detections.iter().filter(|d| d.crosses_seam).count();
    assert!(across > 0, "no detection crosses a window seam");
    eprintln!("{across} of them cross a window seam");
}

#[test]
fn the_test_retinanet_gives_monais_detections_with_gaussian_blending() {
    if !runtime_available() {
        return;
    }
    let golden = golden("sliding_window_gaussian");
    let result = run(&sliding(&golden, BlendMode::Gaussian));
    assert_same_detections(&result, &golden, "sliding window, gaussian");
}

#[test]
fn the_test_retinanet_gives_monais_detections_on_the_whole_volume() {
    if !runtime_available() {
        return;
    }
    let golden = golden("whole_volume");
    assert!(golden.roi_xyz.is_none());
    let mut config = DetectConfig::defaults_for(&model());
    config.threads = 2;
    config.tile.patch = golden.image_size_xyz;
    config.tile.allow_single_pass = true;
    let result = run(&config);
    assert_eq!(result.plan.windows.len(), 1);
    assert_same_detections(&result, &golden, "whole volume");
}

#[test]
fn halo_mode_is_refused_for_a_model_that_normalises_over_its_window() {
    let model = model();
    assert!(
        model
            .card
            .window_dependent
            .as_deref()
            .is_some_and(|why| why.contains("GroupNorm"))
    );
    let mut config = DetectConfig::defaults_for(&model);
    config.tile.blend = BlendMode::Halo;
    let err = tessera_plan::request::plan_for([224, 208, 112], &model, &config, 0).unwrap_err();
    assert!(matches!(err, PlanError::HaloNotExact { .. }), "{err}");
    assert!(
        err.to_string().contains("--blend constant or gaussian"),
        "{err}"
    );
    // The blending modes need no core: a window far narrower than the receptive field plans.
    config.tile.blend = BlendMode::Constant;
    config.tile.patch = [64, 64, 32];
    let plan = tessera_plan::request::plan_for([224, 208, 112], &model, &config, 0).unwrap();
    assert!(plan.windows.len() > 8);
}
