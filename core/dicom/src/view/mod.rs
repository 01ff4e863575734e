//! What a viewer draws, without a GUI: multiplanar slices (or thick slabs, [`slab`]) as 8-bit
//! images under a window/level, orientation letters, and where a 3D box cuts a slice.
//!
//! Images are row-major, top row first. Axial: columns x, rows y (voxel order). Coronal: columns
//! x, rows z from the last slice to the first (so that, for the usual feet-first stack, superior is
//! at the top). Sagittal: columns y, rows z likewise. Pixel sizes in mm come with each image, so
//! the GUI can draw it with its physical aspect.

use ndarray::{ArrayView2, Axis};

use crate::volume::{Geometry, Voxels};

mod slab;
pub use slab::{Slab, SlabMode, plane_spacing_mm, slab_image};

/// The three planes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Plane {
    Axial,
    Coronal,
    Sagittal,
}

impl Plane {
    /// The voxel axis the plane is perpendicular to (x = 0, y = 1, z = 2).
    pub fn normal_axis(self) -> usize {
        match self {
            Self::Axial => 2,
            Self::Coronal => 1,
            Self::Sagittal => 0,
        }
    }

    /// Voxel axes along the image's columns and rows.
    pub fn image_axes(self) -> (usize, usize) {
        match self {
            Self::Axial => (0, 1),
            Self::Coronal => (0, 2),
            Self::Sagittal => (1, 2),
        }
    }

    /// Rows run against the voxel axis (z from last to first) on the coronal and sagittal views.
    fn rows_flipped(self) -> bool {
        self != Self::Axial
    }
}

/// A display window in HU.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WindowLevel {
    pub center_hu: f32,
    pub width_hu: f32,
}

impl WindowLevel {
    pub const LUNG: Self = Self {
        center_hu: -600.0,
        width_hu: 1500.0,
    };
    pub const SOFT_TISSUE: Self = Self {
        center_hu: 40.0,
        width_hu: 400.0,
    };
    pub const BONE: Self = Self {
        center_hu: 480.0,
        width_hu: 2500.0,
    };
    pub const BRAIN: Self = Self {
        center_hu: 40.0,
        width_hu: 80.0,
    };

    /// 0 at `center - width/2` and below, 255 at `center + width/2` and above.
    pub fn grey(&self, hu: f32) -> u8 {
        let low = self.center_hu - self.width_hu / 2.0;
        ((hu - low) / self.width_hu.max(1.0) * 255.0)
            .round()
            .clamp(0.0, 255.0) as u8
    }
}

/// One slice, ready to draw.
#[derive(Debug, Clone, PartialEq)]
pub struct SliceImage {
    pub width: usize,
    pub height: usize,
    /// Row-major grey values, top row first.
    pub pixels: Vec<u8>,
    /// Size of one pixel `[column, row]` in mm.
    pub pixel_size_mm: [f64; 2],
}

/// The slice `index` of `plane` under `window`; `None` when `index` is outside the volume.
pub fn slice_image(
    voxels: &Voxels,
    geometry: &Geometry,
    plane: Plane,
    index: usize,
    window: WindowLevel,
) -> Option<SliceImage> {
    let (width, height, values) = plane_values(voxels, plane, index)?;
    Some(SliceImage {
        width,
        height,
        pixels: values.iter().map(|hu| window.grey(*hu)).collect(),
        pixel_size_mm: pixel_size_mm(geometry, plane),
    })
}

/// The image's pixel size `[column, row]` in mm.
fn pixel_size_mm(geometry: &Geometry, plane: Plane) -> [f64; 2] {
    let (c, r) = plane.image_axes();
    [geometry.spacing_mm[c], geometry.spacing_mm[r]]
}

/// The HU of slice `index` of `plane` in image order (rows top first): `(width, height,
/// values)`, or `None` when `index` is outside the volume.
fn plane_values(voxels: &Voxels, plane: Plane, index: usize) -> Option<(usize, usize, Vec<f32>)> {
    let size = voxels.size();
    if index >= size[plane.normal_axis()] {
        return None;
    }
    // ndarray storage is [z, y, x]: the plane's normal voxel axis maps to storage axis 2 - a.
    let storage_axis = Axis(2 - plane.normal_axis());
    let (columns_axis, rows_axis) = plane.image_axes();
    let (width, height) = (size[columns_axis], size[rows_axis]);
    let mut values = vec![0f32; width * height];
    let mut fill = |hu: &dyn Fn(usize, usize) -> f32| {
        for row in 0..height {
            let r = if plane.rows_flipped() {
                height - 1 - row
            } else {
                row
            };
            for (column, out) in values[row * width..(row + 1) * width]
                .iter_mut()
                .enumerate()
            {
                *out = hu(r, column);
            }
        }
    };
    match voxels {
        Voxels::I16(a) => {
            let s: ArrayView2<'_, i16> = a.index_axis(storage_axis, index);
            fill(&|r, c| f32::from(s[[r, c]]));
        }
        Voxels::F32(a) => {
            let s: ArrayView2<'_, f32> = a.index_axis(storage_axis, index);
            fill(&|r, c| s[[r, c]]);
        }
    }
    Some((width, height, values))
}

