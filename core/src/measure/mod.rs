//! A finding measured on the study's own voxels (not the model's grid): its axial long and
//! short axes, their mean (the size screening guidelines use), its volume and mean HU, and its
//! type (solid, part-solid, ground-glass) from its HU distribution.
//!
//! The finding is segmented around its box:
//! 1. within a cube reaching [`REACH`] box sides from its centre (at least
//!    [`MIN_HALF_SIDE_MM`], at most [`MAX_HALF_SIDE_MM`]), the voxels of at least
//!    [`GROUND_GLASS_HU`] (halfway between aerated lung and ground glass), in the lung field
//!    when the run has one;
//! 2. opened by a ball of [`OPENING_SHARES`] of the box's mean axial side in turn, until the
//!    6-connected component nearest the centre no longer runs out of the cube (vessels and
//!    the chest wall come off), with the voxels the opening took next to it;
//! 3. its solid component: voxels of at least [`SOLID_HU`], opened (vessels through ground
//!    glass are not one), the component nearest the centre, at least
//!    [`MIN_SOLID_COMPONENT_MM3`]. None: ground-glass. Ground glass reaching at most
//!    [`GROUND_GLASS_RIM_MM`] beyond it (the scanner's blur of a solid edge): solid.
//!    Otherwise part-solid (its solid component measured too);
//! 4. the edge at half the contrast with lung ([`LUNG_HU`]) of the solid component's densest
//!    voxels (solid) or of the ground glass (subsolid), so that blur does not move it; what
//!    is attached thinner than [`TRIM_SHARE`] of its diameter trimmed off.
//!
//! The axes are measured on the axial slice where the long axis is longest ([`axes`]); the
//! volume and mean HU over the segmentation. When the image gives no segmentation (nothing
//! near the centre, or no opening frees it), the axes are the box's and the record says so.

pub mod axes;

use serde::{Deserialize, Serialize};

use tessera_maps::mask::{Cube, ball_offsets};

pub use axes::{AxialAxes, axial_axes, round_tenth};
use tessera_dicom::volume::{Geometry, StudyVoxelBox, Voxels};

/// Aerated lung is about -850 HU, ground glass about -550 HU.
pub const GROUND_GLASS_HU: f32 = -700.0;
/// Between a part-solid nodule's ground glass (about -450 HU) and soft tissue (0 to 50 HU),
/// close to halfway between lung and soft tissue.
pub const SOLID_HU: f32 = -300.0;
/// A finding whose ground glass reaches at most this far beyond its solid component (on
/// average, axially) is solid: that much is the scanner's blur of a solid edge.
pub const GROUND_GLASS_RIM_MM: f64 = 1.25;
/// What is attached to a finding thinner than twice this share of its diameter is trimmed
/// off (an opening of this share as its radius).
pub const TRIM_SHARE: f64 = 0.3;
/// A solid component smaller than a 2.5 mm ball is noise or a vessel's cut, not a component.
pub const MIN_SOLID_COMPONENT_MM3: f64 = 8.2;
/// Aerated lung, the background a solid nodule's contrast is measured against.
pub const LUNG_HU: f32 = -850.0;
/// The cube searched reaches this many box sides from the centre...
pub const REACH: f64 = 1.5;
/// ... at least this far, at most this far.
pub const MIN_HALF_SIDE_MM: f64 = 8.0;
pub const MAX_HALF_SIDE_MM: f64 = 40.0;
/// The opening's radius, as a share of the box's mean axial side, tried in turn until the
/// finding comes free of what it touches...
pub const OPENING_SHARES: [f64; 4] = [0.15, 0.25, 0.35, 0.45];
/// ... within these.
pub const OPENING_RADIUS_MM: (f64, f64) = (0.75, 6.0);
/// The solid voxels' opening, as a share of the box's mean axial side (vessels through a
/// ground-glass nodule are not its solid component).
pub const SOLID_OPENING_SHARE: f64 = 0.15;
/// The finding must have a voxel this close to its centre, or a quarter of its box.
pub const SEED_REACH_MM: f64 = 3.0;

/// A nodule's type, from its HU distribution.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoduleType {
    Solid,
    PartSolid,
    GroundGlass,
}

impl NoduleType {
    pub fn label(self) -> &'static str {
        match self {
            Self::Solid => "solid",
            Self::PartSolid => "part-solid",
            Self::GroundGlass => "ground-glass",
        }
    }
}

