//! A run's request: one set of defaults, the patch for a budget or its typed refusal, and the
//! plan's own facts (spans, bands, cores, weight sums) that views ask for.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use tessera_dicom::geometry::Affine3;
use tessera_dicom::volume::Geometry;
use tessera_plan::blend::BlendMode;
use tessera_plan::device::Device;
use tessera_plan::memory::line::MemoryModel;
use tessera_plan::model::{Model, shipped_models_dir};
use tessera_plan::plan::{PlanError, TilePlan, TileSpec};
use tessera_plan::request::{
    BudgetError, DEFAULT_NMS_IOU, DetectConfig, PatchChoice, ResolvedPatch, plan_for, resolve_patch,
};

fn tiny() -> Model {
    Model::load(&shipped_models_dir().join("tessera-test-tiny")).unwrap()
}

/// A study of `size` voxels of 1 mm (the test model runs on the study's own grid).
fn geometry(size: [usize; 3]) -> Geometry {
    Geometry {
        size,
        spacing_mm: [1.0; 3],
        world_from_voxel: Affine3::from_columns(
            [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
            [0.0; 3],
        ),
    }
}

#[test]
fn the_defaults_are_one_set_and_the_card_gives_the_patch() {
    let model = tiny();
    let config = DetectConfig::defaults_for(&model);
    assert_eq!(config.tile.patch, model.card.recommended_patch);
    assert_eq!(config.tile.blend, BlendMode::Halo);
    assert!(!config.tile.allow_single_pass);
    assert_eq!(config.tile.memory_budget_bytes, None);
    assert_eq!(config.device, Device::Cpu);
    assert_eq!(
        config.threads,
        std::thread::available_parallelism().map_or(1, usize::from)
    );
    assert!(config.rescore);
    assert_eq!(config.nms_iou, DEFAULT_NMS_IOU);
    assert_eq!((config.score_threshold, config.memory_model), (None, None));
    let mut other = DetectConfig::new([8, 8, 8]);
    other.tile.patch = config.tile.patch;
    assert_eq!(
        other, config,
        "new() and defaults_for() differ only in the patch"
    );
}

#[test]
fn a_fixed_patch_is_taken_as_given() {
    let model = tiny();
    let config = DetectConfig::defaults_for(&model);
    let resolved = resolve_patch(
        &geometry([100, 90, 40]),
        &model,
        &config,
        PatchChoice::Fixed([32, 32, 16]),
    )
    .unwrap();
    assert_eq!(
        resolved,
        ResolvedPatch {
            patch: [32, 32, 16],
            forecast: None,
            held_to_calibration: None,
        }
    );
}

#[test]
fn a_budget_without_a_calibration_is_refused_with_what_to_do() {
    let model = tiny();
    assert!(
        model.card.memory.is_empty(),
        "the test model has no calibration"
    );
    let err = resolve_patch(
        &geometry([100, 90, 40]),
        &model,
        &DetectConfig::defaults_for(&model),
        PatchChoice::Budget {
            budget_bytes: 1 << 30,
        },
    )
    .unwrap_err();
    assert!(matches!(err, BudgetError::Uncalibrated { .. }), "{err}");
    assert!(err.to_string().contains("tessera sweep"), "{err}");
}

#[test]
fn a_budget_gives_a_patch_that_fits_or_says_that_even_the_smallest_does_not() {
    let model = tiny();
    let mut config = DetectConfig::defaults_for(&model);
    config.memory_model = Some(MemoryModel {
        fixed_bytes: 1e6,
        bytes_per_voxel: 100.0,
        calibration_runs: 2,
        worst_error: 0.0,
        later_steps_bytes: 0.0,
        largest_window_voxels: None,
    });
    let study = geometry([256, 256, 96]);
    let budget_bytes = 8 << 30;
    let resolved = resolve_patch(
        &study,
        &model,
        &config,
        PatchChoice::Budget { budget_bytes },
    )
    .unwrap();
    let forecast = resolved.forecast.unwrap();
    assert!(forecast.peak_bytes(resolved.patch.iter().product()) <= budget_bytes);
    assert_eq!(resolved.held_to_calibration, None);
    // A calibration that saw only small windows holds the patch to them, and says so.
    let mut held_config = config.clone();
    if let Some(m) = &mut held_config.memory_model {
        m.largest_window_voxels = Some(64 * 64 * 32);
    }
    let held = resolve_patch(
        &study,
        &model,
        &held_config,
        PatchChoice::Budget { budget_bytes },
    )
    .unwrap();
    assert!(
        held.patch.iter().product::<usize>() <= 64 * 64 * 32,
        "{held:?}"
    );
    assert_eq!(held.held_to_calibration, Some(64 * 64 * 32));
    assert!(
        held.calibration_note()
            .is_some_and(|n| n.contains("the calibration's largest (131072 voxels)"))
    );
    config.tile.patch = resolved.patch;
    config.tile.memory_budget_bytes = Some(budget_bytes);
    plan_for(study.size, &model, &config, forecast.baseline_bytes).unwrap();

    let err = resolve_patch(
        &study,
        &model,
        &config,
        PatchChoice::Budget { budget_bytes: 1 },
    )
    .unwrap_err();
    assert!(
        matches!(err, BudgetError::NothingFits(PlanError::NothingFits { .. })),
        "{err}"
    );
}

fn plan(blend: BlendMode) -> TilePlan {
    let spec = TileSpec {
        patch: [40, 48, 16],
        overlap: 0.25,
        blend,
        allow_single_pass: false,
        memory_budget_bytes: None,
    };
    TilePlan::new([130, 90, 41], tiny().card.grid(), &spec, None).unwrap()
}

#[test]
fn spans_bands_and_cores_come_from_the_plan() {
    for blend in [BlendMode::Halo, BlendMode::Gaussian, BlendMode::Constant] {
        let plan = plan(blend);
        for axis in 0..3 {
            let spans = plan.spans(axis);
            assert!(
                spans.windows(2).all(|p| p[0].0 < p[1].0),
                "sorted, distinct"
            );
            for w in &plan.windows {
                assert!(spans.contains(&(w.min[axis], w.max[axis])));
            }
            for (lo, hi) in plan.overlap_bands(axis) {
                let covering = spans.iter().filter(|s| s.0 <= lo && hi <= s.1).count();
                assert!(lo < hi && covering >= 2, "{blend} axis {axis}: {lo}..{hi}");
            }
            let cores = plan.core_spans(axis);
            for v in 0..plan.volume_size[axis] {
                let (lo, hi) = cores[plan.core_at(axis, v)];
                if blend == BlendMode::Halo {
                    assert!(
                        lo <= v && v < hi,
                        "{blend} axis {axis}: {v} not in its core"
                    );
                }
            }
        }
    }
}
