//! The findings of a TID 1500 report read back (Tessera's own, or another tool's that uses
//! the same items).

use std::path::Path;

use super::{SrError, codes as c};
use crate::lungrads::Category;
use crate::measure::NoduleType;
use crate::review::Decision;
use tessera_dicom::dicom::sr::{Code, GraphicType3d, Item, ReadSr, Value};
use tessera_dicom::geometry::Vec3;
use tessera_dicom::volume::{Geometry, StudyVoxelBox};

/// One measurement group's finding.
#[derive(Debug, Clone, PartialEq)]
pub struct SrFinding {
    pub tracking_id: String,
    pub center_lps_mm: Vec3,
    /// Lengths of the ellipsoid's three axes (in the order written); `None` for a point.
    pub size_mm: Option<Vec3>,
    /// The region's points as written (LPS mm): an ellipsoid's six axis ends, or one point.
    pub points_lps_mm: Vec<Vec3>,
    pub frame_of_reference_uid: String,
    /// The detector's certainty as a score in 0..1, when the group has one.
    pub score: Option<f32>,
    pub decision: Option<Decision>,
    pub note: String,
    /// Its numeric measurements, as written (TID 1411).
    pub measured: SrMeasurements,
    pub nodule_type: Option<NoduleType>,
    /// The Lung-RADS category, and whether it is Tessera's suggestion (not the reader's).
    pub lung_rads: Option<(Category, bool)>,
}

/// A measurement group's numbers.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SrMeasurements {
    /// The size: the mean of the axial long and short axes.
    pub mean_diameter_mm: Option<f64>,
    pub long_axis_mm: Option<f64>,
    pub short_axis_mm: Option<f64>,
    pub volume_mm3: Option<f64>,
    pub mean_hu: Option<f64>,
}

impl SrFinding {
    /// The study voxels the region spans (its points' bounding box; a point is one voxel),
    /// or `None` when it lies outside the volume.
    pub fn study_box(&self, geometry: &Geometry) -> Option<StudyVoxelBox> {
        let voxel_from_world = geometry.world_from_voxel.inverse()?;
        let voxels: Vec<Vec3> = self
            .points_lps_mm
            .iter()
            .map(|p| voxel_from_world.apply(*p))
            .collect();
        let lo = std::array::from_fn(|a| voxels.iter().map(|v| v[a]).fold(f64::INFINITY, f64::min));
        let hi = std::array::from_fn(|a| {
            voxels
                .iter()
                .map(|v| v[a])
                .fold(f64::NEG_INFINITY, f64::max)
        });
        StudyVoxelBox::covering(lo, hi, geometry.size)
    }
}

/// The findings of `sr` (read from `path`), in report order.
pub fn findings(sr: &ReadSr, path: &Path) -> Result<Vec<SrFinding>, SrError> {
    let refuse = |reason: &str| SrError::NotAReport {
        path: path.to_path_buf(),
        reason: reason.into(),
    };
    if !sr
        .root
        .concept
        .as_ref()
        .is_some_and(|n| n.is(&c::imaging_measurement_report()))
    {
        return Err(refuse(
            "its root is not an Imaging Measurement Report (TID 1500)",
        ));
    }
    let Some(measurements) = sr.root.child(&c::imaging_measurements()) else {
        return Ok(Vec::new());
    };
    measurements
        .children_named(&c::measurement_group())
        .enumerate()
        .map(|(i, group)| {
            finding(group).ok_or_else(|| {
                refuse(&format!(
                    "measurement group {} has no 3D region (SCOORD3D point or ellipsoid)",
                    i + 1
                ))
            })
        })
        .collect()
}

fn finding(group: &Item) -> Option<SrFinding> {
    let (graphic_type, points, frame) =
        group.children.iter().find_map(|item| match &item.value {
            Value::Scoord3d {
                graphic_type,
                points_lps_mm,
                frame_of_reference_uid,
            } => Some((*graphic_type, points_lps_mm, frame_of_reference_uid)),
            _ => None,
        })?;
    let (center_lps_mm, size_mm) = match (graphic_type, points.as_slice()) {
        (GraphicType3d::Point, [p]) => (*p, None),
        (GraphicType3d::Ellipsoid, [a0, a1, b0, b1, c0, c1]) => {
            let mid = |p: &Vec3, q: &Vec3| -> Vec3 { std::array::from_fn(|k| (p[k] + q[k]) / 2.0) };
            let length = |p: &Vec3, q: &Vec3| {
                tessera_dicom::geometry::norm(std::array::from_fn(|k| p[k] - q[k]))
            };
            (
                mid(a0, a1),
                Some([length(a0, a1), length(b0, b1), length(c0, c1)]),
            )
        }
        _ => return None,
    };
    let text = |concept| match group.child(&concept).map(|i| &i.value) {
        Some(Value::Text(t)) => t.clone(),
        _ => String::new(),
    };
    let score = match group.child(&c::certainty_of_finding()).map(|i| &i.value) {
        Some(Value::Num { value, units }) if units.is(&c::percent()) => {
            Some((value / 100.0) as f32)
        }
        _ => None,
    };
    let decision = match group.child(&c::reader_decision()).map(|i| &i.value) {
        Some(Value::Code(code)) => Decision::ALL.into_iter().find(|d| d.label() == code.value),
        _ => None,
    };
    let number = |concept: Code, units: Code| match group.child(&concept).map(|i| &i.value) {
        Some(Value::Num { value, units: u }) if u.is(&units) => Some(*value),
        _ => None,
    };
    let code = |concept: Code| match group.child(&concept).map(|i| &i.value) {
        Some(Value::Code(code)) => Some(code.value.clone()),
        _ => None,
    };
    let measured = SrMeasurements {
        mean_diameter_mm: number(c::diameter(), c::millimetre()),
        long_axis_mm: number(c::long_axis(), c::millimetre()),
        short_axis_mm: number(c::short_axis(), c::millimetre()),
        volume_mm3: number(c::volume(), c::cubic_millimetre()),
        mean_hu: number(c::attenuation_coefficient(), c::hounsfield_unit()),
    };
    let nodule_type = code(c::nodule_type()).and_then(|label| {
        [
            NoduleType::Solid,
            NoduleType::PartSolid,
            NoduleType::GroundGlass,
        ]
        .into_iter()
        .find(|t| t.label() == label)
    });
    let lung_rads = [(false, c::lung_rads(false)), (true, c::lung_rads(true))]
        .into_iter()
        .find_map(|(suggested, concept)| {
            code(concept)
                .and_then(|l| Category::from_label(&l))
                .map(|c| (c, suggested))
        });
    Some(SrFinding {
        measured,
        nodule_type,
        lung_rads,
        tracking_id: text(c::tracking_identifier()),
        center_lps_mm,
        size_mm,
        points_lps_mm: points.clone(),
        frame_of_reference_uid: frame.clone(),
        score,
        decision,
        note: text(c::comment()),
    })
}
