//! The lung field: where a chest CT's lungs are, so that findings outside them (mediastinum,
//! chest wall, abdomen) can be dropped or flagged.
//!
//! The classic route, without a model, on the grid the detector ran on (the whole volume, so
//! tiled and whole-volume runs see the same field):
//! 1. air: voxels below [`AIR_HU`];
//! 2. 3D connected air regions that do not touch the x/y border (that is the air around the
//!    patient and under the table); the large ones are the lungs (at least [`MIN_LUNG_SHARE`] of
//!    the largest: gas in the stomach or bowel is much smaller);
//! 3. airways: in each axial slice, small air regions near the midline (trachea, main bronchi)
//!    are removed;
//! 4. in each axial slice, holes filled (vessels, nodules), then dilated by
//!    [`CLOSING_RADIUS_MM`] and eroded by it less [`MARGIN_MM`]: notches narrower than twice
//!    the radius are filled (a nodule against the pleura is a notch in the air, not a hole)
//!    and a margin is kept.

use std::collections::VecDeque;

use rayon::prelude::*;

use tessera_dicom::volume::Voxels;

use crate::decode::ModelGridBox;

/// Below this, a voxel is air (lung parenchyma is about -850 HU, soft tissue above -100).
pub const AIR_HU: f32 = -400.0;
/// An air region is lung when it holds at least this share of the largest one.
pub const MIN_LUNG_SHARE: f64 = 0.2;
/// In a slice, an air region smaller than this near the midline is an airway (the trachea is
/// about 2 cm across, 3 cm²; a main bronchus about 1.5 cm).
pub const AIRWAY_MAX_AREA_MM2: f64 = 600.0;
/// "Near the midline": within this distance of the lungs' centre, left to right.
pub const AIRWAY_MIDLINE_MM: f64 = 40.0;
/// Fills notches narrower than twice this (nodules and masses against the pleura).
pub const CLOSING_RADIUS_MM: f64 = 12.0;
/// Left around the field, so that a nodule's centre on the pleura stays in.
pub const MARGIN_MM: f64 = 4.0;
/// A finding at least this wide (mean box side) whose centre is not in the field is still in
/// the lungs when lung surrounds enough of it: a mass against the pleura is a notch wider
/// than the closing fills, so its centre lies outside the field.
pub const LARGE_FINDING_MM: f64 = 20.0;
/// The share of the shell around a large finding (1 to 1.5 times its half sides) that must be
/// lung: the lung wraps around a mass that grew into it.
pub const LARGE_FINDING_LUNG_SHARE: f64 = 0.25;

/// A mask on a volume's grid.
#[derive(Debug, Clone, PartialEq)]
pub struct LungField {
    /// `[x, y, z]` voxels.
    pub size: [usize; 3],
    /// One byte per voxel, x fastest then y then z: 1 inside.
    mask: Vec<u8>,
    pub spacing_mm: [f64; 3],
}

impl LungField {
    /// Whether the voxel nearest to `[x, y, z]` (voxel coordinates, centres on integers) is in.
    pub fn contains(&self, at: [f64; 3]) -> bool {
        let nearest = at.map(f64::round);
        // `as usize` saturates, so a point past the grid stays past it; NaN fails `>=`.
        nearest.iter().all(|v| *v >= 0.0) && self.is_lung(nearest.map(|v| v as usize))
    }

    /// Whether voxel `[x, y, z]` is in (`false` outside the grid).
    pub fn is_lung(&self, [x, y, z]: [usize; 3]) -> bool {
        x < self.size[0]
            && y < self.size[1]
            && z < self.size[2]
            && self.mask[self.offset(x, y, z)] == LUNG
    }

