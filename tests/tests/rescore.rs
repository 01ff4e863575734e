//! The rescoring stage on `tessera-test-rescore` (the tiny detector plus a classifier whose
//! score is computed here by hand): which candidates it sees, the score it gives, the order,
//! the threshold, its events, cancel, and the card's hash check.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use tessera_core::pipeline::{self, DetectionResult, Event, PipelineError};
use tessera_dicom::volume::Volume;
use tessera_infer::input;
use tessera_plan::device::CancelToken;
use tessera_plan::model::{Model, ModelError, shipped_models_dir};
use tessera_plan::request::DetectConfig;
use tessera_tests::{runtime_available, small_phantom};

const EDGE: i64 = 8;

fn model() -> Model {
    Model::load(&shipped_models_dir().join("tessera-test-rescore")).unwrap()
}

fn volume() -> Volume {
    small_phantom()
}

/// The defaults on two threads, a 64x64x32 patch at half overlap.
fn config(score_threshold: Option<f32>, rescore: bool) -> DetectConfig {
    let mut c = DetectConfig {
        threads: 2,
        score_threshold,
        rescore,
        ..DetectConfig::new([64, 64, 32])
    };
    c.tile.overlap = 0.5;
    c
}

fn run(volume: &Volume, config: &DetectConfig) -> (DetectionResult, Vec<Event>) {
    let mut events = Vec::new();
    let result = pipeline::detect(volume, &model(), config, &CancelToken::new(), &mut |e| {
        events.push(e.clone());
    })
    .unwrap();
    (result, events)
}

/// The test classifier by hand: sigmoid(sum(ramp * patch)) over the 8^3 voxels from
/// round(centre) - 4, HU normalised to [0, 1] over [-1000, 400], air outside the volume.
fn expected_score(volume: &Volume, center: [f64; 3]) -> f64 {
    let start = center.map(|c| c.round_ties_even() as i64 - EDGE / 2);
    let mut logit = 0.0;
    for z in 0..EDGE {
        for y in 0..EDGE {
            for x in 0..EDGE {
                let v = [start[0] + x, start[1] + y, start[2] + z];
                let hu = v
                    .iter()
                    .all(|&c| c >= 0)
                    .then(|| volume.voxels.hu_at(v.map(|c| c as usize)))
                    .flatten();
                let normalised = hu.map_or(0.0, |hu| {
                    (f64::from(hu).clamp(-1000.0, 400.0) + 1000.0) / 1400.0
                });
                let c = |i: i64| i as f64 - 3.5;
                logit += (c(x) + 2.0 * c(y) + 4.0 * c(z)) / 256.0 * normalised;
            }
        }
    }
    1.0 / (1.0 + (-logit).exp())
}

#[test]
fn the_best_candidates_get_the_classifiers_score_best_first() {
    if !runtime_available() {
        return;
    }
    let volume = volume();
    let spec = model().card.rescore.unwrap();
    // The candidates: the detector alone at the stage's candidate threshold.
    let (alone, _) = run(&volume, &config(Some(spec.candidate_threshold), false));
    assert!(
        alone.detections.len() > spec.candidates,
        "{} candidates: too few to see the cut at {}",
        alone.detections.len(),
        spec.candidates
    );
    let (result, events) = run(&volume, &config(Some(0.0), true));
    assert_eq!(result.detections.len(), spec.candidates);
    assert_eq!(result.stats.rescored, spec.candidates);
    let best = &alone.detections[..spec.candidates];
    for d in &result.detections {
        let candidate = best
            .iter()
            .find(|c| c.model_box.center == d.model_box.center)
            .expect("a rescored detection is one of the best candidates");
        assert_eq!(d.detector_score, Some(candidate.score));
        assert_eq!(d.box_voxel, candidate.box_voxel);
        // The card combines them by geometric mean.
        let expected =
            (expected_score(&volume, d.model_box.center) * f64::from(candidate.score)).sqrt();
        assert!(
            (f64::from(d.score) - expected).abs() < 1e-5,
            "score {} for {:?}, by hand {expected}",
            d.score,
            d.model_box.center
        );
    }
    assert!(
        result
            .detections
            .windows(2)
            .all(|w| w[0].score >= w[1].score)
    );
    assert_eq!(
        result.rescore_sha256.as_deref(),
        model().rescore_file.as_ref().map(|(_, h)| h.as_str())
    );
    let n = events.len();
    assert!(
        matches!(events[n - 3], Event::RescoreStarted { candidates } if candidates == spec.candidates)
    );
    assert!(
        matches!(events[n - 2], Event::RescoreFinished { candidates, elapsed_s, .. } if candidates == spec.candidates && elapsed_s > 0.0)
    );
    assert!(
        matches!(events[n - 1], Event::Finished { detections, .. } if detections == spec.candidates)
    );
    assert!(matches!(events[n - 4], Event::WindowFinished { .. }));
}

