//! The window grid: which windows a run processes, what each one writes, and what it costs.
//!
//! A plan is a value, made and checked before any inference. It refuses what must not run: a
//! single window covering the whole volume (the quiet bug that turns tiling off), a patch too
//! small to hold the receptive-field halo, a predicted peak over the memory budget.
//!
//! Windows start on multiples of the model stride, so every window's output cells line up with
//! the whole-volume output grid. The volume is padded at its far end to a multiple of the stride
//! (with the model's zero, i.e. air), in tiled and whole-volume runs alike.
//!
//! Placement per axis:
//! - `halo`: cores partition the axis; each window is its core plus a halo of at least the
//!   receptive-field radius (rounded up to the stride) on each side that has a neighbour. The
//!   first window is `[0, patch)`, the last one is the remainder (never larger than the patch).
//!   The stitched output then equals a whole-volume run exactly.
//! - `gaussian` / `constant`: windows of the patch size every `patch * (1 - overlap)` voxels
//!   (rounded down to the stride); the last window is shifted inward to end at the volume's end,
//!   as MONAI does. Overlapping outputs are blended.

use serde::{Deserialize, Serialize};

use tessera_dicom::volume::format_size;

use crate::memory::forecast::MemoryForecast;

/// How overlapping window outputs are combined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BlendMode {
    /// Average with equal weights.
    Constant,
    /// Average with a Gaussian weight, sigma 0.125 of the window (as MONAI).
    Gaussian,
    /// Each window writes only its core; cores partition the volume. Exact.
    Halo,
}

impl std::str::FromStr for BlendMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "constant" => Ok(Self::Constant),
            "gaussian" => Ok(Self::Gaussian),
            "halo" => Ok(Self::Halo),
            other => Err(format!(
                "blend mode '{other}' is not one of halo, gaussian, constant"
            )),
        }
    }
}

impl std::fmt::Display for BlendMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Constant => "constant",
            Self::Gaussian => "gaussian",
            Self::Halo => "halo",
        })
    }
}

/// What the user asks for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TileSpec {
    /// Window size `[x, y, z]` in voxels (at the model's spacing).
    pub patch: [usize; 3],
    /// Fraction of the patch shared by neighbours (gaussian and constant modes).
    pub overlap: f64,
    pub blend: BlendMode,
    /// Let one window cover the whole volume. Off by default: that is not tiling.
    pub allow_single_pass: bool,
    pub memory_budget_bytes: Option<u64>,
}

/// What the model imposes on windows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelGrid {
    /// Windows start on multiples of it and the volume is padded to it, `[x, y, z]`.
    pub stride: [usize; 3],
    pub receptive_radius: usize,
    /// A window's outputs depend on all of it (normalisation over the window): no halo makes
    /// a tile exact, so halo mode is refused, and blended windows need no core.
    pub window_dependent: bool,
}

impl ModelGrid {
    /// The stride along `axis`, at least 1.
    pub fn stride_along(&self, axis: usize) -> usize {
        self.stride[axis].max(1)
    }

    /// The receptive-field radius rounded up to the stride along `axis`: a halo mode window's
    /// context on each side of its core.
    pub fn halo_along(&self, axis: usize) -> usize {
        let s = self.stride_along(axis);
        self.receptive_radius.div_ceil(s) * s
    }

    /// `size` rounded up to the stride on every axis: the grid the windows cover.
    pub fn padded(&self, size: [usize; 3]) -> [usize; 3] {
        std::array::from_fn(|a| size[a].div_ceil(self.stride_along(a)) * self.stride_along(a))
    }
}

/// Share of a memory budget kept free when choosing a patch (driver, display, other work).
pub const BUDGET_HEADROOM: f64 = 0.10;

/// The patch with the best throughput for `blend` whose predicted peak fits `budget_bytes`
/// with [`BUDGET_HEADROOM`]. Never a single window.
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

/// Why `patch` (predicted at `predicted` bytes) is over `budget_bytes`, and what would run:
/// the patch [`choose_patch`] finds for the budget, or the least budget any patch needs.
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
}

