//! The calibrated bound for one window: a line in its voxels, fitted above every measured
//! point.

use serde::{Deserialize, Serialize};

/// Memory a run needs beyond what the process holds when it starts, as an upper bound over its
/// calibration runs: `fixed_bytes + bytes_per_voxel * largest window voxels`.
///
/// An under-prediction is the seed's quiet bug moved one step (the patch chosen for a budget
/// would exceed it), so the line is fitted above every calibration point, not through them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MemoryModel {
    pub fixed_bytes: f64,
    pub bytes_per_voxel: f64,
    /// Runs it was calibrated on (0: not recorded).
    #[serde(default)]
    pub calibration_runs: usize,
    /// Its largest over-prediction on the points it was fitted to, as a fraction of the
    /// point's measured peak.
    #[serde(default)]
    pub worst_error: f64,
    /// What the steps after the passes (decoding, the lung field, the rescoring stage) need
    /// beside what they hold (the main maps, the lung field): the most any calibration run
    /// needed, plus the spread between runs or 1 %. Independent of the window, so it bounds
    /// the smallest patches. (`stages_bytes` in cards and `memory_model.json`.)
    #[serde(default, rename = "stages_bytes")]
    pub later_steps_bytes: f64,
    /// The largest window it was fitted on, voxels: beyond it the line is extrapolated (a
    /// 69 M-voxel window of MONAI's ResNet50 needed 41 % more than a line fitted up to 25 M
    /// predicted). `None`: not recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub largest_window_voxels: Option<usize>,
}

impl MemoryModel {
    /// The bound for a window of `voxels` (rounded up: a bound never rounds down).
    pub fn predict_bytes(&self, voxels: usize) -> u64 {
        (self.fixed_bytes + self.bytes_per_voxel * voxels as f64)
            .max(0.0)
            .ceil() as u64
    }

    /// The line above every measured `(voxels, peak)` point with the least total relative
    /// over-prediction, slope non-negative; `None` with fewer than two distinct window sizes.
    ///
    /// That is a two-variable linear programme whose optimum touches two points of the upper
    /// hull, so the candidate slopes are those of every pair of points (and 0); each is lifted
    /// until no point lies above it.
    pub fn fit(points: &[(usize, u64)]) -> Option<Self> {
        let xy: Vec<(f64, f64)> = points.iter().map(|p| (p.0 as f64, p.1 as f64)).collect();
        let first = xy.first()?.0;
        if xy.iter().all(|p| p.0 == first) {
            return None;
        }
        let mut slopes = vec![0.0];
        for (i, a) in xy.iter().enumerate() {
            for b in &xy[i + 1..] {
                if a.0 != b.0 {
                    slopes.push((b.1 - a.1) / (b.0 - a.0));
                }
            }
        }
        let lifted = |slope: f64| {
            let fixed = xy
                .iter()
                .map(|p| p.1 - slope * p.0)
                .fold(f64::NEG_INFINITY, f64::max);
            let over: Vec<f64> = xy
                .iter()
                .map(|p| (fixed + slope * p.0 - p.1) / p.1.max(1.0))
                .collect();
            (fixed, over)
        };
        let mut best: Option<(f64, Self)> = None;
        for slope in slopes.into_iter().filter(|s| *s >= 0.0) {
            let (fixed_bytes, over) = lifted(slope);
            let cost: f64 = over.iter().sum();
            if best.as_ref().is_none_or(|(c, _)| cost < *c) {
                let model = Self {
                    fixed_bytes,
                    bytes_per_voxel: slope,
                    calibration_runs: points.len(),
                    worst_error: over.iter().copied().fold(0.0, f64::max),
                    later_steps_bytes: 0.0,
                    largest_window_voxels: points.iter().map(|p| p.0).max(),
                };
                best = Some((cost, model));
            }
        }
        best.map(|(_, model)| model)
    }

    /// "calibrated on 7 runs, which peaked 0 to 4.2 % under the bound", or that nothing is
    /// recorded. The bound lies above every calibration run, so the error has one sign.
    pub fn describe(&self) -> String {
        match self.calibration_runs {
            0 => "calibration runs not recorded".into(),
            n => format!(
                "calibrated on {n} runs, which peaked 0 to {:.1} % under the bound",
                self.worst_error * 100.0
            ),
        }
    }
}
