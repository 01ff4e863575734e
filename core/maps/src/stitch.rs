//! Puts window outputs together into full-volume output maps, at the model's stride.
//!
//! Memory is bounded by the maps (one `f32` per output cell and channel, plus a weight map in
//! blended modes), never by the number of windows.
//! - `halo`: each window copies its core; cores partition the volume, so nothing is blended.
//! - `gaussian`: weighted average, weight a separable Gaussian with sigma 0.125 of the window
//!   (MONAI's choice), each axis floored so that edge cells never get zero weight.
//! - `constant`: plain average of the windows covering a cell.

use ndarray::{Array3, Array4, s};

use tessera_plan::blend::BlendMode;
use tessera_plan::plan::{TilePlan, Window};

/// Lowest weight of the 1-D Gaussian profile relative to its centre, so that no cell gets zero
/// weight. Floored per axis, not on the 3-D product: where every window is near its edge along
/// one axis (the volume's ends), the product's ratios between windows must survive.
const GAUSSIAN_FLOOR: f32 = 1e-3;

/// The full-volume output maps, each `[channels, z, y, x]` at its head's stride.
#[derive(Debug, Clone, PartialEq)]
pub struct Maps {
    /// The model's stride (the finest head's).
    pub stride: [usize; 3],
    pub heads: Vec<HeadMap>,
}

/// One output head's map, `[channels, z, y, x]`, with its name in the card (and the graph).
#[derive(Debug, Clone, PartialEq)]
pub struct HeadMap {
    pub name: String,
    pub map: Array4<f32>,
}

/// A head the card names is not among the maps.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no output head named '{name}' (the outputs are: {have})")]
pub struct MissingHead {
    pub name: String,
    pub have: String,
}

/// The map of the head named `name` in `heads`.
pub fn head<'a>(heads: &'a [HeadMap], name: &str) -> Result<&'a Array4<f32>, MissingHead> {
    heads
        .iter()
        .find(|h| h.name == name)
        .map(|h| &h.map)
        .ok_or_else(|| MissingHead {
            name: name.to_string(),
            have: heads
                .iter()
                .map(|h| h.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        })
}

impl Maps {
    /// The map of the head named `name`.
    pub fn head(&self, name: &str) -> Result<&Array4<f32>, MissingHead> {
        head(&self.heads, name)
    }
}

/// A window's blending weight along one axis of `n` cells (the 3-D weight is the product of
/// the three): a Gaussian of sigma `n / 8`, floored, for `gaussian`; 1 otherwise (in halo mode
/// nothing is blended: each core is copied).
pub fn weight_profile(blend: BlendMode, n: usize) -> Vec<f32> {
    if blend != BlendMode::Gaussian {
        return vec![1.0; n];
    }
    let sigma = 0.125 * n as f32;
    let centre = n as f32 / 2.0;
    (0..n)
        .map(|i| {
            let d = i as f32 + 0.5 - centre;
            (-(d * d) / (2.0 * sigma * sigma)).exp().max(GAUSSIAN_FLOOR)
        })
        .collect()
}

/// Per model voxel along `axis`, the blend weight summed over the window placements; the
/// 3-D weight sum is the product of the three axes' (the windows form a product grid).
pub fn axis_weight_sum(plan: &TilePlan, axis: usize) -> Vec<f32> {
    let mut sum = vec![0.0f32; plan.padded_size[axis]];
    for (lo, hi) in plan.spans(axis) {
        let profile = weight_profile(plan.spec.blend, hi - lo);
        for (i, w) in profile.into_iter().enumerate() {
            if let Some(s) = sum.get_mut(lo + i) {
                *s += w;
            }
        }
    }
    sum
}

/// How a window's Gaussian weight reaches its output cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Weighting {
    /// [`weight_profile`] over the window's cells, floored per axis (Tessera's own).
    Cells,
    /// MONAI's `sliding_window_inference`: the Gaussian over the window's input voxels
    /// (centred at `(n - 1) / 2`, sigma `n / 8`), the 3-D product clamped to at least 1e-3,
    /// then resized (`nearest-exact`) to each output in turn, each from the previous output's
    /// weights (MONAI reassigns them): a RetinaNet's box heads, after its coarsest class head,
    /// get that head's weights upsampled.
    MonaiChained,
}

/// One output head to stitch: its name, channels and stride.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeadGrid {
    pub name: String,
    pub channels: usize,
    pub stride: [usize; 3],
}

/// One stitched head: `[channels, z, y, x]` at `stride`.
#[derive(Debug)]
struct Accumulator {
    name: String,
    stride: [usize; 3],
    sum: Array4<f32>,
    /// Index into the stitcher's weight groups (blended modes).
    group: usize,
}

