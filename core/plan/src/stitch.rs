//! Puts window outputs together into full-volume output maps, at the model's stride.
//!
//! Memory is bounded by the maps (one `f32` per output cell and channel, plus a weight map in
//! blended modes), never by the number of windows.
//! - `halo`: each window copies its core; cores partition the volume, so nothing is blended.
//! - `gaussian`: weighted average, weight a separable Gaussian with sigma 0.125 of the window
//!   (MONAI's choice), each axis floored so that edge cells never get zero weight.
//! - `constant`: plain average of the windows covering a cell.

use ndarray::{Array3, Array4, s};

use crate::plan::{BlendMode, TilePlan, Window};

/// Lowest weight of the 1-D Gaussian profile relative to its centre, so that no cell gets zero
/// weight. Floored per axis, not on the 3-D product: where every window is near its edge along
/// one axis (the volume's ends), the product's ratios between windows must survive.
const GAUSSIAN_FLOOR: f32 = 1e-3;

/// The full-volume output maps, each `[channels, z, y, x]` at the model's stride.
#[derive(Debug, Clone, PartialEq)]
pub struct Maps {
    pub stride: usize,
    pub heads: Vec<Array4<f32>>,
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

/// Accumulates window outputs for one plan.
#[derive(Debug)]
pub struct Stitcher {
    blend: BlendMode,
    stride: usize,
    heads: Vec<Array4<f32>>,
    weight: Option<Array3<f32>>,
}

impl Stitcher {
    /// `channels` per head, in the order the engine returns them.
    pub fn new(plan: &TilePlan, channels: &[usize]) -> Self {
        let stride = plan.grid.stride;
        let cells: [usize; 3] = std::array::from_fn(|a| plan.padded_size[a] / stride);
        let heads = channels
            .iter()
            .map(|c| Array4::zeros((*c, cells[2], cells[1], cells[0])))
            .collect();
        let weight = (plan.spec.blend != BlendMode::Halo)
            .then(|| Array3::zeros((cells[2], cells[1], cells[0])));
        Self {
            blend: plan.spec.blend,
            stride,
            heads,
            weight,
        }
    }

    /// Adds one window's outputs (`[channels, z, y, x]` each, covering the whole window).
    pub fn add(&mut self, window: &Window, outputs: &[Array4<f32>]) {
        let st = self.stride;
        let origin: [usize; 3] = std::array::from_fn(|a| window.min[a] / st);
        match self.blend {
            BlendMode::Halo => {
                let lo: [usize; 3] = std::array::from_fn(|a| window.core_min[a] / st);
                let hi: [usize; 3] = std::array::from_fn(|a| window.core_max[a] / st);
                for (map, out) in self.heads.iter_mut().zip(outputs) {
                    let source = out.slice(s![
                        ..,
                        lo[2] - origin[2]..hi[2] - origin[2],
                        lo[1] - origin[1]..hi[1] - origin[1],
                        lo[0] - origin[0]..hi[0] - origin[0]
                    ]);
                    map.slice_mut(s![.., lo[2]..hi[2], lo[1]..hi[1], lo[0]..hi[0]])
                        .assign(&source);
                }
            }
            BlendMode::Gaussian | BlendMode::Constant => {
                let size: [usize; 3] = std::array::from_fn(|a| window.size()[a] / st);
                let weights = self.window_weights(size);
                let region = s![
                    origin[2]..origin[2] + size[2],
                    origin[1]..origin[1] + size[1],
                    origin[0]..origin[0] + size[0]
                ];
                if let Some(total) = self.weight.as_mut() {
                    total
                        .slice_mut(region)
                        .zip_mut_with(&weights, |t, w| *t += w);
                }
                for (map, out) in self.heads.iter_mut().zip(outputs) {
                    for (c, channel) in out.outer_iter().enumerate() {
                        let mut target = map.slice_mut(s![
                            c,
                            origin[2]..origin[2] + size[2],
                            origin[1]..origin[1] + size[1],
                            origin[0]..origin[0] + size[0]
                        ]);
                        ndarray::Zip::from(&mut target)
                            .and(&channel)
                            .and(&weights)
                            .for_each(|t, v, w| *t += v * w);
                    }
                }
            }
        }
    }

    fn window_weights(&self, size: [usize; 3]) -> Array3<f32> {
        let profile = |n: usize| weight_profile(self.blend, n);
        let (px, py, pz) = (profile(size[0]), profile(size[1]), profile(size[2]));
        Array3::from_shape_fn((size[2], size[1], size[0]), |(z, y, x)| {
            pz[z] * py[y] * px[x]
        })
    }

    /// The finished maps; blended modes are divided by the accumulated weights.
    pub fn finish(mut self) -> Maps {
        if let Some(weight) = &self.weight {
            for map in &mut self.heads {
                for mut channel in map.outer_iter_mut() {
                    channel.zip_mut_with(weight, |v, w| {
                        if *w > 0.0 {
                            *v /= w;
                        }
                    });
                }
            }
        }
        Maps {
            stride: self.stride,
            heads: self.heads,
        }
    }
}
