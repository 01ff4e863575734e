//! Boolean masks on a box of a volume's voxels: thresholds, an opening by a ball, the
//! component connected to a seed. What the image measurements of a finding are made of
//! ([`crate::extent`] on the model's grid, `tessera_core::measure` on the study's).

/// The voxel offsets of a ball of `radius_mm` on a grid of `spacing_mm`.
pub fn ball_offsets(radius_mm: f64, spacing_mm: [f64; 3]) -> Vec<[i64; 3]> {
    let reach: [i64; 3] = std::array::from_fn(|a| (radius_mm / spacing_mm[a]).floor() as i64);
    let mut offsets = Vec::new();
    for dz in -reach[2]..=reach[2] {
        for dy in -reach[1]..=reach[1] {
            for dx in -reach[0]..=reach[0] {
                let d = [dx, dy, dz];
                let r2: f64 = (0..3).map(|a| (d[a] as f64 * spacing_mm[a]).powi(2)).sum();
                if r2 <= radius_mm * radius_mm {
                    offsets.push(d);
                }
            }
        }
    }
    offsets
}

/// The six face neighbours.
const STEPS: [[i64; 3]; 6] = [
    [1, 0, 0],
    [-1, 0, 0],
    [0, 1, 0],
    [0, -1, 0],
    [0, 0, 1],
    [0, 0, -1],
];

/// A box of voxels of a volume, `[lo, lo + size)` per axis, and masks on it (x fastest).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cube {
    pub lo: [usize; 3],
    pub size: [usize; 3],
}

impl Cube {
    /// The cube reaching `half_voxels` each side of `center` (voxels, centres on integers),
    /// clipped to a volume of `volume_size`.
    pub fn around(center: [f64; 3], half_voxels: [f64; 3], volume_size: [usize; 3]) -> Self {
        let mut lo = [0; 3];
        let mut size = [0; 3];
        for a in 0..3 {
            let first = (center[a] - half_voxels[a]).round().max(0.0) as usize;
            let last = ((center[a] + half_voxels[a]).round().max(0.0) as usize)
                .min(volume_size[a].saturating_sub(1));
            lo[a] = first.min(last);
            size[a] = last + 1 - lo[a];
        }
        Self { lo, size }
    }

    pub fn len(&self) -> usize {
        self.size.iter().product()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn index(&self, [x, y, z]: [usize; 3]) -> usize {
        (z * self.size[1] + y) * self.size[0] + x
    }

    /// The volume voxel of cube coordinates `local`.
    pub fn voxel(&self, local: [usize; 3]) -> [usize; 3] {
        std::array::from_fn(|a| self.lo[a] + local[a])
    }

    /// Cube coordinates of `local` moved by `d`, if still inside.
    fn step(&self, local: [usize; 3], d: [i64; 3]) -> Option<[usize; 3]> {
        let mut out = [0; 3];
        for a in 0..3 {
            let v = local[a] as i64 + d[a];
            if v < 0 || v >= self.size[a] as i64 {
                return None;
            }
            out[a] = v as usize;
        }
        Some(out)
    }

    /// Every cube coordinate, x fastest (the masks' order).
    pub fn locals(&self) -> impl Iterator<Item = [usize; 3]> + '_ {
        let [nx, ny, nz] = self.size;
        (0..nz).flat_map(move |z| (0..ny).flat_map(move |y| (0..nx).map(move |x| [x, y, z])))
    }

    /// A mask of `inside(volume voxel)` over the cube.
    pub fn map(&self, inside: impl Fn([usize; 3]) -> bool) -> Vec<bool> {
        self.locals().map(|l| inside(self.voxel(l))).collect()
    }

    /// Set where every voxel of the ball around is set (outside the cube is unset).
    pub fn erode(&self, mask: &[bool], ball: &[[i64; 3]]) -> Vec<bool> {
        self.locals()
            .map(|l| {
                mask[self.index(l)]
                    && ball
                        .iter()
                        .all(|d| self.step(l, *d).is_some_and(|n| mask[self.index(n)]))
            })
            .collect()
    }

    /// Set where any voxel of the ball around is set.
    pub fn dilate(&self, mask: &[bool], ball: &[[i64; 3]]) -> Vec<bool> {
        let mut out = vec![false; self.len()];
        for l in self.locals().filter(|l| mask[self.index(*l)]) {
            for n in ball.iter().filter_map(|d| self.step(l, *d)) {
                out[self.index(n)] = true;
            }
        }
        out
    }

    /// The mask opened by `ball`: what thinner than the ball's diameter comes off.
    pub fn open(&self, mask: &[bool], ball: &[[i64; 3]]) -> Vec<bool> {
        self.dilate(&self.erode(mask, ball), ball)
    }

