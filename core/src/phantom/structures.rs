//! Tubes and blobs painted over the background: vessel trees, airways and nodules.
//!
//! Positions are in phantom millimetres: x and y from the volume's centre, z from its first
//! slice. Vessels are the classic false-positive source (bright tapering tubes that look like
//! nodules in cross-section), so they branch through both lungs down to about a millimetre.

use serde::{Deserialize, Serialize};

use super::anatomy::{Chest, hu};
use super::rng::Rng;
use tessera_dicom::geometry::{Vec3, dot, norm, scale, sub};

/// A tapering tube between two points, with an optional wall (airways).
#[derive(Debug, Clone, Copy)]
pub struct Tube {
    pub a: Vec3,
    pub b: Vec3,
    pub radius_a_mm: f64,
    pub radius_b_mm: f64,
    pub hu: f32,
    /// Wall thickness (mm) and HU, painted under the lumen.
    pub wall: Option<(f64, f32)>,
}

impl Tube {
    /// Distance from `p` to the axis and the tube radius at the closest axis point.
    pub fn distance_and_radius(&self, p: Vec3) -> (f64, f64) {
        let ab = sub(self.b, self.a);
        let len2 = dot(ab, ab);
        let t = if len2 > 0.0 {
            (dot(sub(p, self.a), ab) / len2).clamp(0.0, 1.0)
        } else {
            0.0
        };
        let closest = [
            self.a[0] + t * ab[0],
            self.a[1] + t * ab[1],
            self.a[2] + t * ab[2],
        ];
        let radius = self.radius_a_mm + t * (self.radius_b_mm - self.radius_a_mm);
        (norm(sub(p, closest)), radius)
    }

    /// The largest radius including the wall, for bounding boxes.
    pub fn outer_radius_mm(&self) -> f64 {
        self.radius_a_mm.max(self.radius_b_mm) + self.wall.map_or(0.0, |w| w.0)
    }
}

/// Nodule appearance, as radiologists classify them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoduleKind {
    Solid,
    PartSolid,
    GroundGlass,
}

/// What a nodule touches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Attachment {
    Free,
    Pleura,
    Vessel,
}

/// A spherical nodule in phantom millimetres.
#[derive(Debug, Clone, Copy)]
pub struct Nodule {
    pub centre: Vec3,
    pub diameter_mm: f64,
    pub kind: NoduleKind,
    pub attachment: Attachment,
}

impl Nodule {
    /// `(HU, coverage)` at distance `d` from the centre given the partial-volume width.
    pub fn paint(&self, d: f64, pv_mm: f64) -> Option<(f32, f64)> {
        let r = self.diameter_mm / 2.0;
        let edge = coverage(r - d, pv_mm);
        if edge <= 0.0 {
            return None;
        }
        let value = match self.kind {
            NoduleKind::Solid => 25.0,
            NoduleKind::GroundGlass => -560.0,
            NoduleKind::PartSolid => {
                let core = coverage(0.45 * r - d, pv_mm) as f32;
                -450.0 + core * 475.0
            }
        };
        Some((value, edge))
    }
}

/// Fraction of a voxel of width `pv_mm` inside a boundary `signed_mm` away (positive = inside).
pub fn coverage(signed_mm: f64, pv_mm: f64) -> f64 {
    (signed_mm / pv_mm + 0.5).clamp(0.0, 1.0)
}

fn in_lung(chest: &Chest, p: Vec3) -> bool {
    let n = chest.normalised(p);
    chest.lung(n[0], n[1], n[2]).is_some()
}

fn normalize(v: Vec3) -> Vec3 {
    let n = norm(v);
    if n > 0.0 {
        scale(v, 1.0 / n)
    } else {
        [0.0, 0.0, 1.0]
    }
}

fn add(a: Vec3, b: Vec3) -> Vec3 {
    [a[0] + b[0], a[1] + b[1], a[2] + b[2]]
}

