//! Resampling a volume to the spacing a model was trained at (trilinear, in voxel space).
//!
//! The new grid starts at the same first voxel centre and keeps the axis directions, so
//! `world_from_voxel` only changes its scale; boxes found on the new grid map back through it.

use ndarray::Array3;
use rayon::prelude::*;

use tessera_dicom::geometry::{Affine3, scale};
use tessera_dicom::volume::{Geometry, MAX_VOXELS, Volume, Voxels};

/// Spacings closer than this (relative to the target) are the same: no resampling.
const SAME_SPACING: f64 = 1e-6;

/// Whether a study's spacing along one axis is the target's: the one test of "same spacing"
/// (the grid's size and whether a copy is made both follow it).
fn same_spacing(study_mm: f64, target_mm: f64) -> bool {
    (study_mm - target_mm).abs() <= SAME_SPACING * target_mm
}

/// Why a volume cannot be resampled.
#[derive(Debug, thiserror::Error)]
pub enum ResampleError {
    #[error(
        "resampling {from} to {spacing_mm:?} mm would make about {voxels:.3e} voxels, over the limit of {MAX_VOXELS}: the spacing is too fine for this volume"
    )]
    TooLarge {
        from: String,
        spacing_mm: [f64; 3],
        voxels: f64,
    },
    #[error("spacing {0:?} mm is not three positive, finite numbers")]
    BadSpacing([f64; 3]),
    #[error(transparent)]
    Orient(#[from] crate::orient::OrientError),
}

/// The size of the grid [`resample`] would make, without making it (saturating: see
/// [`checked_resampled_size`] for the limit).
pub fn resampled_size(geometry: &Geometry, spacing_mm: [f64; 3]) -> [usize; 3] {
    axis_counts(geometry, spacing_mm).map(|n| n as usize)
}

fn axis_counts(geometry: &Geometry, spacing_mm: [f64; 3]) -> [f64; 3] {
    std::array::from_fn(|a| {
        let ratio = spacing_mm[a] / geometry.spacing_mm[a];
        if same_spacing(geometry.spacing_mm[a], spacing_mm[a]) {
            geometry.size[a] as f64
        } else {
            ((geometry.size[a].saturating_sub(1) as f64 / ratio).floor() + 1.0).max(1.0)
        }
    })
}

/// The size [`resample`] would make, refused beyond [`MAX_VOXELS`] before anything is allocated.
pub fn checked_resampled_size(
    geometry: &Geometry,
    spacing_mm: [f64; 3],
) -> Result<[usize; 3], ResampleError> {
    if !spacing_mm.iter().all(|s| s.is_finite() && *s > 0.0) {
        return Err(ResampleError::BadSpacing(spacing_mm));
    }
    let counts = axis_counts(geometry, spacing_mm);
    let voxels: f64 = counts.iter().product();
    if !voxels.is_finite() || voxels > MAX_VOXELS as f64 {
        return Err(ResampleError::TooLarge {
            from: geometry.size_label(),
            spacing_mm,
            voxels,
        });
    }
    Ok(counts.map(|n| n as usize))
}

/// The grid [`resample`] makes: the same first voxel centre and axis directions, voxels of
/// `spacing_mm`, so `world_from_voxel` only changes its scale.
pub fn resampled_geometry(geometry: &Geometry, spacing_mm: [f64; 3]) -> Geometry {
    let ratio: [f64; 3] = std::array::from_fn(|a| spacing_mm[a] / geometry.spacing_mm[a]);
    let w = &geometry.world_from_voxel;
    let columns = [0, 1, 2].map(|a| scale(w.column(a), ratio[a]));
    Geometry {
        size: resampled_size(geometry, spacing_mm),
        spacing_mm,
        world_from_voxel: Affine3::from_columns(columns, w.translation),
    }
}

/// Whether a volume of `geometry` differs from `spacing_mm`, so that [`resample`] makes a copy.
pub fn resample_needed(geometry: &Geometry, spacing_mm: [f64; 3]) -> bool {
    (0..3).any(|a| !same_spacing(geometry.spacing_mm[a], spacing_mm[a]))
}

