//! The patch for a memory budget: the fastest window whose predicted peak fits, and what to say
//! when a patch does not.

use tessera_dicom::volume::format_size;

use crate::blend::BlendMode;
use crate::bytes::format_bytes;
use crate::memory::forecast::MemoryForecast;
use crate::model_grid::ModelGrid;
use crate::plan::{PlanError, TilePlan, TileSpec, Window, halo_spans};

/// Share of a memory budget kept free when choosing a patch (driver, display, other work).
pub const BUDGET_HEADROOM: f64 = 0.10;

/// The patch with the best throughput for `blend` whose predicted peak fits `budget_bytes`
/// with [`BUDGET_HEADROOM`]. Never a single window, and never a window larger than the
/// calibration's largest (`MemoryModel::largest_window_voxels`): beyond the windows it was
/// fitted on the line is extrapolated, and a budget must not rest on it (a 69 M-voxel window
/// of MONAI's ResNet50 needed 41 % more than a line fitted up to 25 M predicted).
///
/// - Blended modes: full axial (x/y) context first, as deep in z as fits (fewer windows, less
///   recompute), and narrower in x/y only when no depth fits.
/// - Halo: the exact plan that processes the fewest voxels. Each seam costs twice the halo
///   whatever the patch, so the cost is the number of seams: at a small budget two windows
///   across x/y and deep cores beat full x/y with shallow ones (at 64 slices and a 20-voxel
///   halo, a core keeps 24 of them). Each axis then gets the smallest patch that needs no
///   more windows: the same work at a lower peak.
pub fn choose_patch(
    volume_size: [usize; 3],
    grid: ModelGrid,
    memory: &MemoryForecast,
    budget_bytes: u64,
    blend: BlendMode,
) -> Result<[usize; 3], PlanError> {
    let budget = Budget::new(volume_size, grid, memory, budget_bytes);
    let chosen = match blend {
        BlendMode::Halo => budget.fastest_exact(),
        BlendMode::Gaussian | BlendMode::Constant => budget.deepest_full_axial(),
    };
    chosen.ok_or_else(|| {
        let smallest: [usize; 3] =
            std::array::from_fn(|a| budget.smallest_side[a].min(budget.padded[a]));
        let predicted = memory.peak_bytes(smallest.iter().product());
        PlanError::NothingFits {
            smallest: format_size(smallest),
            predicted: format_bytes(predicted),
            budget: format_bytes(budget_bytes),
            least_budget: format_bytes(least_budget_bytes(predicted)),
        }
    })
}

/// The least budget whose share after [`BUDGET_HEADROOM`] holds `predicted_bytes`.
pub fn least_budget_bytes(predicted_bytes: u64) -> u64 {
    (predicted_bytes as f64 / (1.0 - BUDGET_HEADROOM)).ceil() as u64
}

/// [`TilePlan::new`], whose refusal over the spec's budget also says what would run: the
/// patch [`choose_patch`] finds for the budget, or the least budget any patch needs.
pub fn plan_within_budget(
    volume_size: [usize; 3],
    grid: ModelGrid,
    spec: &TileSpec,
    memory: Option<&MemoryForecast>,
) -> Result<TilePlan, PlanError> {
    TilePlan::new(volume_size, grid, spec, memory).map_err(|refusal| match (refusal, memory) {
        (
            PlanError::OverBudget {
                patch,
                predicted_bytes,
                budget_bytes,
                ..
            },
            Some(memory),
        ) => PlanError::OverBudget {
            advice: over_budget_advice(
                volume_size,
                grid,
                memory,
                budget_bytes,
                spec.blend,
                predicted_bytes,
            ),
            patch,
            predicted_bytes,
            budget_bytes,
        },
        (other, _) => other,
    })
}

/// Why a patch predicted at `predicted` bytes is over `budget_bytes`, and what would run.
fn over_budget_advice(
    volume_size: [usize; 3],
    grid: ModelGrid,
    memory: &MemoryForecast,
    budget_bytes: u64,
    blend: BlendMode,
    predicted: u64,
) -> String {
    match choose_patch(volume_size, grid, memory, budget_bytes, blend) {
        Ok(fits) => format!(
            "patch {} fits it (leave out --patch to have the budget choose it), or this patch needs a budget of at least {}",
            format_size(fits),
            format_bytes(predicted)
        ),
        Err(PlanError::NothingFits {
            smallest,
            least_budget,
            ..
        }) => format!(
            "no patch fits it (the smallest, {smallest}, needs a budget of {least_budget}); this patch needs at least {}",
            format_bytes(predicted)
        ),
        Err(other) => format!(
            "this patch needs a budget of at least {} ({other})",
            format_bytes(predicted)
        ),
    }
}

/// What [`choose_patch`] searches over.
struct Budget<'a> {
    grid: ModelGrid,
    memory: &'a MemoryForecast,
    usable_bytes: f64,
    stride: [usize; 3],
    halo: [usize; 3],
    padded: [usize; 3],
    /// Below this a window has no core.
    smallest_side: [usize; 3],
    /// The largest window the calibration saw, voxels: no larger one is chosen.
    calibrated_voxels: usize,
}