impl<'a> Budget<'a> {
    fn new(
        volume_size: [usize; 3],
        grid: ModelGrid,
        memory: &'a MemoryForecast,
        budget_bytes: u64,
    ) -> Self {
        let stride = std::array::from_fn(|a| grid.stride_along(a));
        // A window that depends on all of itself keeps no core: only the stride bounds it.
        let halo = std::array::from_fn(|a| {
            if grid.window_dependent {
                0
            } else {
                grid.halo_along(a)
            }
        });
        Self {
            grid,
            memory,
            usable_bytes: budget_bytes as f64 * (1.0 - BUDGET_HEADROOM),
            stride,
            halo,
            padded: grid.padded(volume_size),
            smallest_side: std::array::from_fn(|a| 2 * halo[a] + 2 * stride[a]),
        }
    }

    fn fits(&self, patch: [usize; 3]) -> bool {
        self.memory.peak_bytes(patch.iter().product()) as f64 <= self.usable_bytes
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
            xy = std::array::from_fn(|a| ((xy[a] / 2).div_ceil(s[a]) * s[a]).max(smallest_side[a]));
        }
    }

    /// The smallest stride-aligned side that covers `n` along `axis` with `k` halo windows.
    fn side_for(&self, axis: usize, n: usize, k: usize) -> usize {
        if k <= 1 {
            return n;
        }
        let (halo, s) = (self.halo[axis], self.stride[axis]);
        let side = (n + 2 * halo * (k - 1)).div_ceil(k);
        side.div_ceil(s) * s
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
        let per_slice = self.memory.model.bytes_per_voxel * axial as f64;
        let room = self.usable_bytes - self.memory.peak_bytes(0) as f64;
        let depth = if per_slice > 0.0 {
            (room / per_slice).floor()
        } else {
            f64::INFINITY
        };
        let s = self.stride[2];
        let z = (depth.clamp(0.0, cap as f64) as usize) / s * s;
        // Guard the float arithmetic with the forecast itself.
        let shallowest = self.smallest_side[2].min(self.padded[2]);
        (z >= shallowest && self.fits([axial, 1, z])).then_some(z)
    }
}

/// One window, in voxels of the (padded) input grid, `[x, y, z]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Window {
    pub index: usize,
    /// First voxel of the window (inclusive).
    pub min: [usize; 3],
    /// One past the last voxel (exclusive).
    pub max: [usize; 3],
    /// The part this window writes in halo mode (the whole window in blended modes).
    pub core_min: [usize; 3],
    pub core_max: [usize; 3],
}

impl Window {
    pub fn size(&self) -> [usize; 3] {
        std::array::from_fn(|a| self.max[a] - self.min[a])
    }

    pub fn voxels(&self) -> usize {
        self.size().iter().product()
    }
}

/// A checked window grid.
#[derive(Debug, Clone, PartialEq)]
pub struct TilePlan {
    pub volume_size: [usize; 3],
    /// Volume size rounded up to the stride: the grid the windows cover.
    pub padded_size: [usize; 3],
    pub spec: TileSpec,
    pub grid: ModelGrid,
    /// Context kept on each side of a core, voxels (halo mode), per axis.
    pub halo: [usize; 3],
    pub windows_per_axis: [usize; 3],
    /// Windows in x-fastest order.
    pub windows: Vec<Window>,
    /// What the peak was predicted from, when a memory model is known.
    pub memory: Option<MemoryForecast>,
    /// The predicted upper bound of the run's peak (see [`MemoryForecast`]).
    pub predicted_peak_bytes: Option<u64>,
}