/// Heads that take the same weights: a window's weight per cell and the sum over windows.
#[derive(Debug)]
struct WeightGroup {
    stride: [usize; 3],
    /// Per axis, the window input voxel each cell's weight is read at (`None`: [`Weighting::Cells`]).
    picks: Option<[Vec<usize>; 3]>,
    /// Its window weights, for windows of `window_size`.
    window: Array3<f32>,
    window_size: [usize; 3],
    total: Array3<f32>,
}

/// Accumulates window outputs for one plan.
#[derive(Debug)]
pub struct Stitcher {
    blend: BlendMode,
    weighting: Weighting,
    heads: Vec<Accumulator>,
    groups: Vec<WeightGroup>,
}

impl Stitcher {
    /// Stitches `heads`, each found by name in every window's outputs.
    pub fn new(plan: &TilePlan, heads: &[HeadGrid], weighting: Weighting) -> Self {
        let blended = plan.spec.blend != BlendMode::Halo;
        // Blended windows all have one size (the patch, or the volume when it is smaller).
        let window_size = plan.windows.first().map_or(plan.padded_size, Window::size);
        let picks =
            (weighting == Weighting::MonaiChained).then(|| chained_picks(window_size, heads));
        let mut stitcher = Self {
            blend: plan.spec.blend,
            weighting,
            heads: Vec::with_capacity(heads.len()),
            groups: Vec::new(),
        };
        for (i, h) in heads.iter().enumerate() {
            let cells: [usize; 3] = std::array::from_fn(|a| plan.padded_size[a] / h.stride[a]);
            let own: Option<[Vec<usize>; 3]> = picks.as_ref().map(|p| p[i].clone());
            let found = stitcher
                .groups
                .iter()
                .position(|g| g.stride == h.stride && g.picks == own);
            let group = match found {
                Some(g) => g,
                None => {
                    let shape = if blended {
                        (cells[2], cells[1], cells[0])
                    } else {
                        (0, 0, 0)
                    };
                    let mut g = WeightGroup {
                        stride: h.stride,
                        picks: own,
                        window: Array3::zeros((0, 0, 0)),
                        window_size: [0; 3],
                        total: Array3::zeros(shape),
                    };
                    if blended {
                        stitcher.fill_window_weights(&mut g, window_size);
                    }
                    stitcher.groups.push(g);
                    stitcher.groups.len() - 1
                }
            };
            stitcher.heads.push(Accumulator {
                name: h.name.clone(),
                stride: h.stride,
                sum: Array4::zeros((h.channels, cells[2], cells[1], cells[0])),
                group,
            });
        }
        stitcher
    }

    /// Adds one window's outputs (`[channels, z, y, x]` each, covering the whole window).
    pub fn add(&mut self, window: &Window, outputs: &[HeadMap]) -> Result<(), MissingHead> {
        let outputs = self
            .heads
            .iter()
            .map(|h| head(outputs, &h.name))
            .collect::<Result<Vec<_>, _>>()?;
        match self.blend {
            BlendMode::Halo => {
                for (head, out) in self.heads.iter_mut().zip(outputs) {
                    let st = head.stride;
                    let origin: [usize; 3] = std::array::from_fn(|a| window.min[a] / st[a]);
                    let lo: [usize; 3] = std::array::from_fn(|a| window.core_min[a] / st[a]);
                    let hi: [usize; 3] = std::array::from_fn(|a| window.core_max[a] / st[a]);
                    let source = out.slice(s![
                        ..,
                        lo[2] - origin[2]..hi[2] - origin[2],
                        lo[1] - origin[1]..hi[1] - origin[1],
                        lo[0] - origin[0]..hi[0] - origin[0]
                    ]);
                    head.sum
                        .slice_mut(s![.., lo[2]..hi[2], lo[1]..hi[1], lo[0]..hi[0]])
                        .assign(&source);
                }
            }
            BlendMode::Gaussian | BlendMode::Constant => {
                let size = window.size();
                let mut groups = std::mem::take(&mut self.groups);
                for g in &mut groups {
                    if g.window_size != size {
                        self.fill_window_weights(g, size);
                    }
                    let (window_weights, total) = (&g.window, &mut g.total);
                    total
                        .slice_mut(region(window, g.stride))
                        .zip_mut_with(window_weights, |t, w| *t += w);
                }
                self.groups = groups;
                for (head, out) in self.heads.iter_mut().zip(outputs) {
                    let weights = &self.groups[head.group].window;
                    let cells = region(window, head.stride);
                    for (c, channel) in out.outer_iter().enumerate() {
                        let mut target = head.sum.index_axis_mut(ndarray::Axis(0), c);
                        let mut target = target.slice_mut(cells);
                        ndarray::Zip::from(&mut target)
                            .and(&channel)
                            .and(weights)
                            .for_each(|t, v, w| *t += v * w);
                    }
                }
            }
        }
        Ok(())
    }