/// How the measurements were made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    /// From a segmentation of the finding on the study's voxels.
    Segmented,
    /// The image gave no segmentation: the axes are the box's sides, nothing else is known.
    Box,
}

/// One finding's measurements, as `det.json` keeps them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measurements {
    pub method: Method,
    /// The finding's (a solid nodule's solid voxels', a subsolid nodule's whole) axial axes.
    pub axes: AxialAxes,
    /// `(long + short) / 2` rounded to 0.1 mm: the finding's size everywhere Tessera shows it.
    pub mean_diameter_mm: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_mm3: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_hu: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nodule_type: Option<NoduleType>,
    /// A part-solid nodule's solid component.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub solid_axes: Option<AxialAxes>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub solid_mean_diameter_mm: Option<f64>,
    /// How they were measured, in words.
    pub how: String,
}

/// Measures the finding in `finding` (study voxels) on `voxels` of `geometry`; `lung_field`
/// says whether a study voxel is in the lung field, when there is one.
pub fn measure(
    voxels: &Voxels,
    geometry: &Geometry,
    finding: &StudyVoxelBox,
    lung_field: Option<&dyn Fn([usize; 3]) -> bool>,
) -> Measurements {
    let scene = Scene::new(voxels, geometry, finding, lung_field);
    let (lesion, radius_mm) = match scene.lesion() {
        Ok(found) => found,
        Err(why) => return from_box(finding, geometry, &why),
    };
    let lesion = scene.trim(&lesion);
    let solid = scene.above(&lesion, SOLID_HU);
    let core = scene.core(&solid);
    let rim_mm = core
        .as_ref()
        .map(|c| (scene.diameter_mm(&lesion) - scene.diameter_mm(c)) / 2.0);
    // Each edge at half its contrast with the lung around it, so that the scanner's blur
    // (which lowers a small nodule's peak) does not move it.
    let half_contrast = |m: &[bool], share: f64| {
        let values = scene
            .voxels_of(m)
            .into_iter()
            .map(|v| scene.hu(v))
            .collect();
        ((percentile(values, share) + LUNG_HU) / 2.0).max(GROUND_GLASS_HU)
    };
    let (nodule_type, solid_part, edge_hu) = match (core, rim_mm) {
        (Some(core), Some(rim)) if rim <= GROUND_GLASS_RIM_MM => {
            (NoduleType::Solid, None, half_contrast(&core, 0.95))
        }
        (Some(core), _) => {
            let ground_glass: Vec<bool> =
                lesion.iter().zip(&core).map(|(l, c)| *l && !*c).collect();
            (
                NoduleType::PartSolid,
                Some(core),
                half_contrast(&ground_glass, 0.5),
            )
        }
        (None, _) => (NoduleType::GroundGlass, None, half_contrast(&lesion, 0.5)),
    };
    let above = scene.above(&lesion, edge_hu);
    let region = scene.trim(&above);
    let region_voxels = scene.voxels_of(&region);
    let Some(axes) = axial_axes(&region_voxels, scene.pixel_mm()) else {
        return from_box(finding, geometry, "its segmentation is empty");
    };
    let mean_hu = region_voxels
        .iter()
        .map(|v| f64::from(scene.hu(*v)))
        .sum::<f64>()
        / region_voxels.len() as f64;
    let solid_axes = solid_part.and_then(|c| axial_axes(&scene.voxels_of(&c), scene.pixel_mm()));
    let lung = if lung_field.is_some() {
        " in the lung field"
    } else {
        ""
    };
    let how = format!(
        "segmented on the study's voxels: {GROUND_GLASS_HU} HU or more{lung} connected to its centre after an opening of {radius_mm:.2} mm, attached structures thinner than {:.0} % of its diameter trimmed; {} ({}), its edge at {edge_hu:.0} HU (half its contrast with lung); axes on axial slice {}",
        200.0 * TRIM_SHARE,
        nodule_type.label(),
        match rim_mm {
            Some(rim) => format!(
                "ground glass {rim:.1} mm around a solid component of {SOLID_HU} HU or more"
            ),
            None => format!("no solid component of {SOLID_HU} HU or more"),
        },
        axes.slice + 1,
    );
    Measurements {
        method: Method::Segmented,
        mean_diameter_mm: axes.mean_diameter_mm(),
        axes,
        volume_mm3: Some((region_voxels.len() as f64 * scene.voxel_mm3()).round()),
        mean_hu: Some(mean_hu),
        nodule_type: Some(nodule_type),
        solid_mean_diameter_mm: solid_axes.map(|a| a.mean_diameter_mm()),
        solid_axes,
        how,
    }
}

