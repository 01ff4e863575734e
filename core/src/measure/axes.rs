//! A finding's axial long axis and the longest chord perpendicular to it, as a radiologist
//! measures them: on the axial slice where the long axis is longest.
//!
//! Lengths run from pixel edge to pixel edge: the distance between the two pixel centres
//! farthest apart, plus one pixel (a segmentation whose edge is at half the contrast puts
//! each edge half a pixel beyond the outermost centre).

use std::collections::{BTreeMap, HashSet};

use serde::{Deserialize, Serialize};

/// The axes on one axial slice, their lengths to 0.1 mm (as Lung-RADS asks). End points are
/// `[x, y]` in study voxels (centres on integers), on slice `slice`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct AxialAxes {
    /// The study voxel z of the slice.
    pub slice: usize,
    pub long_axis_mm: f64,
    pub short_axis_mm: f64,
    pub long_axis_ends: [[f64; 2]; 2],
    pub short_axis_ends: [[f64; 2]; 2],
}

impl AxialAxes {
    /// The mean of the long and short axes, rounded to 0.1 mm (Lung-RADS' nodule size).
    pub fn mean_diameter_mm(&self) -> f64 {
        round_tenth((self.long_axis_mm + self.short_axis_mm) / 2.0)
    }

    /// The axes through end points given by a reader, `[x, y]` study voxels on `slice`.
    pub fn from_ends(
        slice: usize,
        long_axis_ends: [[f64; 2]; 2],
        short_axis_ends: [[f64; 2]; 2],
        pixel_mm: [f64; 2],
    ) -> Self {
        let length = |[p, q]: [[f64; 2]; 2]| {
            ((p[0] - q[0]) * pixel_mm[0]).hypot((p[1] - q[1]) * pixel_mm[1])
        };
        Self {
            slice,
            long_axis_mm: round_tenth(length(long_axis_ends)),
            short_axis_mm: round_tenth(length(short_axis_ends)),
            long_axis_ends,
            short_axis_ends,
        }
    }
}

/// `value` rounded to one decimal place.
pub fn round_tenth(value: f64) -> f64 {
    (value * 10.0).round() / 10.0
}

/// The axes of the region `voxels` (`[x, y, z]` study voxels) on the axial slice where its
/// long axis is longest (ties: the longer short axis, then the lower slice), with pixels of
/// `pixel_mm` (`[x, y]`); `None` for an empty region.
pub fn axial_axes(voxels: &[[usize; 3]], pixel_mm: [f64; 2]) -> Option<AxialAxes> {
    let mut slices: BTreeMap<usize, Vec<[usize; 2]>> = BTreeMap::new();
    for [x, y, z] in voxels {
        slices.entry(*z).or_default().push([*x, *y]);
    }
    slices
        .into_iter()
        .map(|(z, pixels)| slice_axes(z, &pixels, pixel_mm))
        .reduce(|best, next| {
            let key = |a: &AxialAxes| (a.long_axis_mm, a.short_axis_mm);
            if key(&next) > key(&best) { next } else { best }
        })
}

/// The axes of one slice's pixels.
fn slice_axes(slice: usize, pixels: &[[usize; 2]], pixel_mm: [f64; 2]) -> AxialAxes {
    let set: HashSet<[usize; 2]> = pixels.iter().copied().collect();
    let inside = |x: Option<usize>, y: Option<usize>| match (x, y) {
        (Some(x), Some(y)) => set.contains(&[x, y]),
        _ => false,
    };
    let edge: Vec<[f64; 2]> = pixels
        .iter()
        .filter(|[x, y]| {
            let (x, y) = (*x, *y);
            !(inside(x.checked_sub(1), Some(y))
                && inside(x.checked_add(1), Some(y))
                && inside(Some(x), y.checked_sub(1))
                && inside(Some(x), y.checked_add(1)))
        })
        .map(|p| mm(*p, pixel_mm))
        .collect();
    let (mut far, mut ends) = (-1.0, (edge[0], edge[0]));
    for (i, p) in edge.iter().enumerate() {
        for q in &edge[i + 1..] {
            let d = (p[0] - q[0]).hypot(p[1] - q[1]);
            if d > far {
                (far, ends) = (d, (*p, *q));
            }
        }
    }
    let (p, q) = ends;
    let u = unit([q[0] - p[0], q[1] - p[1]]);
    let v = [-u[1], u[0]];
    // A pixel's width along a direction (its side along either axis).
    let width = |d: [f64; 2]| (d[0] * pixel_mm[0]).hypot(d[1] * pixel_mm[1]);
    let (along_u, along_v) = (width(u), width(v));
    let long_axis_mm = far.max(0.0) + along_u;
    let long_mm = [
        [p[0] - u[0] * along_u / 2.0, p[1] - u[1] * along_u / 2.0],
        [q[0] + u[0] * along_u / 2.0, q[1] + u[1] * along_u / 2.0],
    ];
    // Chords across the long axis: pixels grouped by where they fall along it, one pixel's
    // width apart; the longest chord's span.
    let mut chords: BTreeMap<i64, (f64, f64)> = BTreeMap::new();
    for pixel in pixels {
        let c = mm(*pixel, pixel_mm);
        let (s, t) = (dot(c, u), dot(c, v));
        let bin = (s / along_u).round() as i64;
        let span = chords.entry(bin).or_insert((t, t));
        *span = (span.0.min(t), span.1.max(t));
    }
    let (bin, (t0, t1)) = chords
        .into_iter()
        .max_by(|a, b| (a.1.1 - a.1.0).total_cmp(&(b.1.1 - b.1.0)))
        .unwrap_or((0, (0.0, 0.0)));
    let s = bin as f64 * along_u;
    let at = |t: f64| [s * u[0] + t * v[0], s * u[1] + t * v[1]];
    let short_mm = [at(t0 - along_v / 2.0), at(t1 + along_v / 2.0)];
    let voxel = |p: [f64; 2]| [p[0] / pixel_mm[0], p[1] / pixel_mm[1]];
    AxialAxes {
        slice,
        long_axis_mm: round_tenth(long_axis_mm),
        short_axis_mm: round_tenth((t1 - t0) + along_v),
        long_axis_ends: long_mm.map(voxel),
        short_axis_ends: short_mm.map(voxel),
    }
}