    /// `group`'s weight per output cell for windows of `size`, `[z, y, x]`.
    fn fill_window_weights(&self, group: &mut WeightGroup, size: [usize; 3]) {
        let cells: [usize; 3] = std::array::from_fn(|a| size[a] / group.stride[a]);
        group.window_size = size;
        group.window = match (&self.weighting, &group.picks) {
            (Weighting::MonaiChained, Some(picks))
                if picks.iter().zip(cells).all(|(p, n)| p.len() == n) =>
            {
                let profile = |a: usize| monai_profile(self.blend, size[a]);
                let (px, py, pz) = (profile(0), profile(1), profile(2));
                let floor = monai_floor(&px, &py, &pz);
                Array3::from_shape_fn((cells[2], cells[1], cells[0]), |(z, y, x)| {
                    // MONAI's product order: x, then y, then z.
                    (px[picks[0][x]] * py[picks[1][y]] * pz[picks[2][z]]).max(floor)
                })
            }
            _ => {
                let profile = |a: usize| weight_profile(self.blend, cells[a]);
                let (px, py, pz) = (profile(0), profile(1), profile(2));
                Array3::from_shape_fn((cells[2], cells[1], cells[0]), |(z, y, x)| {
                    pz[z] * py[y] * px[x]
                })
            }
        };
    }

    /// The finished maps, one per head in order; blended modes are divided by the
    /// accumulated weights.
    pub fn finish(mut self) -> Vec<HeadMap> {
        if self.blend != BlendMode::Halo {
            for head in &mut self.heads {
                let weight = &self.groups[head.group].total;
                for mut channel in head.sum.outer_iter_mut() {
                    channel.zip_mut_with(weight, |v, w| {
                        if *w > 0.0 {
                            *v /= w;
                        }
                    });
                }
            }
        }
        self.heads
            .into_iter()
            .map(|h| HeadMap {
                name: h.name,
                map: h.sum,
            })
            .collect()
    }
}

/// Per head and axis, the window input voxel whose weight each output cell gets when MONAI
/// resizes the weights to each head in turn from the previous one (`nearest-exact`: source
/// `floor((cell + 0.5) * from / to)`).
fn chained_picks(window: [usize; 3], heads: &[HeadGrid]) -> Vec<[Vec<usize>; 3]> {
    let mut previous: [Vec<usize>; 3] = std::array::from_fn(|a| (0..window[a]).collect());
    heads
        .iter()
        .map(|h| {
            let picks: [Vec<usize>; 3] = std::array::from_fn(|a| {
                let (from, to) = (previous[a].len(), window[a] / h.stride[a]);
                if from == to {
                    return previous[a].clone();
                }
                let scale = from as f64 / to.max(1) as f64;
                (0..to)
                    .map(|j| {
                        let i = (((j as f64 + 0.5) * scale).floor() as usize).min(from - 1);
                        previous[a][i]
                    })
                    .collect()
            });
            previous = picks.clone();
            picks
        })
        .collect()
}

/// The output cells of `window` at `stride`, `[z, y, x]`.
fn region(
    window: &Window,
    stride: [usize; 3],
) -> ndarray::SliceInfo<[ndarray::SliceInfoElem; 3], ndarray::Ix3, ndarray::Ix3> {
    let lo: [usize; 3] = std::array::from_fn(|a| window.min[a] / stride[a]);
    let hi: [usize; 3] = std::array::from_fn(|a| window.max[a] / stride[a]);
    s![lo[2]..hi[2], lo[1]..hi[1], lo[0]..hi[0]]
}

/// MONAI's 1-D Gaussian over `n` input voxels (`compute_importance_map`), before its clamp;
/// ones for `constant`.
fn monai_profile(blend: BlendMode, n: usize) -> Vec<f32> {
    if blend != BlendMode::Gaussian {
        return vec![1.0; n];
    }
    let sigma = n as f32 * 0.125;
    let start = -(n as f32 - 1.0) / 2.0;
    (0..n)
        .map(|i| {
            let x = start + i as f32;
            (x * x / (-2.0 * sigma * sigma)).exp()
        })
        .collect()
}

/// MONAI's clamp: the smallest value of the 3-D product, or 1e-3 when that is smaller.
fn monai_floor(px: &[f32], py: &[f32], pz: &[f32]) -> f32 {
    let min = |p: &[f32]| p.iter().copied().fold(f32::INFINITY, f32::min);
    (min(px) * min(py) * min(pz)).max(1e-3)
}
