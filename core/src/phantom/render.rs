//! Turns the analytic chest and its structures into HU voxels: paint, blur, add noise.
//!
//! Work is split by slice with rayon; every voxel's value depends only on its position and the
//! seed, so the result is the same whatever the thread count.

use ndarray::{Array3, Axis};
use rayon::prelude::*;

use super::anatomy::Chest;
use super::rng::gaussian_at;
use super::structures::{Nodule, Tube, coverage};
use tessera_dicom::geometry::Vec3;

/// Everything drawn into one volume.
#[derive(Debug)]
pub struct Scene<'a> {
    pub chest: Chest,
    pub size: [usize; 3],
    pub spacing_mm: Vec3,
    pub tubes: &'a [Tube],
    pub nodules: &'a [Nodule],
}

impl Scene<'_> {
    /// Phantom millimetres of voxel `(x, y, z)`: x, y from the centre, z from the first slice.
    fn position(&self, x: usize, y: usize, z: usize) -> Vec3 {
        [
            (x as f64 - (self.size[0] as f64 - 1.0) / 2.0) * self.spacing_mm[0],
            (y as f64 - (self.size[1] as f64 - 1.0) / 2.0) * self.spacing_mm[1],
            z as f64 * self.spacing_mm[2],
        ]
    }

    /// Voxel index range `[lo, hi)` along `axis` covering `centre ± radius` mm.
    fn span(&self, axis: usize, centre: f64, radius: f64) -> (usize, usize) {
        let n = self.size[axis];
        let offset = if axis < 2 {
            (n as f64 - 1.0) / 2.0
        } else {
            0.0
        };
        let lo = ((centre - radius) / self.spacing_mm[axis] + offset)
            .floor()
            .max(0.0);
        let hi = ((centre + radius) / self.spacing_mm[axis] + offset).ceil() + 1.0;
        (lo as usize, (hi.max(0.0) as usize).min(n))
    }
}

/// Paints the scene into a `[z, y, x]` HU volume (before blur and noise).
pub fn paint(scene: &Scene<'_>) -> Array3<f32> {
    let [nx, ny, nz] = scene.size;
    let mut volume = Array3::<f32>::zeros((nz, ny, nx));
    // Partial-volume width: the in-plane voxel size.
    let pv_mm = scene.spacing_mm[0].max(scene.spacing_mm[1]);
    volume
        .axis_iter_mut(Axis(0))
        .into_par_iter()
        .enumerate()
        .for_each(|(z, mut slice)| {
            for y in 0..ny {
                for x in 0..nx {
                    let p = scene.position(x, y, z);
                    let n = scene.chest.normalised(p);
                    slice[[y, x]] = scene.chest.base_hu(n[0], n[1], n[2], p[2]);
                }
            }
            let z_mm = z as f64 * scene.spacing_mm[2];
            for tube in scene.tubes {
                let r = tube.outer_radius_mm() + pv_mm;
                if z_mm < tube.a[2].min(tube.b[2]) - r || z_mm > tube.a[2].max(tube.b[2]) + r {
                    continue;
                }
                let (x0, x1) = scene.span(
                    0,
                    0.5 * (tube.a[0] + tube.b[0]),
                    0.5 * (tube.a[0] - tube.b[0]).abs() + r,
                );
                let (y0, y1) = scene.span(
                    1,
                    0.5 * (tube.a[1] + tube.b[1]),
                    0.5 * (tube.a[1] - tube.b[1]).abs() + r,
                );
                for y in y0..y1 {
                    for x in x0..x1 {
                        let (d, radius) = tube.distance_and_radius(scene.position(x, y, z));
                        let value = &mut slice[[y, x]];
                        if let Some((thickness, wall_hu)) = tube.wall {
                            let f = coverage(radius + thickness - d, pv_mm) as f32;
                            *value += f * (wall_hu.max(*value) - *value);
                        }
                        let f = coverage(radius - d, pv_mm) as f32;
                        *value += f * (tube.hu - *value);
                    }
                }
            }
            for nodule in scene.nodules {
                let r = nodule.diameter_mm / 2.0 + pv_mm;
                if (z_mm - nodule.centre[2]).abs() > r {
                    continue;
                }
                let (x0, x1) = scene.span(0, nodule.centre[0], r);
                let (y0, y1) = scene.span(1, nodule.centre[1], r);
                for y in y0..y1 {
                    for x in x0..x1 {
                        let d = tessera_dicom::geometry::norm(tessera_dicom::geometry::sub(
                            scene.position(x, y, z),
                            nodule.centre,
                        ));
                        if let Some((hu, f)) = nodule.paint(d, pv_mm) {
                            let value = &mut slice[[y, x]];
                            // Ground glass only raises density: vessels stay visible through it.
                            let target = hu.max(*value);
                            *value += f as f32 * (target - *value);
                        }
                    }
                }
            }
        });
    volume
}

/// A [1, 2, 1] / 4 blur along each axis: the scanner's point spread, roughly.
pub fn blur(volume: &mut Array3<f32>) {
    for axis in [2, 1, 0] {
        let lanes: Vec<_> = volume.lanes_mut(Axis(axis)).into_iter().collect();
        lanes.into_par_iter().for_each(|mut lane| {
            let n = lane.len();
            if n < 3 {
                return;
            }
            let mut previous = lane[0];
            for i in 0..n {
                let current = lane[i];
                let next = if i + 1 < n { lane[i + 1] } else { current };
                lane[i] = 0.25 * previous + 0.5 * current + 0.25 * next;
                previous = current;
            }
        });
    }
}

/// Adds white Gaussian noise of `sigma_hu`, fixed by `seed`, then rounds to whole HU.
pub fn add_noise_and_quantise(volume: &Array3<f32>, sigma_hu: f32, seed: u64) -> Array3<i16> {
    let (nz, ny, nx) = volume.dim();
    let mut out = Array3::<i16>::zeros((nz, ny, nx));
    let plane = (nx * ny) as u64;
    out.axis_iter_mut(Axis(0))
        .into_par_iter()
        .zip(volume.axis_iter(Axis(0)).into_par_iter())
        .enumerate()
        .for_each(|(z, (mut out_slice, in_slice))| {
            for ((y, x), value) in in_slice.indexed_iter() {
                let index = z as u64 * plane + (y * nx + x) as u64;
                let noisy = value + sigma_hu * gaussian_at(seed, index);
                out_slice[[y, x]] = noisy.round().clamp(-1024.0, 3071.0) as i16;
            }
        });
    out
}