fn mm([x, y]: [usize; 2], pixel_mm: [f64; 2]) -> [f64; 2] {
    [x as f64 * pixel_mm[0], y as f64 * pixel_mm[1]]
}

fn dot(a: [f64; 2], b: [f64; 2]) -> f64 {
    a[0] * b[0] + a[1] * b[1]
}

fn unit(d: [f64; 2]) -> [f64; 2] {
    let n = d[0].hypot(d[1]);
    if n > 0.0 {
        [d[0] / n, d[1] / n]
    } else {
        [1.0, 0.0]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pixels of an ellipse with half axes `a`, `b` (mm) turned by `angle` (radians),
    /// centred at (40, 40) mm, on pixels of `pixel_mm`, on slice `z`.
    fn ellipse(a: f64, b: f64, angle: f64, pixel_mm: [f64; 2], z: usize) -> Vec<[usize; 3]> {
        let n = (80.0 / pixel_mm[0]) as usize;
        let m = (80.0 / pixel_mm[1]) as usize;
        let (cos, sin) = (angle.cos(), angle.sin());
        let mut out = Vec::new();
        for y in 0..m {
            for x in 0..n {
                let (dx, dy) = (x as f64 * pixel_mm[0] - 40.0, y as f64 * pixel_mm[1] - 40.0);
                let (u, v) = (dx * cos + dy * sin, -dx * sin + dy * cos);
                if (u / a).powi(2) + (v / b).powi(2) <= 1.0 {
                    out.push([x, y, z]);
                }
            }
        }
        out
    }

    #[test]
    fn an_ellipse_has_its_own_axes_within_a_pixel() {
        for (a, b, angle, pixel_mm) in [
            (10.0, 10.0, 0.0, [1.0, 1.0]),
            (10.0, 5.0, 0.0, [0.7, 0.7]),
            (10.0, 5.0, 0.5, [0.7, 0.7]),
            (6.0, 2.5, 1.2, [0.6, 0.9]),
            (3.0, 3.0, 0.0, [0.7, 0.7]),
        ] {
            let Some(axes) = axial_axes(&ellipse(a, b, angle, pixel_mm, 4), pixel_mm) else {
                panic!("an ellipse of {a} x {b} mm has axes");
            };
            let pixel = pixel_mm[0].max(pixel_mm[1]);
            assert!(
                (axes.long_axis_mm - 2.0 * a).abs() <= pixel,
                "{a} {b} {angle}: {axes:?}"
            );
            assert!(
                (axes.short_axis_mm - 2.0 * b).abs() <= pixel,
                "{a} {b} {angle}: {axes:?}"
            );
            assert_eq!(axes.slice, 4);
            // The end points are as far apart as the lengths say, and the axes cross at a
            // right angle.
            let d =
                |[p, q]: [[f64; 2]; 2]| [(q[0] - p[0]) * pixel_mm[0], (q[1] - p[1]) * pixel_mm[1]];
            let (l, s) = (d(axes.long_axis_ends), d(axes.short_axis_ends));
            assert!((l[0].hypot(l[1]) - axes.long_axis_mm).abs() <= 0.05);
            assert!((s[0].hypot(s[1]) - axes.short_axis_mm).abs() <= 0.05);
            assert!(dot(l, s).abs() < 1e-6 * axes.long_axis_mm * axes.short_axis_mm);
        }
    }

    #[test]
    fn the_slice_with_the_longest_axis_is_measured() {
        let mut voxels = ellipse(4.0, 4.0, 0.0, [1.0, 1.0], 2);
        voxels.extend(ellipse(9.0, 3.0, 0.3, [1.0, 1.0], 3));
        voxels.extend(ellipse(6.0, 6.0, 0.0, [1.0, 1.0], 4));
        let Some(axes) = axial_axes(&voxels, [1.0, 1.0]) else {
            panic!("three slices have axes");
        };
        assert_eq!(axes.slice, 3);
        assert_eq!(axial_axes(&[], [1.0, 1.0]), None);
        // One pixel is one pixel across.
        let Some(one) = axial_axes(&[[5, 5, 0]], [0.7, 0.8]) else {
            panic!("one pixel has axes");
        };
        assert_eq!((one.long_axis_mm, one.short_axis_mm), (0.7, 0.8));
    }

    #[test]
    fn the_mean_diameter_is_rounded_to_a_tenth() {
        let axes = AxialAxes::from_ends(
            0,
            [[0.0, 0.0], [10.0, 0.0]],
            [[5.0, -3.0], [5.0, 3.2]],
            [1.0, 1.0],
        );
        assert_eq!(axes.long_axis_mm, 10.0);
        assert_eq!(axes.mean_diameter_mm(), 8.1); // (10 + 6.2) / 2
    }
}