/// Pulmonary vessels (arteries and veins) and the bronchial tree.
pub fn vessels_and_airways(chest: &Chest, rng: &mut Rng) -> (Vec<Tube>, Vec<Tube>) {
    let s = chest.scale();
    let mut vessels = Vec::new();
    let mut airways = Vec::new();
    for side in [-1.0, 1.0] {
        for (hilum, radius) in [
            ([side * 0.17, 0.0, 0.55], 5.5 * s),
            ([side * 0.16, 0.06, 0.47], 4.5 * s),
        ] {
            let start = chest.from_normalised(hilum);
            for lobe_dir in [
                [side, -0.2, 0.9],
                [side, -0.5, 0.1],
                [side, 0.1, 0.0],
                [side, 0.5, -0.2],
                [side, 0.3, -0.8],
            ] {
                let dir = normalize(add(lobe_dir, scale(rng.direction(), 0.25)));
                let tube = TreeStyle {
                    hu: hu::BLOOD,
                    child_ratio: 0.78,
                    wall: None,
                    min_radius_mm: 0.6 * s,
                    length_per_radius: 6.0,
                };
                Grower {
                    chest,
                    rng,
                    style: &tube,
                    out: &mut vessels,
                }
                .grow(start, dir, radius, 0);
            }
        }
    }
    // Trachea, carina, main bronchi, then segmental airways with a soft-tissue wall.
    let wall = Some((1.0 * s, -120.0));
    let top = chest.from_normalised([0.0, -0.08, 1.05]);
    let carina = chest.from_normalised([0.0, -0.05, 0.64]);
    airways.push(Tube {
        a: top,
        b: carina,
        radius_a_mm: 8.0 * s,
        radius_b_mm: 7.0 * s,
        hu: hu::AIR,
        wall,
    });
    for side in [-1.0, 1.0] {
        let hilum = chest.from_normalised([side * 0.16, -0.03, 0.57]);
        airways.push(Tube {
            a: carina,
            b: hilum,
            radius_a_mm: 5.5 * s,
            radius_b_mm: 4.5 * s,
            hu: hu::AIR,
            wall,
        });
        for lobe_dir in [[side, -0.3, 0.8], [side, 0.0, -0.7]] {
            let dir = normalize(add(lobe_dir, scale(rng.direction(), 0.2)));
            let tube = TreeStyle {
                hu: hu::AIR,
                child_ratio: 0.75,
                wall,
                min_radius_mm: 1.0 * s,
                length_per_radius: 6.0,
            };
            Grower {
                chest,
                rng,
                style: &tube,
                out: &mut airways,
            }
            .grow(hilum, dir, 3.8 * s, 0);
        }
    }
    (vessels, airways)
}

struct TreeStyle {
    hu: f32,
    child_ratio: f64,
    wall: Option<(f64, f32)>,
    min_radius_mm: f64,
    length_per_radius: f64,
}

/// Grows one branching tree into `out`, each call one segment and its children.
struct Grower<'a> {
    chest: &'a Chest,
    rng: &'a mut Rng,
    style: &'a TreeStyle,
    out: &'a mut Vec<Tube>,
}

impl Grower<'_> {
    fn grow(&mut self, start: Vec3, dir: Vec3, radius: f64, depth: u32) {
        // Roots may cross the mediastinum; branches stay inside the lungs, trying a few
        // directions before giving up (so trees fill the lung instead of dying at its first curve).
        let mut placed = None;
        for attempt in 0..4 {
            let d = if attempt == 0 {
                dir
            } else {
                normalize(add(dir, scale(self.rng.direction(), 0.9)))
            };
            let length = self.style.length_per_radius * radius * self.rng.range(0.8, 1.2);
            let end = add(start, scale(d, length));
            if depth < 2 || in_lung(self.chest, end) {
                placed = Some((d, end));
                break;
            }
        }
        let Some((dir, end)) = placed else { return };
        self.out.push(Tube {
            a: start,
            b: end,
            radius_a_mm: radius,
            radius_b_mm: radius * 0.9,
            hu: self.style.hu,
            wall: self.style.wall,
        });
        let child_radius = radius * self.style.child_ratio;
        if child_radius < self.style.min_radius_mm || depth > 14 {
            return;
        }
        let children = if self.rng.unit() < 0.25 { 3 } else { 2 };
        for _ in 0..children {
            let child_dir = normalize(add(dir, scale(self.rng.direction(), 0.7)));
            self.grow(end, child_dir, child_radius, depth + 1);
        }
    }
}

/// Which lesions [`place_nodules`] places.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lesions {
    /// 3-30 mm (less in a small field of view), solid, part-solid or ground-glass, free, on
    /// the pleura or on a vessel.
    Nodules,
    /// 20-50 mm, solid or part-solid, free or on the pleura.
    Masses,
}