impl<'a> Budget<'a> {
    fn new(
        volume_size: [usize; 3],
        grid: ModelGrid,
        memory: &'a MemoryForecast,
        budget_bytes: u64,
    ) -> Self {
        Self {
            grid,
            memory,
            usable_bytes: budget_bytes as f64 * (1.0 - BUDGET_HEADROOM),
            stride: std::array::from_fn(|a| grid.stride_along(a)),
            halo: std::array::from_fn(|a| grid.halo_along(a)),
            padded: grid.padded(volume_size),
            smallest_side: std::array::from_fn(|a| grid.smallest_side(a)),
            calibrated_voxels: memory.model.largest_window_voxels.unwrap_or(usize::MAX),
        }
    }

    fn fits(&self, patch: [usize; 3]) -> bool {
        let voxels = patch.iter().product();
        voxels <= self.calibrated_voxels
            && self.memory.peak_bytes(voxels) as f64 <= self.usable_bytes
    }

    fn deepest_full_axial(&self) -> Option<[usize; 3]> {
        let (s, padded, smallest_side) = (self.stride, self.padded, self.smallest_side);
        let mut xy: [usize; 2] = [padded[0], padded[1]];
        loop {
            // Deepest z first; below the full depth so that the volume is tiled.
            let deepest = if padded[2] > s[2] {
                padded[2] - s[2]
            } else {
                s[2]
            };
            let mut z = deepest;
            while z >= smallest_side[2].min(deepest) {
                if self.fits([xy[0], xy[1], z]) {
                    return Some([xy[0], xy[1], z]);
                }
                if z <= s[2] {
                    break;
                }
                z -= s[2];
            }
            if (0..2).all(|a| xy[a] <= smallest_side[a]) {
                return None;
            }
            // Halve x/y (kept on the stride), never below the smallest useful side.
            xy =
                std::array::from_fn(|a| self.grid.up_to_stride(a, xy[a] / 2).max(smallest_side[a]));
        }
    }

    /// The smallest stride-aligned side that covers `n` along `axis` with `k` halo windows.
    fn side_for(&self, axis: usize, n: usize, k: usize) -> usize {
        if k <= 1 {
            return n;
        }
        let side = (n + 2 * self.halo[axis] * (k - 1)).div_ceil(k);
        self.grid.up_to_stride(axis, side)
    }

    fn fastest_exact(&self) -> Option<[usize; 3]> {
        let spec = |patch| TileSpec {
            patch,
            overlap: 0.0,
            blend: BlendMode::Halo,
            allow_single_pass: false,
            memory_budget_bytes: None,
        };
        // (voxels processed, windows, patch) of the best plan so far.
        let mut best: Option<(usize, usize, [usize; 3])> = None;
        for (x, y) in self.axial_sides() {
            // Full x/y must split z, or it is one window.
            let whole_axial = x == self.padded[0] && y == self.padded[1];
            let cap = self.padded[2].saturating_sub(if whole_axial { self.stride[2] } else { 0 });
            let Some(z) = self.deepest_fitting_z(x * y, cap) else {
                continue;
            };
            let windows_z = halo_spans(self.padded[2], z, self.halo[2]).len();
            let patch = [x, y, self.side_for(2, self.padded[2], windows_z).min(z)];
            let Ok(plan) = TilePlan::new(self.padded, self.grid, &spec(patch), None) else {
                continue; // one window (not tiling), or a patch with no core
            };
            let cost = (
                plan.windows.iter().map(Window::voxels).sum(),
                plan.windows.len(),
            );
            if best.is_none_or(|(v, n, _)| cost < (v, n)) {
                best = Some((cost.0, cost.1, patch));
            }
        }
        best.map(|(_, _, patch)| patch)
    }

    /// Candidate x/y sides: each axis split into 1, 2, 3, ... halo windows of the smallest
    /// side that covers it, while a window keeps a core.
    fn axial_sides(&self) -> Vec<(usize, usize)> {
        let per_axis = |axis: usize| -> Vec<usize> {
            let n = self.padded[axis];
            let mut sides = vec![n];
            for k in 2..=n / self.stride[axis] {
                let side = self.side_for(axis, n, k);
                if side < self.smallest_side[axis] || side >= *sides.last().unwrap_or(&n) {
                    break;
                }
                sides.push(side);
            }
            sides
        };
        let (xs, ys) = (per_axis(0), per_axis(1));
        xs.iter()
            .flat_map(|x| ys.iter().map(move |y| (*x, *y)))
            .collect()
    }

    /// The deepest stride-aligned z, at most `cap`, whose window of `axial` voxels fits.
    fn deepest_fitting_z(&self, axial: usize, cap: usize) -> Option<usize> {
        let cap = cap.min(self.calibrated_voxels / axial.max(1));
        let per_slice = self.memory.model.bytes_per_voxel * axial as f64;
        let room = self.usable_bytes - self.memory.peak_bytes(0) as f64;
        let depth = if per_slice > 0.0 {
            (room / per_slice).floor()
        } else {
            f64::INFINITY
        };
        let z = self
            .grid
            .down_to_stride(2, depth.clamp(0.0, cap as f64) as usize);
        // Guard the float arithmetic with the forecast itself.
        let shallowest = self.smallest_side[2].min(self.padded[2]);
        (z >= shallowest && self.fits([axial, 1, z])).then_some(z)
    }
}
