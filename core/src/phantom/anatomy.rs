//! The analytic chest: body, fat, muscle, lungs, heart, great vessels, spine, sternum, ribs, liver.
//!
//! Shapes are defined in normalised coordinates (`u`, `v` in [-1, 1] across the field of view,
//! `w` in [0, 1] from the lowest to the highest slice), so any size or spacing shows a whole
//! chest. `u` grows to the patient's left, `v` to posterior, `w` to superior (LPS).

/// Hounsfield values of the tissues (typical adult CT, no contrast).
pub mod hu {
    pub const AIR: f32 = -1000.0;
    pub const LUNG: f32 = -860.0;
    pub const FAT: f32 = -100.0;
    pub const SOFT_TISSUE: f32 = 35.0;
    pub const MUSCLE: f32 = 45.0;
    pub const BLOOD: f32 = 42.0;
    pub const LIVER: f32 = 58.0;
    pub const CANCELLOUS_BONE: f32 = 230.0;
    pub const CORTICAL_BONE: f32 = 750.0;
    pub const RIB: f32 = 550.0;
    pub const CARTILAGE: f32 = 110.0;
    pub const DISC: f32 = 75.0;
    pub const CSF: f32 = 15.0;
}

/// The chest fitted to a field of view.
#[derive(Debug, Clone, Copy)]
pub struct Chest {
    /// Half the field of view in x and y, mm.
    pub half_fov_mm: [f64; 2],
    /// z extent (first to last slice centre), mm.
    pub extent_z_mm: f64,
}

/// Which lung a point is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Right,
    Left,
}

impl Chest {
    /// Millimetre sizes of vessels and airways scale with the body (reference: a 360 mm FOV).
    pub fn scale(&self) -> f64 {
        (self.half_fov_mm[0].min(self.half_fov_mm[1]) / 180.0).max(0.05)
    }

    /// Normalised coordinates of a point given in mm from the volume's (x, y) centre and z start.
    pub fn normalised(&self, p: [f64; 3]) -> [f64; 3] {
        [
            p[0] / self.half_fov_mm[0],
            p[1] / self.half_fov_mm[1],
            if self.extent_z_mm > 0.0 {
                p[2] / self.extent_z_mm
            } else {
                0.5
            },
        ]
    }

    pub fn from_normalised(&self, n: [f64; 3]) -> [f64; 3] {
        [
            n[0] * self.half_fov_mm[0],
            n[1] * self.half_fov_mm[1],
            n[2] * self.extent_z_mm,
        ]
    }

    /// The lung containing normalised point `(u, v, w)`, if any.
    pub fn lung(&self, u: f64, v: f64, w: f64) -> Option<Side> {
        let side = if u < 0.0 { Side::Right } else { Side::Left };
        let s = if u < 0.0 { -1.0 } else { 1.0 };
        let (du, dv) = ((u - s * 0.34) / 0.25, (v + 0.02) / 0.44);
        let r2 = du * du + dv * dv;
        // Apex narrows above w = 0.72; the diaphragm domes up in the middle of each lung.
        let taper = if w > 0.72 {
            1.0 - ((w - 0.72) / 0.26).powi(2)
        } else {
            1.0
        };
        let floor = 0.06 + 0.16 * (1.0 - r2.min(1.0));
        if taper <= 0.0 || r2 >= taper || w <= floor || u.abs() < 0.1 {
            return None;
        }
        if self.in_heart(u, v, w) {
            return None;
        }
        Some(side)
    }

    fn in_heart(&self, u: f64, v: f64, w: f64) -> bool {
        ellipsoid(u - 0.1, v + 0.12, w - 0.3, 0.27, 0.24, 0.2)
    }

    /// Background HU at normalised `(u, v, w)`; `z_mm` drives the periodic ribs and discs.
    pub fn base_hu(&self, u: f64, v: f64, w: f64, z_mm: f64) -> f32 {
        let body = ellipse(u, v - 0.02, 0.86, 0.64);
        if body >= 1.0 {
            return hu::AIR;
        }
        let rib_cage = ellipse(u, v - 0.02, 0.80, 0.58);
        if (0.86..1.0).contains(&body) {
            return hu::FAT;
        }
        if (0.74..0.86).contains(&body) && rib_cage >= 1.0 {
            return hu::MUSCLE;
        }
        if let Some(bone) = self.bone(u, v, z_mm, rib_cage) {
            return bone;
        }
        if self.lung(u, v, w).is_some() {
            // Dependent (posterior) lung is a little denser, as in a supine patient.
            return hu::LUNG + 50.0 * v as f32;
        }
        if self.in_heart(u, v, w) {
            return hu::BLOOD;
        }
        let aorta = (ellipse(u - 0.12, v - 0.3, 0.055, 0.075) < 1.0 && w < 0.78)
            || (ellipse(u, v + 0.1, 0.06, 0.08) < 1.0 && (0.42..0.78).contains(&w));
        if aorta {
            return hu::BLOOD;
        }
        if u < 0.05 && w < 0.3 && ellipse(u + 0.3, v, 0.5, 0.45) < 1.0 {
            return hu::LIVER;
        }
        hu::SOFT_TISSUE
    }

    fn bone(&self, u: f64, v: f64, z_mm: f64, rib_cage: f64) -> Option<f32> {
        let s = self.scale();
        // Vertebral body with cortex, discs every 28 mm (scaled), spinal canal behind.
        let vertebra = ellipse(u, v - 0.45, 0.1, 0.12);
        if vertebra < 1.0 {
            let period = 28.0 * s;
            if z_mm.rem_euclid(period) < 5.0 * s {
                return Some(hu::DISC);
            }
            return Some(if vertebra > 0.72 {
                hu::CORTICAL_BONE
            } else {
                hu::CANCELLOUS_BONE
            });
        }
        if ellipse(u, v - 0.63, 0.04, 0.05) < 1.0 {
            return Some(hu::CSF);
        }
        if ellipse(u, v - 0.63, 0.075, 0.09) < 1.0 {
            return Some(hu::CORTICAL_BONE);
        }
        // Sternum, in front.
        if ellipse(u, v + 0.55, 0.07, 0.035) < 1.0 {
            return Some(hu::CORTICAL_BONE);
        }
        // Ribs: a band just inside the muscle, sloping down anteriorly, every 32 mm (scaled).
        if (0.88..1.0).contains(&rib_cage) {
            let phase = z_mm + 22.0 * s * v;
            if phase.rem_euclid(32.0 * s) < 9.0 * s {
                if u.abs() < 0.22 && v < 0.0 {
                    return Some(hu::CARTILAGE);
                }
                if u.abs() > 0.14 || v < 0.0 {
                    return Some(hu::RIB);
                }
            }
        }
        None
    }
}

/// `(u/a)^2 + (v/b)^2`: below 1 inside the ellipse.
pub fn ellipse(u: f64, v: f64, a: f64, b: f64) -> f64 {
    (u / a).powi(2) + (v / b).powi(2)
}

fn ellipsoid(u: f64, v: f64, w: f64, a: f64, b: f64, c: f64) -> bool {
    (u / a).powi(2) + (v / b).powi(2) + (w / c).powi(2) < 1.0
}