impl Lesions {
    pub fn name(self) -> &'static str {
        match self {
            Self::Nodules => "nodules",
            Self::Masses => "masses",
        }
    }

    /// Smallest and largest diameter in a chest of this field of view (lung half-width is
    /// 0.25 u).
    fn diameter_range_mm(self, chest: &Chest) -> (f64, f64) {
        let fit = 0.25 * chest.half_fov_mm[0];
        match self {
            Self::Nodules => (3.0_f64.min(fit.min(30.0)), fit.min(30.0)),
            Self::Masses => (20.0_f64.min(1.6 * fit), (1.6 * fit).min(50.0)),
        }
    }

    /// Kind and attachment, in this order from `rng` (the nodules' stream is unchanged).
    fn draw(self, rng: &mut Rng) -> (NoduleKind, Attachment) {
        let kind = match (self, rng.unit()) {
            (Self::Nodules, x) if x < 0.6 => NoduleKind::Solid,
            (Self::Nodules, x) if x < 0.8 => NoduleKind::PartSolid,
            (Self::Nodules, _) => NoduleKind::GroundGlass,
            (Self::Masses, x) if x < 0.75 => NoduleKind::Solid,
            (Self::Masses, _) => NoduleKind::PartSolid,
        };
        let attachment = match (self, rng.unit()) {
            (_, x) if x < 0.6 => Attachment::Free,
            (Self::Nodules, x) if x >= 0.8 => Attachment::Vessel,
            _ => Attachment::Pleura,
        };
        (kind, attachment)
    }
}

/// Places `count` lesions in the lungs, apart from those already in `nodules` (appended to
/// it): free, against the pleura, or touching a vessel.
///
/// Places fewer than `count` only when the lungs are too small to hold them apart.
pub fn place_nodules(
    chest: &Chest,
    rng: &mut Rng,
    vessels: &[Tube],
    count: usize,
    lesions: Lesions,
    nodules: &mut Vec<Nodule>,
) {
    let (lo, max_diameter) = lesions.diameter_range_mm(chest);
    let sample_dirs = tessera_dicom::geometry::cube_directions();
    let big_vessels: Vec<&Tube> = vessels
        .iter()
        .filter(|t| t.radius_a_mm > 1.2 * chest.scale())
        .collect();
    for _ in 0..count {
        for _attempt in 0..4000 {
            let (kind, attachment) = lesions.draw(rng);
            let diameter = (lo.ln() + rng.unit() * (max_diameter.ln() - lo.ln())).exp();
            let r = diameter / 2.0;
            let centre = match attachment {
                Attachment::Vessel if !big_vessels.is_empty() => {
                    let tube = big_vessels[(rng.next_u64() % big_vessels.len() as u64) as usize];
                    let t = rng.unit();
                    let axis = normalize(sub(tube.b, tube.a));
                    let on_axis = add(tube.a, scale(sub(tube.b, tube.a), t));
                    let side = normalize(sub(
                        rng.direction(),
                        scale(axis, dot(rng.direction(), axis)),
                    ));
                    add(on_axis, scale(side, r + tube.radius_a_mm * 0.6))
                }
                _ => {
                    let u = if rng.unit() < 0.5 { -1.0 } else { 1.0 } * rng.range(0.12, 0.6);
                    chest.from_normalised([u, rng.range(-0.45, 0.42), rng.range(0.22, 0.88)])
                }
            };
            let inside = |k: f64| {
                sample_dirs
                    .iter()
                    .all(|d| in_lung(chest, add(centre, scale(*d, k * r))))
            };
            let ok_shape = match (attachment, lesions) {
                (Attachment::Free, Lesions::Nodules) => inside(1.3),
                // A mass fills most of a lung's width: inside, not a margin beyond.
                (Attachment::Free, Lesions::Masses) => inside(1.0),
                (Attachment::Pleura, _) => inside(0.5) && !inside(1.1),
                (Attachment::Vessel, _) => inside(1.0),
            };
            let apart = nodules
                .iter()
                .all(|n| norm(sub(n.centre, centre)) > r + n.diameter_mm / 2.0 + 5.0);
            if in_lung(chest, centre) && ok_shape && apart {
                nodules.push(Nodule {
                    centre,
                    diameter_mm: diameter,
                    kind,
                    attachment,
                });
                break;
            }
        }
    }
}
