//! Stitching weights, from the plan's spans.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use tessera_maps::stitch::axis_weight_sum;
use tessera_plan::blend::BlendMode;
use tessera_plan::model_grid::ModelGrid;
use tessera_plan::plan::{TilePlan, TileSpec};

#[test]
fn constant_weight_sums_count_the_windows_over_each_voxel() {
    let grid = ModelGrid {
        stride: [2; 3],
        receptive_radius: 4,
        window_dependent: false,
    };
    let spec = TileSpec {
        patch: [40, 48, 16],
        overlap: 0.25,
        blend: BlendMode::Constant,
        allow_single_pass: false,
        memory_budget_bytes: None,
    };
    let plan = TilePlan::new([130, 90, 41], grid, &spec, None).unwrap();
    for axis in 0..3 {
        let sums = axis_weight_sum(&plan, axis);
        let spans = plan.spans(axis);
        for (v, sum) in sums.iter().enumerate() {
            let count = spans.iter().filter(|s| s.0 <= v && v < s.1).count();
            assert_eq!(*sum, count as f32, "axis {axis} voxel {v}");
        }
    }
}