/// A square crop of `plane` through `center` (study voxel coordinates, centres on integers),
/// `half_mm` each side, as `size_px` x `size_px` pixels (nearest voxel; outside the volume
/// black): a finding's thumbnail. Rows run as in [`slice_image`].
pub fn crop_image(
    voxels: &Voxels,
    geometry: &Geometry,
    plane: Plane,
    center: [f64; 3],
    half_mm: f64,
    size_px: usize,
    window: WindowLevel,
) -> SliceImage {
    let (c, r) = plane.image_axes();
    let n = plane.normal_axis();
    let size = voxels.size();
    let step_mm = 2.0 * half_mm / size_px.max(1) as f64;
    let mut pixels = vec![0u8; size_px * size_px];
    let index = center[n].round();
    for row in 0..size_px {
        // Offsets from the centre in mm, pixel centres; rows down the image.
        let dy = (row as f64 + 0.5) * step_mm - half_mm;
        for column in 0..size_px {
            let dx = (column as f64 + 0.5) * step_mm - half_mm;
            let mut at = [0.0; 3];
            at[n] = index;
            at[c] = center[c] + dx / geometry.spacing_mm[c];
            at[r] = if plane.rows_flipped() {
                center[r] - dy / geometry.spacing_mm[r]
            } else {
                center[r] + dy / geometry.spacing_mm[r]
            };
            let voxel = at.map(f64::round);
            if voxel
                .iter()
                .zip(size)
                .all(|(v, s)| *v >= 0.0 && *v < s as f64)
            {
                let hu = voxels.hu_at(voxel.map(|v| v as usize)).unwrap_or(f32::MIN);
                pixels[row * size_px + column] = window.grey(hu);
            }
        }
    }
    SliceImage {
        width: size_px,
        height: size_px,
        pixels,
        pixel_size_mm: [step_mm, step_mm],
    }
}

/// The patient direction letter (LPS: L, P, S and their opposites R, A, I) that a direction
/// points to most.
pub fn direction_letter(direction: [f64; 3]) -> char {
    let axis = (0..3)
        .max_by(|a, b| direction[*a].abs().total_cmp(&direction[*b].abs()))
        .unwrap_or(0);
    let positive = direction[axis] >= 0.0;
    match (axis, positive) {
        (0, true) => 'L',
        (0, false) => 'R',
        (1, true) => 'P',
        (1, false) => 'A',
        (2, true) => 'S',
        _ => 'I',
    }
}

/// Letters at the image's `[left, right, top, bottom]` edges.
pub fn orientation_letters(geometry: &Geometry, plane: Plane) -> [char; 4] {
    let (c, r) = plane.image_axes();
    let column_dir = geometry.direction(c);
    let mut row_dir = geometry.direction(r);
    if plane.rows_flipped() {
        row_dir = row_dir.map(|v| -v);
    }
    let neg = |d: [f64; 3]| d.map(|v| -v);
    [
        direction_letter(neg(column_dir)),
        direction_letter(column_dir),
        direction_letter(neg(row_dir)),
        direction_letter(row_dir),
    ]
}

