//! Affine transforms between voxel and world (DICOM patient, LPS, millimetres) frames.
//!
//! Plain `f64` arithmetic on 3x3 matrices: the project needs composition, application and
//! inversion, nothing a linear-algebra crate would add. Named `target_from_source`, so that
//! `world_from_voxel * voxel_from_model` reads right.

use serde::{Deserialize, Serialize};

/// A 3-vector of `f64`, in the axis order x, y, z.
pub type Vec3 = [f64; 3];

/// `target = linear * source + translation`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Affine3 {
    /// Row-major 3x3 matrix: `linear[row][col]`; column `c` is the image of source axis `c`.
    pub linear: [[f64; 3]; 3],
    pub translation: Vec3,
}

impl Affine3 {
    pub const IDENTITY: Self = Self {
        linear: [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
        translation: [0.0; 3],
    };

    /// Builds an affine from the images of the three source axes and the origin.
    pub fn from_columns(columns: [Vec3; 3], translation: Vec3) -> Self {
        let mut linear = [[0.0; 3]; 3];
        for (c, column) in columns.iter().enumerate() {
            for (r, value) in column.iter().enumerate() {
                linear[r][c] = *value;
            }
        }
        Self {
            linear,
            translation,
        }
    }

    /// The image of source axis `axis` (0 = x, 1 = y, 2 = z).
    pub fn column(&self, axis: usize) -> Vec3 {
        [
            self.linear[0][axis],
            self.linear[1][axis],
            self.linear[2][axis],
        ]
    }

    pub fn apply(&self, p: Vec3) -> Vec3 {
        let mut out = self.translation;
        for (r, row) in self.linear.iter().enumerate() {
            out[r] += dot(*row, p);
        }
        out
    }

    /// Applies only the linear part (for directions and sizes).
    pub fn apply_vector(&self, v: Vec3) -> Vec3 {
        let mut out = [0.0; 3];
        for (r, row) in self.linear.iter().enumerate() {
            out[r] = dot(*row, v);
        }
        out
    }

    pub fn determinant(&self) -> f64 {
        let m = &self.linear;
        m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
            - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
            + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
    }

    /// The inverse transform, or `None` when the matrix is singular.
    pub fn inverse(&self) -> Option<Self> {
        let det = self.determinant();
        if det.abs() < 1e-12 {
            return None;
        }
        let m = &self.linear;
        let mut inv = [[0.0; 3]; 3];
        for (r, inv_row) in inv.iter_mut().enumerate() {
            for (c, value) in inv_row.iter_mut().enumerate() {
                // Cofactor of (c, r), transposed: the adjugate.
                let (r1, r2) = ((c + 1) % 3, (c + 2) % 3);
                let (c1, c2) = ((r + 1) % 3, (r + 2) % 3);
                *value = (m[r1][c1] * m[r2][c2] - m[r1][c2] * m[r2][c1]) / det;
            }
        }
        let linear_only = Self {
            linear: inv,
            translation: [0.0; 3],
        };
        let t = linear_only.apply_vector(self.translation);
        Some(Self {
            linear: inv,
            translation: [-t[0], -t[1], -t[2]],
        })
    }
}

impl std::ops::Mul for Affine3 {
    type Output = Self;

    /// `a_from_b * b_from_c = a_from_c`.
    fn mul(self, rhs: Self) -> Self {
        let mut linear = [[0.0; 3]; 3];
        for (r, row) in linear.iter_mut().enumerate() {
            for (c, value) in row.iter_mut().enumerate() {
                *value = (0..3).map(|k| self.linear[r][k] * rhs.linear[k][c]).sum();
            }
        }
        Self {
            linear,
            translation: self.apply(rhs.translation),
        }
    }
}

pub fn dot(a: Vec3, b: Vec3) -> f64 {
    a[0] * b[0] + a[1] * b[1] + a[2] * b[2]
}

pub fn cross(a: Vec3, b: Vec3) -> Vec3 {
    [
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    ]
}

pub fn sub(a: Vec3, b: Vec3) -> Vec3 {
    [a[0] - b[0], a[1] - b[1], a[2] - b[2]]
}

pub fn scale(a: Vec3, s: f64) -> Vec3 {
    [a[0] * s, a[1] * s, a[2] * s]
}

pub fn norm(a: Vec3) -> f64 {
    dot(a, a).sqrt()
}

/// The 26 unit directions to a cube's faces, edges and corners (x slowest, z fastest), for
/// sampling around a point.
pub fn cube_directions() -> Vec<Vec3> {
    let mut dirs = Vec::with_capacity(26);
    for x in [-1.0, 0.0, 1.0] {
        for y in [-1.0, 0.0, 1.0] {
            for z in [-1.0, 0.0, 1.0] {
                let v = [x, y, z];
                if v != [0.0; 3] {
                    dirs.push(scale(v, 1.0 / norm(v)));
                }
            }
        }
    }
    dirs
}

#[cfg(test)]
mod tests {
    use super::*;

    const EPS: f64 = 1e-9; // exact arithmetic up to rounding of a few products

    #[test]
    fn inverse_composes_to_identity() {
        let world_from_voxel = Affine3::from_columns(
            [[0.7, 0.0, 0.0], [0.0, 0.7, 0.1], [0.0, -0.2, 2.5]],
            [-180.0, -170.0, -300.0],
        );
        let voxel_from_world = world_from_voxel.inverse().unwrap(); // ok: test code
        let id = voxel_from_world * world_from_voxel;
        for r in 0..3 {
            for c in 0..3 {
                let want = if r == c { 1.0 } else { 0.0 };
                assert!((id.linear[r][c] - want).abs() < EPS);
            }
            assert!(id.translation[r].abs() < EPS);
        }
        let p = [10.0, 20.0, 30.0];
        let back = voxel_from_world.apply(world_from_voxel.apply(p));
        assert!(norm(sub(back, p)) < EPS);
    }

    #[test]
    fn singular_has_no_inverse() {
        let flat = Affine3::from_columns(
            [[1.0, 0.0, 0.0], [2.0, 0.0, 0.0], [0.0, 0.0, 1.0]],
            [0.0; 3],
        );
        assert!(flat.inverse().is_none());
    }
}