    /// The set voxel nearest to `center` (volume voxels) within `reach_mm`, in cube
    /// coordinates; ties go to the first in x-fastest order.
    pub fn nearest_set(
        &self,
        mask: &[bool],
        center: [f64; 3],
        spacing_mm: [f64; 3],
        reach_mm: f64,
    ) -> Option<[usize; 3]> {
        let distance2 = |l: &[usize; 3]| -> f64 {
            (0..3)
                .map(|a| (((self.lo[a] + l[a]) as f64 - center[a]) * spacing_mm[a]).powi(2))
                .sum()
        };
        self.locals()
            .filter(|l| mask[self.index(*l)])
            .map(|l| (distance2(&l), l))
            .filter(|(d2, _)| *d2 <= reach_mm * reach_mm)
            .min_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, l)| l)
    }

    /// The 6-connected component of `seed` in `mask`, or `None` when it touches one of the
    /// cube's faces (it runs on past the cube).
    pub fn component(&self, mask: &[bool], seed: [usize; 3]) -> Option<Vec<bool>> {
        let mut seen = vec![false; self.len()];
        seen[self.index(seed)] = true;
        let mut stack = vec![seed];
        while let Some(l) = stack.pop() {
            if (0..3).any(|a| l[a] == 0 || l[a] + 1 == self.size[a]) {
                return None;
            }
            for n in STEPS.iter().filter_map(|d| self.step(l, *d)) {
                let i = self.index(n);
                if mask[i] && !seen[i] {
                    seen[i] = true;
                    stack.push(n);
                }
            }
        }
        Some(seen)
    }

    /// `mask` with the voxels of `rim` next to it (6-neighbours) added.
    pub fn with_rim(&self, mask: &[bool], rim: &[bool]) -> Vec<bool> {
        let mut out = mask.to_vec();
        for l in self.locals().filter(|l| mask[self.index(*l)]) {
            for n in STEPS.iter().filter_map(|d| self.step(l, *d)) {
                let i = self.index(n);
                out[i] |= rim[i];
            }
        }
        out
    }

    /// The volume-voxel bounds (inclusive) of the set voxels, or `None` when none is set.
    pub fn bounds(&self, mask: &[bool]) -> Option<([usize; 3], [usize; 3])> {
        let mut set = self.locals().filter(|l| mask[self.index(*l)]);
        let first = set.next()?;
        let (lo, hi) = set.fold((first, first), |(mut lo, mut hi), l| {
            for a in 0..3 {
                lo[a] = lo[a].min(l[a]);
                hi[a] = hi[a].max(l[a]);
            }
            (lo, hi)
        });
        Some((self.voxel(lo), self.voxel(hi)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_component_stops_at_gaps_and_is_refused_at_the_faces() {
        let cube = Cube {
            lo: [10, 0, 0],
            size: [7, 5, 5],
        };
        // A bar along x from local 1 to 3, a gap at 4, another voxel at 5.
        let mask = cube.map(|[x, y, z]| y == 2 && z == 2 && x != 14 && (11..=15).contains(&x));
        let Some(component) = cube.component(&mask, [1, 2, 2]) else {
            panic!("the bar does not reach a face");
        };
        assert_eq!(cube.bounds(&component), Some(([11, 2, 2], [13, 2, 2])));
        assert_eq!(component.iter().filter(|v| **v).count(), 3);
        let reaching = cube.map(|[x, y, z]| y == 2 && z == 2 && x <= 13);
        assert_eq!(cube.component(&reaching, [1, 2, 2]), None);
    }

    #[test]
    fn an_opening_takes_strands_thinner_than_the_ball() {
        let cube = Cube {
            lo: [0; 3],
            size: [21; 3],
        };
        let ball = ball_offsets(2.0, [1.0; 3]);
        let sphere =
            |p: [usize; 3]| (0..3).map(|a| (p[a] as f64 - 10.0).powi(2)).sum::<f64>() <= 25.0;
        let strand = |p: [usize; 3]| p[1] == 10 && p[2] == 10;
        let opened = cube.open(&cube.map(|p| sphere(p) || strand(p)), &ball);
        // The strand is gone; the sphere stays, less at most a voxel of its digital surface.
        let inner =
            |p: [usize; 3]| (0..3).map(|a| (p[a] as f64 - 10.0).powi(2)).sum::<f64>() <= 16.0;
        for l in cube.locals() {
            let set = opened[cube.index(l)];
            assert!(!set || sphere(l), "{l:?} is outside the sphere");
            assert!(set || !inner(l), "{l:?} is inside the sphere");
        }
    }
}