/// `volume` on a grid of `spacing_mm`, or `None` when it already has that spacing.
pub fn resample(volume: &Volume, spacing_mm: [f64; 3]) -> Result<Option<Volume>, ResampleError> {
    let g = &volume.geometry;
    let size = checked_resampled_size(g, spacing_mm)?;
    if !resample_needed(g, spacing_mm) {
        return Ok(None);
    }
    // Old voxel coordinate of new voxel i along axis a: i * ratio[a].
    let ratio: [f64; 3] = std::array::from_fn(|a| spacing_mm[a] / g.spacing_mm[a]);
    // Read in the source's own type: an f32 copy of a 512x512x160 study would hold 160 MiB
    // more while the copy is made.
    let out = match &volume.voxels {
        Voxels::I16(source) => trilinear(source, size, ratio),
        Voxels::F32(source) => trilinear(source, size, ratio),
    };
    Ok(Some(Volume {
        voxels: Voxels::F32(out),
        geometry: resampled_geometry(g, spacing_mm),
        info: volume.info.clone(),
        warnings: volume.warnings.clone(),
        // The source's slice indices do not apply to the new grid; the warnings name them.
        filled_slices: Vec::new(),
        instances: volume.instances.clone(),
    }))
}

/// `source` (`[z, y, x]`) sampled trilinearly at `i * ratio` for each new voxel `i` of `size`.
fn trilinear<T: Copy + Into<f64> + Sync>(
    source: &Array3<T>,
    size: [usize; 3],
    ratio: [f64; 3],
) -> Array3<f32> {
    let (sz, sy, sx) = source.dim();
    let mut out = Array3::<f32>::zeros((size[2], size[1], size[0]));
    let plane = size[0] * size[1];
    if let Some(flat) = out.as_slice_mut() {
        flat.par_chunks_mut(plane)
            .enumerate()
            .for_each(|(z, slice)| {
                let (z0, z1, wz) = bracket(z as f64 * ratio[2], sz);
                for y in 0..size[1] {
                    let (y0, y1, wy) = bracket(y as f64 * ratio[1], sy);
                    for x in 0..size[0] {
                        let (x0, x1, wx) = bracket(x as f64 * ratio[0], sx);
                        let at = |zz, yy, xx| source[[zz, yy, xx]].into();
                        let lerp = |a: f64, b: f64, w: f64| a + w * (b - a);
                        let c00 = lerp(at(z0, y0, x0), at(z0, y0, x1), wx);
                        let c01 = lerp(at(z0, y1, x0), at(z0, y1, x1), wx);
                        let c10 = lerp(at(z1, y0, x0), at(z1, y0, x1), wx);
                        let c11 = lerp(at(z1, y1, x0), at(z1, y1, x1), wx);
                        slice[y * size[0] + x] =
                            lerp(lerp(c00, c01, wy), lerp(c10, c11, wy), wz) as f32;
                    }
                }
            });
    }
    out
}

/// Neighbouring indices and weight for coordinate `c` on an axis of `n` voxels.
fn bracket(c: f64, n: usize) -> (usize, usize, f64) {
    let lo = (c.floor().max(0.0) as usize).min(n - 1);
    let hi = (lo + 1).min(n - 1);
    (lo, hi, (c - lo as f64).clamp(0.0, 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_dicom::volume::SeriesInfo;

    #[test]
    fn a_linear_ramp_stays_linear_and_world_positions_agree() {
        let a = Array3::from_shape_fn((5, 4, 9), |(z, _, x)| (10 * x + 100 * z) as i16);
        let volume = Volume {
            voxels: Voxels::I16(a),
            geometry: Geometry::axis_aligned([9, 4, 5], [0.5, 1.0, 2.0], [1.0, 2.0, 3.0]),
            info: SeriesInfo::default(),
            warnings: Vec::new(),
            filled_slices: Vec::new(),
            instances: Vec::new(),
        };
        let r = resample(&volume, [1.0, 1.0, 1.0]).unwrap().unwrap(); // ok: test code
        assert_eq!(r.geometry.size, [5, 4, 9]);
        // New voxel (2, 0, 3) is old (4, 0, 1.5): 10 * 4 + 100 * 1.5.
        assert_eq!(r.voxels.hu_at([2, 0, 3]), Some(190.0));
        let world_new = r.geometry.world_from_voxel.apply([2.0, 0.0, 3.0]);
        let world_old = volume.geometry.world_from_voxel.apply([4.0, 0.0, 1.5]);
        assert_eq!(world_new, world_old);
        assert!(resample(&volume, [0.5, 1.0, 2.0]).unwrap().is_none()); // ok: test code
        let err = resample(&volume, [1e-9, 1.0, 1.0]).unwrap_err(); // ok: test code
        assert!(err.to_string().contains("over the limit"), "{err}");
    }
}