/// Why a plan is refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    #[error(
        "patch {patch} covers the whole volume {volume}: the run would be single-pass, which is not tiling; use a smaller patch, or --allow-single-pass to do it on purpose"
    )]
    SinglePass { patch: String, volume: String },
    #[error(
        "patch {patch} is too small for the model: along {axis} it must exceed twice the halo of {halo} voxels (receptive-field radius {radius}, stride {stride}) to leave a core"
    )]
    PatchTooSmall {
        patch: String,
        axis: char,
        halo: usize,
        radius: usize,
        stride: usize,
    },
    #[error(
        "halo mode cannot be exact for this model: its windows' outputs depend on the whole window (normalisation over it; see the card's window_dependent), so no halo, whatever its size (receptive-field radius {radius} voxels), makes a tile equal the whole-volume run; use --blend constant or gaussian, as the model's own sliding window does"
    )]
    HaloNotExact { radius: usize },
    #[error("patch {patch} is not a multiple of the model stride {stride} along {axis}")]
    NotStrideAligned {
        patch: String,
        axis: char,
        stride: usize,
    },
    #[error("overlap {0} must be in [0, 1)")]
    BadOverlap(f64),
    #[error(
        "patch {patch} needs a predicted peak of {predicted} per window, over the memory budget of {budget}: {advice}"
    )]
    OverBudget {
        patch: String,
        predicted: String,
        budget: String,
        /// What would run: the patch the budget allows, or the smallest budget that runs any.
        advice: String,
    },
    #[error(
        "no patch fits the memory budget of {budget} (with 10% headroom): even {smallest} needs a predicted {predicted}, so the smallest budget that runs is {least_budget}"
    )]
    NothingFits {
        smallest: String,
        predicted: String,
        budget: String,
        /// `predicted` with the headroom: the least budget [`choose_patch`] accepts.
        least_budget: String,
    },
    #[error("the volume is empty ({0})")]
    EmptyVolume(String),
}

const AXES: [char; 3] = ['x', 'y', 'z'];

impl TilePlan {
    /// Plans `spec` over a volume of `volume_size` for a model with `grid`.
    pub fn new(
        volume_size: [usize; 3],
        grid: ModelGrid,
        spec: &TileSpec,
        memory: Option<&MemoryForecast>,
    ) -> Result<Self, PlanError> {
        let patch_label = format_size(spec.patch);
        if volume_size.contains(&0) {
            return Err(PlanError::EmptyVolume(format_size(volume_size)));
        }
        if !(0.0..1.0).contains(&spec.overlap) {
            return Err(PlanError::BadOverlap(spec.overlap));
        }
        if grid.window_dependent && spec.blend == BlendMode::Halo {
            return Err(PlanError::HaloNotExact {
                radius: grid.receptive_radius,
            });
        }
        let padded_size = grid.padded(volume_size);
        let mut spans: [Vec<Span>; 3] = Default::default();
        let mut halo = [0; 3];
        for a in 0..3 {
            let (s, halo_one) = (grid.stride_along(a), grid.halo_along(a));
            let p = spec.patch[a];
            if p == 0 || !p.is_multiple_of(s) {
                return Err(PlanError::NotStrideAligned {
                    patch: patch_label,
                    axis: AXES[a],
                    stride: s,
                });
            }
            let n = padded_size[a];
            let needs_halo = !grid.window_dependent && (spec.blend == BlendMode::Halo || p < n);
            if needs_halo && p < n && p <= 2 * halo_one {
                return Err(PlanError::PatchTooSmall {
                    patch: patch_label,
                    axis: AXES[a],
                    halo: halo_one,
                    radius: grid.receptive_radius,
                    stride: s,
                });
            }
            spans[a] = match spec.blend {
                BlendMode::Halo => {
                    halo[a] = halo_one;
                    halo_spans(n, p, halo_one)
                }
                BlendMode::Gaussian | BlendMode::Constant => blended_spans(n, p, spec.overlap, s),
            };
        }
        let windows_per_axis = [spans[0].len(), spans[1].len(), spans[2].len()];
        let mut windows = Vec::with_capacity(windows_per_axis.iter().product());
        for z in &spans[2] {
            for y in &spans[1] {
                for x in &spans[0] {
                    windows.push(Window {
                        index: windows.len(),
                        min: [x.min, y.min, z.min],
                        max: [x.max, y.max, z.max],
                        core_min: [x.core_min, y.core_min, z.core_min],
                        core_max: [x.core_max, y.core_max, z.core_max],
                    });
                }
            }
        }
        if windows.len() == 1 && !spec.allow_single_pass {
            return Err(PlanError::SinglePass {
                patch: patch_label,
                volume: format_size(volume_size),
            });
        }
        let largest = windows.iter().map(Window::voxels).max().unwrap_or(0);
        let predicted_peak_bytes = memory.map(|m| m.peak_bytes(largest));
        if let (Some(predicted), Some(budget)) = (predicted_peak_bytes, spec.memory_budget_bytes)
            && predicted > budget
        {
            let advice = memory.map_or_else(String::new, |m| {
                over_budget_advice(volume_size, grid, m, budget, spec.blend, predicted)
            });
            return Err(PlanError::OverBudget {
                patch: patch_label,
                predicted: format_bytes(predicted),
                budget: format_bytes(budget),
                advice,
            });
        }
        Ok(Self {
            volume_size,
            padded_size,
            spec: spec.clone(),
            grid,
            halo,
            windows_per_axis,
            windows,
            memory: memory.copied(),
            predicted_peak_bytes,
        })
    }