    /// Whether a finding with box `bbox` (voxels) is in the lungs: its centre is in the field
    /// or, for a finding of at least [`LARGE_FINDING_MM`], at least
    /// [`LARGE_FINDING_LUNG_SHARE`] of the shell around its box's ellipsoid is.
    pub fn holds(&self, bbox: &ModelGridBox) -> bool {
        let ModelGridBox { center, size } = *bbox;
        if self.contains(center) {
            return true;
        }
        if bbox.mean_side_mm(self.spacing_mm) < LARGE_FINDING_MM {
            return false;
        }
        let (mut lung, mut all) = (0usize, 0usize);
        for d in tessera_dicom::geometry::cube_directions() {
            for k in [1.0, 1.25, 1.5] {
                let at = std::array::from_fn(|a| center[a] + d[a] * k * size[a] / 2.0);
                lung += usize::from(self.contains(at));
                all += 1;
            }
        }
        lung as f64 >= LARGE_FINDING_LUNG_SHARE * all as f64
    }

    /// The field's volume in millilitres.
    pub fn volume_ml(&self) -> f64 {
        let voxel_ml = self.spacing_mm.iter().product::<f64>() / 1000.0;
        self.voxels() as f64 * voxel_ml
    }

    pub fn voxels(&self) -> usize {
        self.mask.iter().filter(|v| **v == 1).count()
    }

    /// Axial slice `z` as one byte per voxel (x fastest), for drawing.
    pub fn axial(&self, z: usize) -> Option<&[u8]> {
        let n = self.size[0] * self.size[1];
        self.mask.get(z * n..(z + 1) * n)
    }

    fn offset(&self, x: usize, y: usize, z: usize) -> usize {
        (z * self.size[1] + y) * self.size[0] + x
    }
}

#[cfg(test)]
impl LungField {
    /// A field that holds every voxel of a grid.
    pub(crate) fn filled(size: [usize; 3], spacing_mm: [f64; 3]) -> Self {
        Self {
            size,
            mask: vec![LUNG; size.iter().product()],
            spacing_mm,
        }
    }

    /// The field less the voxels where `out` holds.
    pub(crate) fn without(mut self, out: impl Fn([usize; 3]) -> bool) -> Self {
        let [nx, ny, _] = self.size;
        for (i, v) in self.mask.iter_mut().enumerate() {
            if out([i % nx, (i / nx) % ny, i / (nx * ny)]) {
                *v = TISSUE;
            }
        }
        self
    }
}

const TISSUE: u8 = 0;
const LUNG: u8 = 1;
const AIR: u8 = 2;
const OUTSIDE: u8 = 3;

/// The lung field of `voxels` (HU) on a grid of `spacing_mm`; empty when there are no lungs.
pub fn segment(voxels: &Voxels, spacing_mm: [f64; 3]) -> LungField {
    let size = voxels.size();
    let grid = Padded::new(size);
    // A one-voxel ring around each slice (air: the patient's outside) and an empty slice at
    // each end, so that neighbours never need a bounds check beyond the array's.
    let mut mask = vec![TISSUE; grid.len()];
    let mut fill = |z: usize, y: usize, x: usize, hu: f32| {
        mask[grid.at(x + 1, y + 1, z + 1)] = if hu < AIR_HU { AIR } else { TISSUE };
    };
    match voxels {
        Voxels::I16(a) => a
            .indexed_iter()
            .for_each(|((z, y, x), v)| fill(z, y, x, f32::from(*v))),
        Voxels::F32(a) => a
            .indexed_iter()
            .for_each(|((z, y, x), v)| fill(z, y, x, *v)),
    }
    for z in 1..=size[2] {
        for y in 0..grid.h {
            for x in 0..grid.w {
                if x == 0 || y == 0 || x + 1 == grid.w || y + 1 == grid.h {
                    mask[grid.at(x, y, z)] = AIR;
                }
            }
        }
    }
    // The air around the patient, through the rings: not lung.
    let volume_steps = grid.steps3();
    fill_region(
        &mut mask,
        &volume_steps,
        vec![grid.at(0, 0, 1)],
        [AIR, OUTSIDE],
        None,
    );
    keep_large_regions(&mut mask, &volume_steps);
    let midline_x = lung_centre_x(&mask, &grid);
    let slice_steps = grid.steps2();
    mask.par_chunks_mut(grid.w * grid.h)
        .skip(1)
        .take(size[2])
        .for_each(|slice| finish_slice(slice, &grid, &slice_steps, spacing_mm, midline_x));
    // Back to the volume's own grid.
    let mut field = Vec::with_capacity(size.iter().product());
    for z in 1..=size[2] {
        for y in 1..=size[1] {
            let row = grid.at(1, y, z);
            field.extend_from_slice(&mask[row..row + size[0]]);
        }
    }
    LungField {
        size,
        mask: field,
        spacing_mm,
    }
}

