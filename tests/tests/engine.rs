//! The tiling engine on the tiny test model: halo stitching is exact, blending is close,
//! events come in order, cancel stops the run.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use tessera_core::pipeline::{self, Event, PipelineError};
use tessera_dicom::volume::Volume;
use tessera_plan::blend::BlendMode;
use tessera_plan::device::CancelToken;
use tessera_plan::model::{Model, Precision, shipped_models_dir};
use tessera_plan::plan::PlanError;
use tessera_plan::request::DetectConfig;
use tessera_tests::{runtime_available, small_phantom};

fn model() -> Model {
    Model::load(&shipped_models_dir().join("tessera-test-tiny")).unwrap()
}

fn volume() -> Volume {
    small_phantom()
}

/// The defaults on two threads at a 0.2 threshold, with `blend` at half overlap.
fn config(patch: [usize; 3], blend: BlendMode) -> DetectConfig {
    let mut c = DetectConfig {
        threads: 2,
        score_threshold: Some(0.2),
        ..DetectConfig::new(patch)
    };
    c.tile.overlap = 0.5;
    c.tile.blend = blend;
    c
}

fn whole(volume: &Volume, model: &Model) -> pipeline::DetectionResult {
    let mut c = config([128, 128, 64], BlendMode::Halo);
    c.tile.allow_single_pass = true;
    pipeline::detect(volume, model, &c, &CancelToken::new(), &mut |_| {}).unwrap()
}

#[test]
fn halo_stitching_is_bit_identical_to_a_whole_volume_run() {
    if !runtime_available() {
        return;
    }
    let (volume, model) = (volume(), model());
    let reference = whole(&volume, &model);
    assert_eq!(reference.plan.windows.len(), 1);
    assert!(
        !reference.detections.is_empty(),
        "the reference run found nothing to compare"
    );
    for patch in [[64, 64, 32], [48, 104, 16], [120, 40, 20], [32, 32, 12]] {
        let tiled = pipeline::detect(
            &volume,
            &model,
            &config(patch, BlendMode::Halo),
            &CancelToken::new(),
            &mut |_| {},
        )
        .unwrap();
        assert!(tiled.plan.windows.len() > 1, "{patch:?} did not tile");
        for (head, (a, b)) in tiled
            .maps
            .heads
            .iter()
            .zip(&reference.maps.heads)
            .enumerate()
        {
            assert_eq!(a.name, b.name);
            let differing = a
                .map
                .iter()
                .zip(b.map.iter())
                .filter(|(x, y)| x.to_bits() != y.to_bits())
                .count();
            assert_eq!(
                differing, 0,
                "patch {patch:?}: head {head} differs in {differing} cells"
            );
        }
        assert_eq!(tiled.detections.len(), reference.detections.len());
        for (t, r) in tiled.detections.iter().zip(&reference.detections) {
            assert_eq!(t.model_box, r.model_box);
            assert_eq!(t.box_voxel, r.box_voxel);
        }
        assert!(
            tiled.detections.iter().any(|d| d.crosses_seam),
            "{patch:?}: no detection crosses a seam"
        );
    }
}

/// Gaussian and constant blending differ from the reference only near window edges, where each
/// window saw zero padding instead of its neighbour's voxels. The test model's heatmap is nearly
/// flat (random weights), so its peaks are not a fair measure; the maps themselves are.
#[test]
fn blended_modes_stay_close_to_the_whole_volume_maps() {
    if !runtime_available() {
        return;
    }
    let (volume, model) = (volume(), model());
    let reference = whole(&volume, &model);
    for (blend, tolerance) in [
        (BlendMode::Gaussian, GAUSSIAN_TOLERANCE),
        (BlendMode::Constant, CONSTANT_TOLERANCE),
    ] {
        let run = pipeline::detect(
            &volume,
            &model,
            &config([64, 64, 32], blend),
            &CancelToken::new(),
            &mut |_| {},
        )
        .unwrap();
        let heatmap = model.card.score_head().unwrap().name;
        let (a, b) = (
            run.maps.head(heatmap).unwrap(),
            reference.maps.head(heatmap).unwrap(),
        );
        let worst = a
            .iter()
            .zip(b.iter())
            .map(|(x, y)| (x - y).abs())
            .fold(0.0f32, f32::max);
        let differing = a.iter().zip(b.iter()).filter(|(x, y)| x != y).count();
        eprintln!(
            "{blend}: heatmap max |difference| {worst:.2e}, {differing} of {} cells differ",
            a.len()
        );
        assert!(
            differing > 0,
            "{blend}: identical to the reference, the test would prove nothing"
        );
        assert!(
            worst <= tolerance,
            "{blend}: heatmap differs by up to {worst}"
        );
    }
}

