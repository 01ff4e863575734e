//! Stitching weights, from the plan's spans.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use tessera_maps::stitch::axis_weight_sum;
use tessera_plan::model::{Model, shipped_models_dir};
use tessera_plan::plan::{BlendMode, TilePlan, TileSpec};

fn plan(blend: BlendMode) -> TilePlan {
    let spec = TileSpec {
        patch: [40, 48, 16],
        overlap: 0.25,
        blend,
        allow_single_pass: false,
        memory_budget_bytes: None,
    };
    let tiny = Model::load(&shipped_models_dir().join("tessera-test-tiny")).unwrap();
    TilePlan::new([130, 90, 41], tiny.card.grid(), &spec, None).unwrap()
}

#[test]
fn constant_weight_sums_count_the_windows_over_each_voxel() {
    let plan = plan(BlendMode::Constant);
    for axis in 0..3 {
        let sums = axis_weight_sum(&plan, axis);
        let spans = plan.spans(axis);
        for (v, sum) in sums.iter().enumerate() {
            let count = spans.iter().filter(|s| s.0 <= v && v < s.1).count();
            assert_eq!(*sum, count as f32, "axis {axis} voxel {v}");
        }
    }
}