/// The padded layout: `w x h` slices (the volume's plus a ring), `d` of them.
struct Padded {
    w: usize,
    h: usize,
    d: usize,
}

impl Padded {
    fn new([nx, ny, nz]: [usize; 3]) -> Self {
        Self {
            w: nx + 2,
            h: ny + 2,
            d: nz + 2,
        }
    }

    fn len(&self) -> usize {
        self.w * self.h * self.d
    }

    fn at(&self, x: usize, y: usize, z: usize) -> usize {
        (z * self.h + y) * self.w + x
    }

    fn steps3(&self) -> [isize; 6] {
        let (w, s) = (self.w as isize, (self.w * self.h) as isize);
        [1, -1, w, -w, s, -s]
    }

    fn steps2(&self) -> [isize; 6] {
        let w = self.w as isize;
        [1, -1, w, -w, 0, 0]
    }
}

/// Sets the region of `from` voxels connected to `seeds` to `to`; returns its voxels. A step
/// off the array is skipped (a step across a ring lands on the ring: the same region).
fn flood(mask: &mut [u8], steps: &[isize; 6], seeds: Vec<usize>, from: u8, to: u8) -> Vec<u32> {
    let mut region = Vec::new();
    fill_region(mask, steps, seeds, [from, to], Some(&mut region));
    region
}

/// [`flood`], keeping the region's voxels only when asked (the air around a patient is most of
/// a volume: 4 bytes a voxel that nothing reads); returns its size.
fn fill_region(
    mask: &mut [u8],
    steps: &[isize; 6],
    seeds: Vec<usize>,
    [from, to]: [u8; 2],
    mut region: Option<&mut Vec<u32>>,
) -> usize {
    let mut voxels = 0;
    // Breadth first: the queue holds a front, where a depth-first stack grows with the region
    // (tens of MiB for the air around a patient).
    let mut queue = VecDeque::new();
    // Marked when pushed, so that each voxel is pushed once.
    for seed in seeds {
        if mask[seed] == from {
            mask[seed] = to;
            queue.push_back(seed);
        }
    }
    let steps: Vec<isize> = steps.iter().copied().filter(|s| *s != 0).collect();
    while let Some(i) = queue.pop_front() {
        voxels += 1;
        if let Some(region) = region.as_mut() {
            region.push(i as u32);
        }
        for step in &steps {
            if let Some(n) = i.checked_add_signed(*step)
                && let Some(v) = mask.get_mut(n)
                && *v == from
            {
                *v = to;
                queue.push_back(n);
            }
        }
    }
    voxels
}

/// Air regions inside the patient: the large ones become lung, the rest tissue. Each region is
/// kept as its seed and size, not its voxels: a small one is flooded again from its seed.
fn keep_large_regions(mask: &mut [u8], steps: &[isize; 6]) {
    let mut regions = Vec::new();
    for i in 0..mask.len() {
        if mask[i] == AIR {
            regions.push((i, fill_region(mask, steps, vec![i], [AIR, LUNG], None)));
        }
    }
    let largest = regions.iter().map(|r| r.1).max().unwrap_or(0);
    for (seed, voxels) in regions {
        if (voxels as f64) < MIN_LUNG_SHARE * largest as f64 {
            // Air regions never touch (they would be one), so this is the same region.
            fill_region(mask, steps, vec![seed], [LUNG, TISSUE], None);
        }
    }
    mask.iter_mut()
        .filter(|v| **v == OUTSIDE)
        .for_each(|v| *v = TISSUE);
}

/// The lungs' mean x (padded voxels): the midline the airways run along.
fn lung_centre_x(mask: &[u8], grid: &Padded) -> f64 {
    let (mut sum, mut count) = (0.0, 0usize);
    for (i, v) in mask.iter().enumerate() {
        if *v == LUNG {
            sum += (i % grid.w) as f64;
            count += 1;
        }
    }
    if count == 0 {
        grid.w as f64 / 2.0
    } else {
        sum / count as f64
    }
}