/// Where a voxel box (`min` inclusive, `max` exclusive) cuts slice `index` of `plane`:
/// `[left, top, right, bottom]` in image pixels (right/bottom exclusive), or `None`.
pub fn box_on_slice(
    min: [usize; 3],
    max: [usize; 3],
    size: [usize; 3],
    plane: Plane,
    index: usize,
) -> Option<[usize; 4]> {
    let n = plane.normal_axis();
    if index < min[n] || index >= max[n] {
        return None;
    }
    let (c, r) = plane.image_axes();
    let (top, bottom) = if plane.rows_flipped() {
        (size[r] - max[r], size[r] - min[r])
    } else {
        (min[r], max[r])
    };
    Some([min[c], top, max[c], bottom])
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::Array3;

    fn volume() -> (Voxels, Geometry) {
        // 4 x 3 x 2 voxels; HU = 100 * z + 10 * y + x.
        let a = Array3::from_shape_fn((2, 3, 4), |(z, y, x)| (100 * z + 10 * y + x) as i16);
        (
            Voxels::I16(a),
            Geometry::axis_aligned([4, 3, 2], [0.5, 0.6, 2.0], [0.0; 3]),
        )
    }

    #[test]
    fn windows_map_hu_to_grey() {
        assert_eq!(WindowLevel::LUNG.grey(-1350.0), 0);
        assert_eq!(WindowLevel::LUNG.grey(150.0), 255);
        assert_eq!(WindowLevel::LUNG.grey(-600.0), 128);
    }

    #[test]
    fn slices_have_the_documented_layout_and_physical_size() {
        let (v, g) = volume();
        let w = WindowLevel {
            center_hu: 127.5,
            width_hu: 255.0,
        }; // grey = HU for 0..=255
        let axial = slice_image(&v, &g, Plane::Axial, 1, w).unwrap(); // ok: test code
        assert_eq!((axial.width, axial.height), (4, 3));
        assert_eq!(axial.pixels[4 + 3], 113); // row y = 1, column x = 3, z = 1
        assert_eq!(axial.pixel_size_mm, [0.5, 0.6]);
        let coronal = slice_image(&v, &g, Plane::Coronal, 2, w).unwrap(); // ok: test code
        assert_eq!((coronal.width, coronal.height), (4, 2));
        assert_eq!(coronal.pixels[..4], [120, 121, 122, 123]); // top row is the last slice, z = 1
        assert_eq!(coronal.pixel_size_mm, [0.5, 2.0]);
        let sagittal = slice_image(&v, &g, Plane::Sagittal, 3, w).unwrap(); // ok: test code
        assert_eq!((sagittal.width, sagittal.height), (3, 2));
        assert_eq!(sagittal.pixels[3..], [3, 13, 23]); // bottom row is z = 0
        assert!(slice_image(&v, &g, Plane::Axial, 2, w).is_none());
    }

    #[test]
    fn a_crop_is_centred_on_its_voxel_in_millimetres() {
        let (v, g) = volume();
        let w = WindowLevel {
            center_hu: 127.5,
            width_hu: 255.0,
        };
        // Axial around x 1.9, y 1, z 1: 1 mm each side in 4 pixels of 0.5 mm, pixel centres
        // at x 0.4, 1.4, 2.4, 3.4 voxels (0.5 mm voxels) and, on the second row, y 1.
        let crop = crop_image(&v, &g, Plane::Axial, [1.9, 1.0, 1.0], 1.0, 4, w);
        assert_eq!((crop.width, crop.pixel_size_mm), (4, [0.5, 0.5]));
        assert_eq!(crop.pixels[4..8], [110, 111, 112, 113]);
        // Coronal, rows from the last slice down; x 3.9 is outside the volume (black).
        let crop = crop_image(&v, &g, Plane::Coronal, [1.9, 2.0, 0.5], 2.0, 2, w);
        assert_eq!(crop.pixels, [120, 0, 20, 0]);
    }

    #[test]
    fn letters_follow_radiological_convention_for_lps_volumes() {
        let (_, g) = volume();
        assert_eq!(orientation_letters(&g, Plane::Axial), ['R', 'L', 'A', 'P']);
        assert_eq!(
            orientation_letters(&g, Plane::Coronal),
            ['R', 'L', 'S', 'I']
        );
        assert_eq!(
            orientation_letters(&g, Plane::Sagittal),
            ['A', 'P', 'S', 'I']
        );
    }

    #[test]
    fn boxes_are_cut_by_the_slices_they_cross() {
        let size = [4, 3, 2];
        assert_eq!(
            box_on_slice([1, 0, 0], [3, 2, 1], size, Plane::Axial, 0),
            Some([1, 0, 3, 2])
        );
        assert_eq!(
            box_on_slice([1, 0, 0], [3, 2, 1], size, Plane::Axial, 1),
            None
        );
        // Coronal rows are z flipped: z in [0, 1) is the bottom row of 2.
        assert_eq!(
            box_on_slice([1, 0, 0], [3, 2, 1], size, Plane::Coronal, 1),
            Some([1, 1, 3, 2])
        );
    }
}