fn count(mask: &[bool]) -> usize {
    mask.iter().filter(|v| **v).count()
}

/// The cube around a finding and what the steps share.
struct Scene<'a> {
    voxels: &'a Voxels,
    geometry: &'a Geometry,
    cube: Cube,
    /// Voxel coordinates (centres on integers).
    center: [f64; 3],
    /// The box's mean axial side.
    axial_mm: f64,
    reach_mm: f64,
    /// Voxels of [`GROUND_GLASS_HU`] or more in the lung field.
    dense: Vec<bool>,
}

impl<'a> Scene<'a> {
    fn new(
        voxels: &'a Voxels,
        geometry: &'a Geometry,
        finding: &StudyVoxelBox,
        lung_field: Option<&dyn Fn([usize; 3]) -> bool>,
    ) -> Self {
        let spacing_mm = geometry.spacing_mm;
        let center = std::array::from_fn(|a| (finding.min[a] + finding.max[a]) as f64 / 2.0 - 0.5);
        let side_mm: [f64; 3] = std::array::from_fn(|a| {
            finding.max[a].saturating_sub(finding.min[a]) as f64 * spacing_mm[a]
        });
        let axial_mm = (side_mm[0] + side_mm[1]) / 2.0;
        let half_voxels = std::array::from_fn(|a| {
            (REACH * side_mm[a]).clamp(MIN_HALF_SIDE_MM, MAX_HALF_SIDE_MM) / spacing_mm[a]
        });
        let cube = Cube::around(center, half_voxels, geometry.size);
        let hu = |v| voxels.hu_at(v).unwrap_or(f32::NEG_INFINITY);
        let dense = cube.map(|v| hu(v) >= GROUND_GLASS_HU && lung_field.is_none_or(|f| f(v)));
        Self {
            voxels,
            geometry,
            cube,
            center,
            axial_mm,
            reach_mm: SEED_REACH_MM.max(axial_mm / 4.0),
            dense,
        }
    }

    fn hu(&self, v: [usize; 3]) -> f32 {
        self.voxels.hu_at(v).unwrap_or(f32::NEG_INFINITY)
    }

    fn pixel_mm(&self) -> [f64; 2] {
        [self.geometry.spacing_mm[0], self.geometry.spacing_mm[1]]
    }

    fn voxel_mm3(&self) -> f64 {
        self.geometry.world_from_voxel.determinant().abs()
    }

    fn ball(&self, radius_mm: f64) -> Vec<[i64; 3]> {
        ball_offsets(
            radius_mm.clamp(OPENING_RADIUS_MM.0, OPENING_RADIUS_MM.1),
            self.geometry.spacing_mm,
        )
    }

    fn voxels_of(&self, mask: &[bool]) -> Vec<[usize; 3]> {
        let c = &self.cube;
        c.locals()
            .filter(|l| mask[c.index(*l)])
            .map(|l| c.voxel(l))
            .collect()
    }

    /// The voxels of `mask` of `hu` or more.
    fn above(&self, mask: &[bool], hu: f32) -> Vec<bool> {
        let c = &self.cube;
        c.locals()
            .map(|l| mask[c.index(l)] && self.hu(c.voxel(l)) >= hu)
            .collect()
    }

    /// The dense voxels connected to the centre after the smallest opening that frees them
    /// from what they touch, with the rim the opening took; and that opening's radius.
    fn lesion(&self) -> Result<(Vec<bool>, f64), String> {
        let c = &self.cube;
        let spacing_mm = self.geometry.spacing_mm;
        for share in OPENING_SHARES {
            let radius_mm = (share * self.axial_mm).clamp(OPENING_RADIUS_MM.0, OPENING_RADIUS_MM.1);
            let opened = c.open(&self.dense, &self.ball(radius_mm));
            let Some(seed) = c.nearest_set(&opened, self.center, spacing_mm, self.reach_mm) else {
                return Err(format!(
                    "no voxel of {GROUND_GLASS_HU} HU or more within {:.1} mm of its centre after an opening of {radius_mm:.2} mm",
                    self.reach_mm
                ));
            };
            if let Some(component) = c.component(&opened, seed) {
                return Ok((c.with_rim(&component, &self.dense), radius_mm));
            }
        }
        Err(format!(
            "its voxels of {GROUND_GLASS_HU} HU or more run on past the {:.0} mm around it (joined to the chest wall, a vessel or the mediastinum)",
            c.size[0] as f64 * spacing_mm[0]
        ))
    }