#[test]
fn the_default_threshold_is_the_stages_and_applies_to_the_new_score() {
    if !runtime_available() {
        return;
    }
    let volume = volume();
    let spec = model().card.rescore.unwrap();
    let (all, _) = run(&volume, &config(Some(0.0), true));
    let (default, _) = run(&volume, &config(None, true));
    assert_eq!(default.score_threshold, spec.default_score_threshold);
    let kept: Vec<_> = all
        .detections
        .iter()
        .filter(|d| d.score >= spec.default_score_threshold)
        .cloned()
        .collect();
    assert!(
        !kept.is_empty() && kept.len() < all.detections.len(),
        "the threshold {} should split {:?}",
        spec.default_score_threshold,
        all.detections.iter().map(|d| d.score).collect::<Vec<_>>()
    );
    assert_eq!(default.detections, kept);
}

#[test]
fn without_the_stage_the_detectors_scores_and_threshold_stand() {
    if !runtime_available() {
        return;
    }
    let volume = volume();
    let (result, events) = run(&volume, &config(None, false));
    assert_eq!(result.score_threshold, model().card.default_score_threshold);
    assert_eq!(result.stats.rescored, 0);
    assert!(result.rescore_sha256.is_none());
    assert!(result.detections.iter().all(|d| d.detector_score.is_none()));
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, Event::RescoreStarted { .. }))
    );
}

#[test]
fn cancel_during_rescoring_leaves_no_result() {
    if !runtime_available() {
        return;
    }
    let volume = volume();
    let cancel = CancelToken::new();
    let mut events = Vec::new();
    let result = pipeline::detect(&volume, &model(), &config(None, true), &cancel, &mut |e| {
        if matches!(e, Event::RescoreStarted { .. }) {
            cancel.cancel();
        }
        events.push(e.clone());
    });
    assert!(matches!(result, Err(PipelineError::Cancelled)));
    assert!(matches!(events.last(), Some(Event::Cancelled)));
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, Event::RescoreFinished { .. }))
    );
}

#[test]
fn a_changed_rescoring_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let source = shipped_models_dir().join("tessera-test-rescore");
    for f in ["model.json", "model.onnx", "rescore.onnx"] {
        std::fs::copy(source.join(f), dir.path().join(f)).unwrap();
    }
    let mut bytes = std::fs::read(dir.path().join("rescore.onnx")).unwrap();
    bytes[0] ^= 1;
    std::fs::write(dir.path().join("rescore.onnx"), bytes).unwrap();
    let err = Model::load(dir.path()).unwrap_err();
    assert!(matches!(err, ModelError::HashMismatch { .. }), "{err}");
    assert!(err.to_string().contains("rescore.onnx"), "{err}");
}

/// The test classifier's score of `patch` (8^3, normalised): sigmoid(sum(ramp * patch)).
fn ramp_score(patch: &ndarray::Array3<f32>) -> f64 {
    let c = |i: usize| i as f64 - 3.5;
    let logit: f64 = patch
        .indexed_iter()
        .map(|((z, y, x), v)| (c(x) + 2.0 * c(y) + 4.0 * c(z)) / 256.0 * f64::from(*v))
        .sum();
    1.0 / (1.0 + (-logit).exp())
}

#[test]
fn a_card_that_scales_the_cube_shows_large_candidates_through_a_wider_one() {
    if !runtime_available() {
        return;
    }
    let volume = volume();
    let mut scaled_model = model();
    let (plain, _) = run(&volume, &config(Some(0.0), true));
    // Half the candidates are wider than the median: those are seen through a wider cube.
    let mut sides: Vec<f64> = plain
        .detections
        .iter()
        .map(|d| d.model_box.size.iter().sum::<f64>() / 3.0)
        .collect();
    sides.sort_by(f64::total_cmp);
    let above = sides[sides.len() / 2];
    let spec = scaled_model.card.rescore.as_mut().unwrap();
    spec.scale_above_voxels = Some(above);
    let spec = spec.clone();
    let scaled = pipeline::detect(
        &volume,
        &scaled_model,
        &config(Some(0.0), true),
        &CancelToken::new(),
        &mut |_| {},
    )
    .unwrap();
    let input = &scaled_model.card.input;
    let (mut wider, mut same) = (0, 0);
    for d in &scaled.detections {
        let scale = spec.patch_scale(d.model_box.size);
        let mut patch = ndarray::Array3::zeros((8, 8, 8));
        let voxels = &volume.voxels;
        let center = d.model_box.center;
        if scale > 1.0 {
            wider += 1;
            input::scaled_candidate_patch(patch.view_mut(), voxels, center, scale, input);
        } else {
            same += 1;
            input::candidate_patch(patch.view_mut(), voxels, center, input);
            let before = plain.detections.iter().find(|p| p.model_box == d.model_box);
            assert_eq!(before.map(|p| p.score), Some(d.score), "{d:?}");
        }
        let expected = (ramp_score(&patch) * f64::from(d.detector_score.unwrap())).sqrt();
        assert!(
            (f64::from(d.score) - expected).abs() < 1e-5,
            "score {} for {d:?} at scale {scale}, by hand {expected}",
            d.score
        );
    }
    assert!(wider > 0 && same > 0, "{wider} scaled, {same} not");
}