/// Airways out, holes in, closing and margin, in one axial slice (with its ring).
fn finish_slice(
    slice: &mut [u8],
    grid: &Padded,
    steps: &[isize; 6],
    spacing_mm: [f64; 3],
    midline_x: f64,
) {
    let pixel_mm2 = spacing_mm[0] * spacing_mm[1];
    // Airways: small regions near the midline.
    for i in 0..slice.len() {
        if slice[i] == LUNG {
            let region = flood(slice, steps, vec![i], LUNG, AIR);
            let centre_x = region
                .iter()
                .map(|j| (*j as usize % grid.w) as f64)
                .sum::<f64>()
                / region.len() as f64;
            let airway = (region.len() as f64) * pixel_mm2 < AIRWAY_MAX_AREA_MM2
                && ((centre_x - midline_x) * spacing_mm[0]).abs() < AIRWAY_MIDLINE_MM;
            if airway {
                region.iter().for_each(|j| slice[*j as usize] = TISSUE);
            }
        }
    }
    // Holes: tissue not connected to the ring is inside the lung.
    fill_region(slice, steps, vec![0], [TISSUE, OUTSIDE], None);
    let mut bounds: Option<[usize; 4]> = None; // x0, y0, x1, y1 of the lung
    for (i, v) in slice.iter_mut().enumerate() {
        *v = if *v == OUTSIDE { TISSUE } else { LUNG };
        if *v == LUNG {
            let (x, y) = (i % grid.w, i / grid.w);
            let b = bounds.get_or_insert([x, y, x, y]);
            *b = [b[0].min(x), b[1].min(y), b[2].max(x), b[3].max(y)];
        }
    }
    let Some([x0, y0, x1, y1]) = bounds else {
        return;
    };
    // Dilated by the closing radius, then eroded by it less the margin, within the lung's
    // box grown by that radius.
    let reach = |spacing: f64| (CLOSING_RADIUS_MM / spacing).ceil() as usize + 1;
    let (rx, ry) = (reach(spacing_mm[0]), reach(spacing_mm[1]));
    let (bx0, by0) = (x0.saturating_sub(rx), y0.saturating_sub(ry));
    let (bx1, by1) = ((x1 + rx).min(grid.w - 1), (y1 + ry).min(grid.h - 1));
    let (bw, bh) = (bx1 - bx0 + 1, by1 - by0 + 1);
    let mut region: Vec<u8> = (by0..=by1)
        .flat_map(|y| slice[y * grid.w + bx0..=y * grid.w + bx1].iter().copied())
        .collect();
    let [sx, sy] = [spacing_mm[0], spacing_mm[1]];
    let to_lung = squared_distance_mm2(&region, bw, bh, sx, sy, LUNG);
    region
        .iter_mut()
        .zip(&to_lung)
        .for_each(|(v, d)| *v = u8::from(*d <= CLOSING_RADIUS_MM.powi(2)));
    let to_outside = squared_distance_mm2(&region, bw, bh, sx, sy, 0);
    let erode = (CLOSING_RADIUS_MM - MARGIN_MM).powi(2);
    for y in by0..=by1 {
        for x in bx0..=bx1 {
            let d = to_outside[(y - by0) * bw + (x - bx0)];
            slice[y * grid.w + x] = if d > erode { LUNG } else { TISSUE };
        }
    }
}

