//! Cuts model inputs out of a volume (a window for the detector, a cube around a candidate for
//! the rescoring stage) and normalises them as the model card says.

use std::ops::Range;

use ndarray::{Array5, ArrayViewMut3, s};

use tessera_dicom::volume::Voxels;
use tessera_plan::model::InputSpec;
use tessera_plan::plan::Window;

/// `[1, 1, z, y, x]`: HU clipped to the card's window and mapped to `[0, 1]`. Voxels beyond the
/// volume (the stride padding) are 0, i.e. the window's low end (air).
pub fn window_input(voxels: &Voxels, window: &Window, spec: &InputSpec) -> Array5<f32> {
    let size = window.size();
    let mut out = Array5::<f32>::zeros((1, 1, size[2], size[1], size[0]));
    let start = window.min.map(|v| v as i64);
    fill(out.slice_mut(s![0, 0, .., .., ..]), voxels, start, spec);
    out
}

/// Fills `target` (`[z, y, x]`, an `edge`-voxel cube of zeros) with the cube centred on
/// `center` (voxels `[x, y, z]`, rounded half to even as NumPy does in training): voxels
/// `round(c) - edge / 2 ..` on each axis, normalised like [`window_input`], air (0) beyond the
/// volume on every side.
pub fn candidate_patch(
    target: ArrayViewMut3<'_, f32>,
    voxels: &Voxels,
    center: [f64; 3],
    spec: &InputSpec,
) {
    let edge = target.dim().0;
    let start = center.map(|c| c.round_ties_even() as i64 - (edge / 2) as i64);
    fill(target, voxels, start, spec);
}

/// Like [`candidate_patch`] over a cube `scale` times as wide (`scale` > 1: a large candidate
/// shrunk to the size the classifier was trained on): `edge` points per axis, `scale` voxels
/// apart, centred where [`candidate_patch`]'s cube is, sampled trilinearly in HU (air beyond
/// the volume), then normalised. At `scale` 1 it gives [`candidate_patch`]'s values.
pub fn scaled_candidate_patch(
    mut target: ArrayViewMut3<'_, f32>,
    voxels: &Voxels,
    center: [f64; 3],
    scale: f64,
    spec: &InputSpec,
) {
    let edge = target.dim().0;
    // candidate_patch's cube runs from round(c) - edge/2: its middle is half a voxel lower.
    let middle = center.map(|c| c.round_ties_even() - 0.5);
    let half = (edge as f64 - 1.0) / 2.0;
    let at = |a: usize, i: usize| middle[a] + (i as f64 - half) * scale;
    let size = voxels.size();
    let [lo, hi] = spec.hu_window;
    let hu = |x: i64, y: i64, z: i64| -> f32 {
        let inside = |v: i64, n: usize| (0..n as i64).contains(&v);
        if !(inside(x, size[0]) && inside(y, size[1]) && inside(z, size[2])) {
            return lo;
        }
        let (x, y, z) = (x as usize, y as usize, z as usize);
        match voxels {
            Voxels::I16(a) => f32::from(a[[z, y, x]]),
            Voxels::F32(a) => a[[z, y, x]],
        }
    };
    for ((k, j, i), out) in target.indexed_iter_mut() {
        let p = [at(0, i), at(1, j), at(2, k)];
        let base = p.map(|v| v.floor());
        let t = std::array::from_fn::<f64, 3, _>(|a| p[a] - base[a]);
        let [bx, by, bz] = base.map(|v| v as i64);
        let mut sum = 0.0;
        for corner in 0..8 {
            let (dx, dy, dz) = (corner & 1, (corner >> 1) & 1, (corner >> 2) & 1);
            let w = [dx, dy, dz]
                .iter()
                .enumerate()
                .map(|(a, d)| if *d == 1 { t[a] } else { 1.0 - t[a] })
                .product::<f64>();
            if w > 0.0 {
                sum += w * f64::from(hu(bx + dx, by + dy, bz + dz));
            }
        }
        *out = (((sum as f32).clamp(lo, hi)) - lo) / (hi - lo);
    }
}