    /// `mask` less what is attached to it thinner than [`TRIM_SHARE`] of its own diameter
    /// (a vessel's stub), with its voxels next to what stays; `mask` when the opening would
    /// leave nothing at the centre.
    fn trim(&self, mask: &[bool]) -> Vec<bool> {
        let opened = self
            .cube
            .open(mask, &self.ball(TRIM_SHARE * self.diameter_mm(mask)));
        self.central(&opened)
            .map_or_else(|| mask.to_vec(), |kept| self.cube.with_rim(&kept, mask))
    }

    /// The solid component nearest the centre (opened so that vessels through a
    /// ground-glass nodule are not one), when it is at least [`MIN_SOLID_COMPONENT_MM3`].
    fn core(&self, solid: &[bool]) -> Option<Vec<bool>> {
        let opened = self
            .cube
            .open(solid, &self.ball(SOLID_OPENING_SHARE * self.axial_mm));
        self.central(&opened)
            .map(|core| self.cube.with_rim(&core, solid))
            .filter(|core| count(core) as f64 * self.voxel_mm3() >= MIN_SOLID_COMPONENT_MM3)
    }

    /// The component of `mask` nearest the centre, when there is one within reach that does
    /// not run out of the cube.
    fn central(&self, mask: &[bool]) -> Option<Vec<bool>> {
        let c = &self.cube;
        let spacing_mm = self.geometry.spacing_mm;
        c.nearest_set(mask, self.center, spacing_mm, self.reach_mm)
            .and_then(|seed| c.component(mask, seed))
    }

    /// The mean of `mask`'s axial axes (0 when empty).
    fn diameter_mm(&self, mask: &[bool]) -> f64 {
        axial_axes(&self.voxels_of(mask), self.pixel_mm())
            .map_or(0.0, |a| (a.long_axis_mm + a.short_axis_mm) / 2.0)
    }
}

/// The size of a finding known only by its box of `size_mm`: the mean of its axial sides,
/// rounded as [`AxialAxes::mean_diameter_mm`] is.
pub fn box_mean_diameter_mm(size_mm: [f64; 3]) -> f64 {
    round_tenth((size_mm[0] + size_mm[1]) / 2.0)
}

/// The value below which `share` of `values` lie.
fn percentile(mut values: Vec<f32>, share: f64) -> f32 {
    values.sort_by(f32::total_cmp);
    let at = ((values.len().saturating_sub(1)) as f64 * share).round() as usize;
    values.get(at).copied().unwrap_or(LUNG_HU)
}

/// The box's axial sides as its axes, on its middle slice: all that is known without a
/// segmentation.
fn from_box(finding: &StudyVoxelBox, geometry: &Geometry, why: &str) -> Measurements {
    let (min, max) = (
        finding.min.map(|v| v as f64 - 0.5),
        finding.max.map(|v| v as f64 - 0.5),
    );
    let mid = [(min[0] + max[0]) / 2.0, (min[1] + max[1]) / 2.0];
    let slice = (finding.min[2] + finding.max[2].saturating_sub(1)) / 2;
    let horizontal = [[min[0], mid[1]], [max[0], mid[1]]];
    let vertical = [[mid[0], min[1]], [mid[0], max[1]]];
    let pixel_mm = [geometry.spacing_mm[0], geometry.spacing_mm[1]];
    let x_longer = (max[0] - min[0]) * pixel_mm[0] >= (max[1] - min[1]) * pixel_mm[1];
    let (long, short) = if x_longer {
        (horizontal, vertical)
    } else {
        (vertical, horizontal)
    };
    let axes = AxialAxes::from_ends(slice, long, short, pixel_mm);
    Measurements {
        method: Method::Box,
        mean_diameter_mm: axes.mean_diameter_mm(),
        axes,
        volume_mm3: None,
        mean_hu: None,
        nodule_type: None,
        solid_axes: None,
        solid_mean_diameter_mm: None,
        how: format!("the finding's box (not segmented: {why})"),
    }
}
