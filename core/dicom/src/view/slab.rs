//! Thick slabs: the planes of a view within a thickness in millimetres along its normal,
//! projected to one image (MIP, MinIP or average), as radiologists search for nodules
//! (vessels become lines, nodules stay round).
//!
//! The thickness is physical: neighbouring planes lie [`plane_spacing_mm`] apart along the
//! view's normal, worked out from the series' geometry (so an anisotropic or gantry-tilted
//! series gets the planes its millimetres cover), and a slab takes the planes whose centres
//! lie within half the thickness of the current one's.

use super::{Plane, SliceImage, WindowLevel, pixel_size_mm, plane_values};
use crate::geometry::{cross, dot, norm};
use crate::volume::{Geometry, Voxels};

/// How a slab's planes become one image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlabMode {
    /// The highest value along the normal: vessels and nodules stand out.
    Mip,
    /// The lowest: airways and emphysema.
    MinIp,
    /// The mean: a thicker slice, less noise.
    Average,
}

impl SlabMode {
    pub const ALL: [Self; 3] = [Self::Mip, Self::MinIp, Self::Average];

    pub fn label(self) -> &'static str {
        match self {
            Self::Mip => "MIP",
            Self::MinIp => "MinIP",
            Self::Average => "average",
        }
    }
}

/// A slab: its thickness in mm and how it is projected.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Slab {
    pub thickness_mm: f64,
    pub mode: SlabMode,
}

impl Slab {
    /// Planes each side of the current one: those whose centres lie within half the
    /// thickness, on `geometry`'s planes of `plane`.
    pub fn half_planes(&self, geometry: &Geometry, plane: Plane) -> usize {
        let spacing = plane_spacing_mm(geometry, plane);
        if !spacing.is_finite() || spacing <= 0.0 || !self.thickness_mm.is_finite() {
            return 0;
        }
        (self.thickness_mm / 2.0 / spacing + 1e-9).floor().max(0.0) as usize
    }

    /// The thickness the planes actually cover (each plane one plane spacing thick).
    pub fn covered_mm(&self, geometry: &Geometry, plane: Plane) -> f64 {
        (2 * self.half_planes(geometry, plane) + 1) as f64 * plane_spacing_mm(geometry, plane)
    }
}

/// The distance in mm between neighbouring planes of `plane` along its normal: a voxel's
/// volume over its face in the plane (the voxel axis's spacing when the axes are orthogonal,
/// less by the cosine of a gantry tilt).
pub fn plane_spacing_mm(geometry: &Geometry, plane: Plane) -> f64 {
    let (c, r) = plane.image_axes();
    let n = plane.normal_axis();
    let m = &geometry.world_from_voxel;
    let face = cross(m.column(c), m.column(r));
    let area = norm(face);
    if area > 0.0 {
        dot(m.column(n), face).abs() / area
    } else {
        geometry.spacing_mm[n]
    }
}

/// Slice `index` of `plane` as `slab` (clipped at the volume's ends) under `window`; `None`
/// when `index` is outside the volume.
pub fn slab_image(
    voxels: &Voxels,
    geometry: &Geometry,
    plane: Plane,
    index: usize,
    slab: Slab,
    window: WindowLevel,
) -> Option<SliceImage> {
    let (width, height, mut acc) = plane_values(voxels, plane, index)?;
    let k = slab.half_planes(geometry, plane);
    let last = voxels.size()[plane.normal_axis()] - 1;
    let (first, end) = (index.saturating_sub(k), (index + k).min(last));
    for other in (first..=end).filter(|i| *i != index) {
        let (_, _, values) = plane_values(voxels, plane, other)?;
        let combine: fn(f32, f32) -> f32 = match slab.mode {
            SlabMode::Mip => f32::max,
            SlabMode::MinIp => f32::min,
            SlabMode::Average => |a, b| a + b,
        };
        for (a, v) in acc.iter_mut().zip(values) {
            *a = combine(*a, v);
        }
    }
    if slab.mode == SlabMode::Average {
        let n = (end - first + 1) as f32;
        acc.iter_mut().for_each(|a| *a /= n);
    }
    Some(SliceImage {
        width,
        height,
        pixels: acc.iter().map(|hu| window.grey(*hu)).collect(),
        pixel_size_mm: pixel_size_mm(geometry, plane),
    })
}

#[cfg(test)]
mod tests {
    use ndarray::Array3;

    use super::*;
    use crate::geometry::Affine3;