/// Squared distance in mm² from each pixel to the nearest pixel equal to `site` (infinite
/// when there is none): Felzenszwalb and Huttenlocher's exact transform, rows then columns.
fn squared_distance_mm2(
    pixels: &[u8],
    nx: usize,
    ny: usize,
    sx: f64,
    sy: f64,
    site: u8,
) -> Vec<f64> {
    let mut d: Vec<f64> = pixels
        .iter()
        .map(|p| if *p == site { 0.0 } else { f64::INFINITY })
        .collect();
    let mut line = Vec::new();
    for y in 0..ny {
        line.clear();
        line.extend_from_slice(&d[y * nx..(y + 1) * nx]);
        let out = distance_1d(&line, sx * sx);
        d[y * nx..(y + 1) * nx].copy_from_slice(&out);
    }
    for x in 0..nx {
        line.clear();
        line.extend((0..ny).map(|y| d[y * nx + x]));
        let out = distance_1d(&line, sy * sy);
        for (y, v) in out.into_iter().enumerate() {
            d[y * nx + x] = v;
        }
    }
    d
}

/// The lower envelope of parabolas `f[q] + w (p - q)²`, for each `p`.
fn distance_1d(f: &[f64], w: f64) -> Vec<f64> {
    let n = f.len();
    let mut out = vec![f64::INFINITY; n];
    let mut hull: Vec<usize> = Vec::with_capacity(n);
    let mut starts: Vec<f64> = Vec::with_capacity(n + 1);
    for q in (0..n).filter(|q| f[*q].is_finite()) {
        loop {
            let Some(&last) = hull.last() else {
                hull.push(q);
                starts.push(f64::NEG_INFINITY);
                break;
            };
            let s = ((f[q] + w * (q * q) as f64) - (f[last] + w * (last * last) as f64))
                / (2.0 * w * (q as f64 - last as f64));
            if starts.last().is_some_and(|start| s <= *start) {
                hull.pop();
                starts.pop();
                continue;
            }
            hull.push(q);
            starts.push(s);
            break;
        }
    }
    let mut k = 0;
    for (p, o) in out.iter_mut().enumerate() {
        if hull.is_empty() {
            break;
        }
        while k + 1 < hull.len() && starts[k + 1] < p as f64 {
            k += 1;
        }
        let q = hull[k];
        *o = f[q] + w * (p as f64 - q as f64).powi(2);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_finding_surrounded_by_lung_is_held_a_small_one_is_not() {
        // 2 mm voxels, all lung but a ball of tissue (radius 6 voxels, 24 mm wide) in the middle.
        let n = 30;
        let mask = (0..n * n * n)
            .map(|i| {
                let (x, y, z) = (i % n, (i / n) % n, i / (n * n));
                let d2 = [x, y, z]
                    .iter()
                    .map(|v| (*v as f64 - 15.0).powi(2))
                    .sum::<f64>();
                if d2 <= 36.0 { TISSUE } else { LUNG }
            })
            .collect();
        let mut field = LungField {
            size: [n; 3],
            mask,
            spacing_mm: [2.0; 3],
        };
        let centre = [15.0; 3];
        let ball = |side: f64| ModelGridBox {
            center: centre,
            size: [side; 3],
        };
        assert!(!field.contains(centre));
        assert!(field.holds(&ball(12.0)), "a 24 mm mass wrapped in lung");
        assert!(!field.holds(&ball(8.0)), "16 mm: the centre alone decides");
        field.mask.iter_mut().for_each(|v| *v = TISSUE);
        assert!(!field.holds(&ball(12.0)), "no lung around it");
    }

    #[test]
    fn distances_are_exact_on_a_line() {
        let f = [
            f64::INFINITY,
            0.0,
            f64::INFINITY,
            f64::INFINITY,
            0.0,
            f64::INFINITY,
        ];
        assert_eq!(distance_1d(&f, 1.0), vec![1.0, 0.0, 1.0, 1.0, 0.0, 1.0]);
        assert_eq!(
            distance_1d(&[f64::INFINITY; 3], 1.0),
            vec![f64::INFINITY; 3]
        );
    }

    #[test]
    fn distances_in_a_plane_use_the_spacing() {
        let mut pixels = vec![0u8; 5 * 4];
        pixels[2 * 5 + 1] = 1; // (1, 2)
        let d = squared_distance_mm2(&pixels, 5, 4, 2.0, 0.5, 1);
        // (4, 0): 3 columns of 2 mm, 2 rows of 0.5 mm.
        assert_eq!(d[4], 36.0 + 1.0);
        assert_eq!(d[2 * 5 + 1], 0.0);
    }
}