    /// "predicted peak ≤ 1.02 GiB (calibrated on 7 runs, which peaked 0 to 4.2 % under the
    /// bound)": the one wording
    /// of a prediction for the CLI, the viewer and logs; `None` without a memory model.
    pub fn predicted_peak_text(&self) -> Option<String> {
        let (bytes, forecast) = (self.predicted_peak_bytes?, self.memory.as_ref()?);
        let mut text = format!(
            "predicted peak ≤ {} ({})",
            format_bytes(bytes),
            forecast.model.describe()
        );
        let window = self.largest_window_voxels();
        if let Some(seen) = forecast.model.largest_window_voxels.filter(|m| window > *m) {
            text.push_str(&format!(
                "; EXTRAPOLATED: a window of {window} voxels, the calibration's largest was {seen}: calibrate with windows this large before trusting it"
            ));
        }
        Some(text)
    }

    /// The largest window's voxels: what the memory line bounds.
    pub fn largest_window_voxels(&self) -> usize {
        self.windows.iter().map(Window::voxels).max().unwrap_or(0)
    }

    /// Voxels processed over voxels in the (padded) volume: the price of the overlap.
    pub fn recompute_factor(&self) -> f64 {
        let processed: usize = self.windows.iter().map(Window::voxels).sum();
        processed as f64 / self.padded_size.iter().product::<usize>() as f64
    }

    /// The largest overlap between neighbouring windows along each axis, as a fraction of the patch.
    pub fn overlap_achieved(&self) -> [f64; 3] {
        std::array::from_fn(|a| {
            let mut starts: Vec<(usize, usize)> =
                self.windows.iter().map(|w| (w.min[a], w.max[a])).collect();
            starts.sort_unstable();
            starts.dedup();
            let shared = starts
                .windows(2)
                .map(|p| p[0].1.saturating_sub(p[1].0))
                .max()
                .unwrap_or(0);
            shared as f64 / self.spec.patch[a] as f64
        })
    }

    /// Window boundaries (where seams may show) along `axis`: the cores' edges in halo mode,
    /// the windows' edges otherwise. Excludes the volume's own edges.
    pub fn seams(&self, axis: usize) -> Vec<usize> {
        let mut cuts: Vec<usize> = self
            .windows
            .iter()
            .flat_map(|w| match self.spec.blend {
                BlendMode::Halo => [w.core_min[axis], w.core_max[axis]],
                _ => [w.min[axis], w.max[axis]],
            })
            .filter(|c| *c > 0 && *c < self.volume_size[axis])
            .collect();
        cuts.sort_unstable();
        cuts.dedup();
        cuts
    }

    /// The distinct `[lo, hi)` extents of the windows along `axis`, in order (the grid of
    /// windows is a product: each placement along one axis meets every one along the others).
    pub fn spans(&self, axis: usize) -> Vec<(usize, usize)> {
        self.distinct(|w| (w.min[axis], w.max[axis]))
    }

    /// The distinct `[lo, hi)` cores of the windows along `axis` (their extents when blending).
    pub fn core_spans(&self, axis: usize) -> Vec<(usize, usize)> {
        self.distinct(|w| (w.core_min[axis], w.core_max[axis]))
    }