    /// 5 x 4 x 9 voxels of spacing 0.8 x 0.9 x 2.5 mm with scattered values.
    fn volume() -> (Voxels, Geometry) {
        let a = Array3::from_shape_fn((9, 4, 5), |(z, y, x)| {
            ((x * 37 + y * 101 + z * 53) % 211) as i16 - 100
        });
        let g = Geometry::axis_aligned([5, 4, 9], [0.8, 0.9, 2.5], [0.0; 3]);
        (Voxels::I16(a), g)
    }

    /// The image brute force: every voxel of the planes within the slab, by voxel index.
    fn brute(v: &Voxels, plane: Plane, index: usize, k: usize, mode: SlabMode) -> Vec<f32> {
        let size = v.size();
        let (c, r) = plane.image_axes();
        let n = plane.normal_axis();
        let mut out = Vec::new();
        for row in 0..size[r] {
            let rv = if plane == Plane::Axial {
                row
            } else {
                size[r] - 1 - row
            };
            for col in 0..size[c] {
                let mut values = Vec::new();
                for j in index.saturating_sub(k)..=(index + k).min(size[n] - 1) {
                    let mut at = [0; 3];
                    (at[c], at[r], at[n]) = (col, rv, j);
                    values.push(v.hu_at(at).unwrap());
                }
                out.push(match mode {
                    SlabMode::Mip => values.iter().copied().fold(f32::MIN, f32::max),
                    SlabMode::MinIp => values.iter().copied().fold(f32::MAX, f32::min),
                    SlabMode::Average => values.iter().sum::<f32>() / values.len() as f32,
                });
            }
        }
        out
    }

    #[test]
    fn a_slab_is_the_brute_force_projection_of_its_planes() {
        let (v, g) = volume();
        // Grey = HU + 128 for HU in -128..=127, so the images compare values exactly
        // (averages to the nearest grey).
        let w = WindowLevel {
            center_hu: 0.0,
            width_hu: 255.0,
        };
        for plane in [Plane::Axial, Plane::Coronal, Plane::Sagittal] {
            for mode in SlabMode::ALL {
                for thickness_mm in [0.0, 2.0, 5.0, 10.0] {
                    let slab = Slab { thickness_mm, mode };
                    let k = slab.half_planes(&g, plane);
                    let n = v.size()[plane.normal_axis()];
                    for index in [0, n / 2, n - 1] {
                        let image = slab_image(&v, &g, plane, index, slab, w).unwrap();
                        let expected: Vec<u8> = brute(&v, plane, index, k, mode)
                            .into_iter()
                            .map(|hu| w.grey(hu))
                            .collect();
                        assert_eq!(
                            image.pixels, expected,
                            "{plane:?} {mode:?} {thickness_mm} mm at {index}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn the_thickness_is_in_millimetres_along_the_normal() {
        let (_, g) = volume();
        let ten = Slab {
            thickness_mm: 10.0,
            mode: SlabMode::Mip,
        };
        // Axial planes 2.5 mm apart: 10 mm holds the planes within 5 mm, two each side.
        assert_eq!(ten.half_planes(&g, Plane::Axial), 2);
        assert_eq!(ten.covered_mm(&g, Plane::Axial), 12.5);
        // Coronal planes 0.9 mm apart: five each side.
        assert_eq!(ten.half_planes(&g, Plane::Coronal), 5);
        // A 20 degree gantry tilt: slices 2.5 mm apart along z, 2.5 cos 20 along the normal.
        let tilt = 20f64.to_radians();
        let tilted = Geometry {
            world_from_voxel: Affine3::from_columns(
                [
                    [0.8, 0.0, 0.0],
                    [0.0, 0.9, 0.0],
                    [0.0, 2.5 * tilt.sin(), 2.5 * tilt.cos()],
                ],
                [0.0; 3],
            ),
            ..g
        };
        let d = plane_spacing_mm(&tilted, Plane::Axial);
        assert!((d - 2.5 * tilt.cos()).abs() < 1e-12, "{d}");
        assert_eq!(ten.half_planes(&tilted, Plane::Axial), 2); // 5 / 2.349 = 2.1
        // 9.6 mm: 4.8 mm each side is one plane of 2.5 mm but two of 2.35 mm.
        let slab = Slab {
            thickness_mm: 9.6,
            mode: SlabMode::Mip,
        };
        let planes = |g: &Geometry| slab.half_planes(g, Plane::Axial);
        assert_eq!((planes(&g), planes(&tilted)), (1, 2));
        let off = Slab {
            thickness_mm: 0.0,
            mode: SlabMode::Mip,
        };
        assert_eq!(off.half_planes(&g, Plane::Sagittal), 0);
    }
}
