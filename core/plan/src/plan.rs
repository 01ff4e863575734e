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

use crate::blend::BlendMode;
use crate::bytes::format_bytes;
use crate::memory::forecast::MemoryForecast;
use crate::model_grid::ModelGrid;

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
        "patch {patch} needs a predicted peak of {} per window, over the memory budget of {}: {advice}",
        format_bytes(*predicted_bytes),
        format_bytes(*budget_bytes)
    )]
    OverBudget {
        patch: String,
        predicted_bytes: u64,
        budget_bytes: u64,
        /// What would run: the least budget for this patch, and with
        /// [`crate::patch::plan_within_budget`] the patch the budget allows, or the smallest
        /// budget that runs any.
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
                BlendMode::Gaussian | BlendMode::Constant => {
                    let step = grid.down_to_stride(a, (p as f64 * (1.0 - spec.overlap)) as usize);
                    blended_spans(n, p, step.max(s))
                }
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
            return Err(PlanError::OverBudget {
                patch: patch_label,
                predicted_bytes: predicted,
                budget_bytes: budget,
                advice: format!(
                    "this patch needs a budget of at least {}",
                    format_bytes(predicted)
                ),
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
pub(crate) struct Span {
    min: usize,
    max: usize,
    core_min: usize,
    core_max: usize,
}

pub(crate) fn halo_spans(n: usize, p: usize, h: usize) -> Vec<Span> {
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

/// Windows of `p` every `step` voxels, the last one shifted inward to end at `n`.
fn blended_spans(n: usize, p: usize, step: usize) -> Vec<Span> {
    if p >= n {
        return vec![Span {
            min: 0,
            max: n,
            core_min: 0,
            core_max: n,
        }];
    }
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