    /// Where consecutive windows overlap along `axis`, `[lo, hi)` in model voxels.
    pub fn overlap_bands(&self, axis: usize) -> Vec<(usize, usize)> {
        self.spans(axis)
            .windows(2)
            .filter(|p| p[1].0 < p[0].1)
            .map(|p| (p[1].0, p[0].1))
            .collect()
    }

    /// Which core (in order along `axis`) holds model voxel `v`; 0 past the last.
    pub fn core_at(&self, axis: usize, v: usize) -> usize {
        self.core_spans(axis)
            .iter()
            .position(|(lo, hi)| v >= *lo && v < *hi)
            .unwrap_or(0)
    }

    fn distinct(&self, span: impl Fn(&Window) -> (usize, usize)) -> Vec<(usize, usize)> {
        let mut spans: Vec<(usize, usize)> = self.windows.iter().map(span).collect();
        spans.sort_unstable();
        spans.dedup();
        spans
    }
}

impl std::fmt::Display for TilePlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let o = self.overlap_achieved();
        write!(
            f,
            "plan: volume {} (padded {}), patch {}, blend {}: {} windows ({}), overlap {:.2}/{:.2}/{:.2}, halo {}, recompute x{:.2}",
            format_size(self.volume_size),
            format_size(self.padded_size),
            format_size(self.spec.patch),
            self.spec.blend,
            self.windows.len(),
            format_size(self.windows_per_axis),
            o[0],
            o[1],
            o[2],
            format_size(self.halo),
            self.recompute_factor()
        )?;
        let predicted = self.predicted_peak_text().unwrap_or_else(|| {
            "predicted peak unknown (no memory model for this model and device)".into()
        });
        write!(f, ", {predicted}")
    }
}

/// One axis of a window: extent and core.
#[derive(Debug, Clone, Copy, Default)]
struct Span {
    min: usize,
    max: usize,
    core_min: usize,
    core_max: usize,
}

fn halo_spans(n: usize, p: usize, h: usize) -> Vec<Span> {
    let mut spans = Vec::new();
    let mut core_min: usize = 0;
    loop {
        // Each window keeps `h` of context before its core (none at the volume's start)...
        let min = core_min.saturating_sub(h);
        if min + p >= n {
            // ...and the remainder of the volume fits this one: it is the last.
            spans.push(Span {
                min,
                max: n,
                core_min,
                core_max: n,
            });
            return spans;
        }
        // ...and `h` after it, for the neighbour's sake.
        let max = min + p;
        spans.push(Span {
            min,
            max,
            core_min,
            core_max: max - h,
        });
        core_min = max - h;
    }
}

fn blended_spans(n: usize, p: usize, overlap: f64, s: usize) -> Vec<Span> {
    if p >= n {
        return vec![Span {
            min: 0,
            max: n,
            core_min: 0,
            core_max: n,
        }];
    }
    let step = ((p as f64 * (1.0 - overlap)) as usize / s * s).max(s);
    let mut starts: Vec<usize> = (0..)
        .map(|i| i * step)
        .take_while(|start| start + p < n)
        .collect();
    starts.push(n - p); // the last window shifted inward to end at the volume's end
    starts.dedup();
    starts
        .into_iter()
        .map(|min| Span {
            min,
            max: min + p,
            core_min: min,
            core_max: min + p,
        })
        .collect()
}

/// `10.6 GiB`-style.
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.2} {}", UNITS[unit])
    }
}

/// Parses `16GiB`, `512 MiB`, `2e9` (bytes), `10.5G`.
pub fn parse_bytes(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let value: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("'{text}' is not a size like 16GiB"))?;
    let scale = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kib" => 1024.0,
        "m" | "mib" => 1024.0 * 1024.0,
        "g" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tib" => 1024.0_f64.powi(4),
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        _ => {
            return Err(format!(
                "'{text}': unknown unit (use B, KiB, MiB, GiB, or KB, MB, GB)"
            ));
        }
    };
    if !(value.is_finite() && value > 0.0) {
        return Err(format!("'{text}' must be a positive size"));
    }
    Ok((value * scale) as u64)
}