/// Largest heatmap difference allowed (scores are in [0, 1]). Gaussian: measured 9.7e-4 here,
/// edge cells weigh 1e-3 of a centre cell. Constant: measured 0.098, since a window's edge cells
/// (which saw zero padding) count as much as its neighbour's correct ones: the reason halo and
/// gaussian modes exist.
const GAUSSIAN_TOLERANCE: f32 = 2e-3;
const CONSTANT_TOLERANCE: f32 = 0.15;

#[test]
fn events_arrive_in_order() {
    if !runtime_available() {
        return;
    }
    let mut events = Vec::new();
    let result = pipeline::detect(
        &volume(),
        &model(),
        &config([64, 64, 32], BlendMode::Halo),
        &CancelToken::new(),
        &mut |e| {
            events.push(e.clone());
        },
    )
    .unwrap();
    let n = result.plan.windows.len();
    assert_eq!(events.len(), 2 * n + 2);
    assert!(matches!(&events[0], Event::PlanReady(p) if p.windows.len() == n));
    for i in 0..n {
        assert!(
            matches!(events[1 + 2 * i], Event::WindowStarted { index, total, .. } if index == i && total == n)
        );
        assert!(
            matches!(&events[2 + 2 * i], Event::WindowFinished { index, elapsed_s, .. } if *index == i && *elapsed_s > 0.0)
        );
    }
    assert!(
        matches!(events[2 * n + 1], Event::Finished { detections, .. } if detections == result.detections.len())
    );
}

#[test]
fn cancel_stops_the_run_and_says_so() {
    if !runtime_available() {
        return;
    }
    let cancel = CancelToken::new();
    let mut events = Vec::new();
    let result = pipeline::detect(
        &volume(),
        &model(),
        &config([64, 64, 32], BlendMode::Halo),
        &cancel,
        &mut |e| {
            if matches!(e, Event::WindowFinished { index: 1, .. }) {
                cancel.cancel();
            }
            events.push(e.clone());
        },
    );
    assert!(
        matches!(result, Err(PipelineError::Cancelled)),
        "{result:?}"
    );
    assert!(matches!(events.last(), Some(Event::Cancelled)));
    let finished = events
        .iter()
        .filter(|e| matches!(e, Event::WindowFinished { .. }))
        .count();
    assert_eq!(finished, 2, "windows after the cancel must not run");
}

#[test]
fn a_refused_plan_fails_before_any_window() {
    let mut events = Vec::new();
    let result = pipeline::detect(
        &volume(),
        &model(),
        &config([128, 128, 64], BlendMode::Halo),
        &CancelToken::new(),
        &mut |e| {
            events.push(e.clone());
        },
    );
    assert!(
        matches!(
            result,
            Err(PipelineError::Plan(PlanError::SinglePass { .. }))
        ),
        "{result:?}"
    );
    assert_eq!(events.len(), 1);
    assert!(
        matches!(&events[0], Event::Failed(m) if m.starts_with("plan refused: patch 128x128x64 covers the whole volume"))
    );
}

#[test]
fn fp16_runs_report_their_drift_from_fp32() {
    if !runtime_available() {
        return;
    }
    /// The test model's fp16 export moved the heatmap by 3e-4 on the demo; scores live in [0, 1].
    const FP16_DRIFT_LIMIT: f32 = 5e-3;
    let mut c = config([64, 64, 32], BlendMode::Halo);
    c.precision = Precision::Fp16;
    let (volume, model) = (volume(), model());
    let half = pipeline::detect(&volume, &model, &c, &CancelToken::new(), &mut |_| {}).unwrap();
    let drift = half.stats.precision_drift.unwrap();
    assert!(drift > 0.0 && drift < FP16_DRIFT_LIMIT, "drift {drift}");
    let full = pipeline::detect(
        &volume,
        &model,
        &config([64, 64, 32], BlendMode::Halo),
        &CancelToken::new(),
        &mut |_| {},
    )
    .unwrap();
    assert_eq!(full.stats.precision_drift, None);
    let heatmap = model.card.score_head().unwrap().name;
    let worst = half
        .maps
        .head(heatmap)
        .unwrap()
        .iter()
        .zip(full.maps.head(heatmap).unwrap().iter())
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f32::max);
    assert!(worst < FP16_DRIFT_LIMIT, "whole-map drift {worst}");
}