/// Fills `target` (`[z, y, x]`, zeros) with the normalised voxels from `start` (`[x, y, z]`, may
/// be negative) on; what lies beyond the volume stays 0.
fn fill(mut target: ArrayViewMut3<'_, f32>, voxels: &Voxels, start: [i64; 3], spec: &InputSpec) {
    let (d, h, w) = target.dim();
    let extent = [w, h, d];
    let volume_size = voxels.size();
    // Per axis: the volume's voxels inside the target, and where they go in it.
    let inside: [Range<i64>; 3] = std::array::from_fn(|a| {
        start[a].max(0)..(start[a] + extent[a] as i64).min(volume_size[a] as i64)
    });
    if inside.iter().any(|r| r.end <= r.start) {
        return;
    }
    let to = |a: usize| (inside[a].start - start[a]) as usize..(inside[a].end - start[a]) as usize;
    let from = |a: usize| inside[a].start as usize..inside[a].end as usize;
    let mut target = target.slice_mut(s![to(2), to(1), to(0)]);
    let region = s![from(2), from(1), from(0)];
    let [lo, hi] = spec.hu_window;
    let scale = 1.0 / (hi - lo);
    let normalise = move |hu: f32| (hu.clamp(lo, hi) - lo) * scale;
    match voxels {
        Voxels::I16(a) => {
            target.zip_mut_with(&a.slice(region), |o, v| *o = normalise(f32::from(*v)));
        }
        Voxels::F32(a) => target.zip_mut_with(&a.slice(region), |o, v| *o = normalise(*v)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::Array3;

    fn patch(voxels: &Voxels, center: [f64; 3], edge: usize, spec: &InputSpec) -> Array3<f32> {
        let mut out = Array3::zeros((edge, edge, edge));
        candidate_patch(out.view_mut(), voxels, center, spec);
        out
    }

    #[test]
    fn windows_are_normalised_and_padded_with_air() {
        let mut a = Array3::<i16>::from_elem((3, 4, 5), -1000);
        a[[2, 3, 4]] = 400;
        a[[0, 0, 0]] = -300;
        let spec = InputSpec {
            name: "ct".into(),
            layout: "NCDHW".into(),
            hu_window: [-1000.0, 400.0],
            normalisation: String::new(),
            orientation: None,
        };
        let window = Window {
            index: 0,
            min: [2, 2, 0],
            max: [6, 6, 4],
            core_min: [2, 2, 0],
            core_max: [6, 6, 4],
        };
        let x = window_input(&Voxels::I16(a), &window, &spec);
        assert_eq!(x.dim(), (1, 1, 4, 4, 4));
        assert_eq!(x[[0, 0, 2, 1, 2]], 1.0); // voxel (4, 3, 2) at 400 HU
        assert_eq!(x[[0, 0, 3, 0, 0]], 0.0); // z = 3 is beyond the volume: padding
        assert_eq!(x[[0, 0, 0, 0, 3]], 0.0); // x = 5 is beyond the volume
        let whole = Window {
            index: 0,
            min: [0, 0, 0],
            max: [5, 4, 3],
            core_min: [0; 3],
            core_max: [5, 4, 3],
        };
        let a = Array3::<i16>::from_elem((3, 4, 5), -300);
        assert_eq!(
            window_input(&Voxels::I16(a), &whole, &spec)[[0, 0, 0, 0, 0]],
            0.5
        );
    }

    /// Voxel value encodes its position: hu = 100 z + 10 y + x - 1000 (7 x 6 x 5 voxels).
    fn position_volume() -> (Voxels, InputSpec) {
        let a = Array3::<i16>::from_shape_fn((5, 6, 7), |(z, y, x)| {
            (100 * z + 10 * y + x) as i16 - 1000
        });
        let spec = InputSpec {
            name: "ct".into(),
            layout: "NCDHW".into(),
            hu_window: [-1000.0, 400.0],
            normalisation: String::new(),
            orientation: None,
        };
        (Voxels::I16(a), spec)
    }

    #[test]
    fn candidate_patches_are_centred_and_padded_with_air_on_every_side() {
        let (voxels, spec) = position_volume();
        let hu = |v: f32| v * 1400.0 - 1000.0;
        // Centre (1.5, 2.4, 0.6) rounds (half to even) to (2, 2, 1); a 4-cube starts at (0, 0, -1).
        let p = patch(&voxels, [1.5, 2.4, 0.6], 4, &spec);
        assert_eq!(p.dim(), (4, 4, 4));
        assert!(p.slice(s![0, .., ..]).iter().all(|&v| v == 0.0)); // z = -1: air
        assert!((hu(p[[1, 3, 2]]) - (100.0 * 0.0 + 10.0 * 3.0 + 2.0 - 1000.0)).abs() < 1e-3);
        assert!((hu(p[[3, 0, 1]]) - (100.0 * 2.0 + 1.0 - 1000.0)).abs() < 1e-3);
        // Near the far corner: x 5..9, y 4..8, z 3..7; beyond the volume is air.
        let p = patch(&voxels, [7.0, 6.0, 5.0], 4, &spec);
        assert!((hu(p[[0, 0, 0]]) - (300.0 + 40.0 + 5.0 - 1000.0)).abs() < 1e-3);
        assert!((hu(p[[1, 1, 1]]) - (400.0 + 50.0 + 6.0 - 1000.0)).abs() < 1e-3);
        assert_eq!(p[[2, 0, 0]], 0.0); // z = 5
        assert_eq!(p[[0, 2, 0]], 0.0); // y = 6
        assert_eq!(p[[0, 0, 2]], 0.0); // x = 7
        // Wholly outside: all air.
        let p = patch(&voxels, [-10.0, 0.0, 0.0], 4, &spec);
        assert!(p.iter().all(|&v| v == 0.0));
    }

    #[test]
    fn scaled_patches_sample_a_wider_cube_about_the_same_middle() {
        // Trilinear sampling of the position-encoding volume is exact inside it.
        let (voxels, spec) = position_volume();
        let hu = |v: f32| v * 1400.0 - 1000.0;
        let scaled = |center: [f64; 3], scale: f64| {
            let mut out = Array3::zeros((4, 4, 4));
            scaled_candidate_patch(out.view_mut(), &voxels, center, scale, &spec);
            out
        };
        for center in [[1.5, 2.4, 0.6], [7.0, 6.0, 5.0], [3.0, 3.0, 2.0]] {
            let plain = patch(&voxels, center, 4, &spec);
            let one = scaled(center, 1.0);
            assert!(plain.iter().zip(&one).all(|(a, b)| (a - b).abs() < 1e-6));
        }
        // Centre (3, 3, 2): the middle is (2.5, 2.5, 1.5); at scale 2 the points lie at
        // middle - 3, - 1, + 1, + 3 along each axis.
        let p = scaled([3.0, 3.0, 2.0], 2.0);
        assert!((hu(p[[2, 2, 2]]) - (250.0 + 35.0 + 3.5 - 1000.0)).abs() < 1e-2);
        assert!((hu(p[[1, 2, 1]]) - (50.0 + 35.0 + 1.5 - 1000.0)).abs() < 1e-2);
        // z = -1.5 lies wholly beyond the volume: air.
        assert!(p.slice(s![0, .., ..]).iter().all(|&v| v == 0.0));
    }
}