#[test]
fn a_segmentation_model_gives_component_boxes_and_tiles_exactly() {
    if !runtime_available() {
        return;
    }
    let model = Model::load(&shipped_models_dir().join("tessera-test-seg")).unwrap();
    let volume = volume();
    let mut c = config([128, 128, 64], BlendMode::Halo);
    c.tile.allow_single_pass = true;
    c.score_threshold = None; // the card's 0.5
    let run = |c: &DetectConfig| {
        pipeline::detect(&volume, &model, c, &CancelToken::new(), &mut |_| {}).unwrap()
    };
    let whole = run(&c);
    assert_eq!(whole.maps.heads.len(), 1, "one probability map");
    assert!(!whole.detections.is_empty(), "the filter finds dense blobs");
    for d in &whole.detections {
        assert!(d.score >= 0.5, "{d:?}");
        // Component boxes cover whole cells: integer voxel extents at stride 1.
        assert!(d.model_box.size.iter().all(|s| s.fract() == 0.0), "{d:?}");
    }
    let mut t = config([64, 48, 24], BlendMode::Halo);
    t.score_threshold = None;
    let tiled = run(&t);
    assert!(tiled.plan.windows.len() > 1);
    assert_eq!(tiled.maps, whole.maps);
    // The same boxes; only the seam flags differ (a whole-volume run has no seams).
    let boxes = |r: &pipeline::DetectionResult| -> Vec<_> {
        r.detections.iter().map(|d| d.model_box).collect()
    };
    assert_eq!(boxes(&tiled), boxes(&whole));
    assert!(tiled.detections.iter().any(|d| d.crosses_seam));
}

/// The test model with its card edited by `edit`, in a temporary folder (kept while the
/// returned guard lives).
fn tiny_model_with_card(edit: impl Fn(String) -> String) -> (tempfile::TempDir, Model) {
    let dir = tempfile::tempdir().unwrap();
    let source = shipped_models_dir().join("tessera-test-tiny");
    for f in ["model.onnx", "model_fp16.onnx"] {
        std::fs::copy(source.join(f), dir.path().join(f)).unwrap();
    }
    let card = edit(std::fs::read_to_string(source.join("model.json")).unwrap());
    std::fs::write(dir.path().join("model.json"), card).unwrap();
    let model = Model::load(dir.path()).unwrap();
    (dir, model)
}

#[test]
fn the_result_carries_the_lung_field_its_card_asks_for() {
    if !runtime_available() {
        return;
    }
    let volume = volume();
    assert!(
        whole(&volume, &model()).lung_field.is_none(),
        "the test model asks for none"
    );
    let (_dir, chest) =
        tiny_model_with_card(|card| card.replacen('{', "{\n  \"lung_field\": true,", 1));
    let mut c = config([64, 64, 32], BlendMode::Halo);
    c.keep_outside_lungs = true;
    let result = pipeline::detect(&volume, &chest, &c, &CancelToken::new(), &mut |_| {}).unwrap();
    let field = result.lung_field.as_ref().unwrap();
    assert_eq!(field.size, result.model_geometry.size);
    assert!(field.voxels() > 0, "the phantom has lungs");
    assert_eq!(
        result.stats.lung_field.as_ref().map(|s| s.volume_ml),
        Some(field.volume_ml())
    );
    assert!(!result.detections.is_empty());
    for d in &result.detections {
        assert_eq!(
            d.outside_lungs,
            !field.contains(d.model_box.center),
            "{d:?}"
        );
    }
}

#[test]
fn a_card_whose_heads_are_swapped_is_refused_at_load() {
    if !runtime_available() {
        return;
    }
    // The heatmap head names the 3-channel size output, and the other way round.
    let (_dir, model) = tiny_model_with_card(|card| {
        card.replace("\"name\": \"heatmap\"", "\"name\": \"SWAP\"")
            .replace("\"name\": \"size\"", "\"name\": \"heatmap\"")
            .replace("\"name\": \"SWAP\"", "\"name\": \"size\"")
    });
    let mut events = 0;
    let err = pipeline::detect(
        &volume(),
        &model,
        &config([64, 64, 32], BlendMode::Halo),
        &CancelToken::new(),
        &mut |e| events += usize::from(matches!(e, Event::WindowStarted { .. })),
    )
    .unwrap_err();
    assert!(
        err.to_string().contains(
            "output 'size' is not the head its card describes: it has 3 channels, the card's head needs 1"
        ),
        "{err}"
    );
    assert_eq!(events, 0, "refused before any window ran");
}

#[test]
fn a_model_whose_input_differs_from_its_card_is_refused() {
    if !runtime_available() {
        return;
    }
    let (_dir, model) =
        tiny_model_with_card(|card| card.replace("\"name\": \"ct\"", "\"name\": \"image\""));
    let err = pipeline::detect(
        &volume(),
        &model,
        &config([64, 64, 32], BlendMode::Halo),
        &CancelToken::new(),
        &mut |_| {},
    )
    .unwrap_err();
    assert!(
        err.to_string().contains(
            "does not take the input its card describes: the card names input 'image', the model has: ct"
        ),
        "{err}"
    );
}
