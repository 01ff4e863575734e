//! The findings of a TID 1500 report read back (Tessera's own, or another tool's that uses
//! the same items).

use std::path::Path;

use super::{SrError, codes as c};
use crate::dicom::sr::{GraphicType3d, Item, ReadSr, Value};
use crate::geometry::Vec3;
use crate::review::Decision;

/// One measurement group's finding.
#[derive(Debug, Clone, PartialEq)]
pub struct SrFinding {
    pub tracking_id: String,
    pub center_lps_mm: Vec3,
    /// Lengths of the ellipsoid's three axes (in the order written); `None` for a point.
    pub size_mm: Option<Vec3>,
    pub frame_of_reference_uid: String,
    /// The detector's certainty as a score in 0..1, when the group has one.
    pub score: Option<f32>,
    pub decision: Option<Decision>,
    pub note: String,
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
            let length =
                |p: &Vec3, q: &Vec3| crate::geometry::norm(std::array::from_fn(|k| p[k] - q[k]));
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
    Some(SrFinding {
        tracking_id: text(c::tracking_identifier()),
        center_lps_mm,
        size_mm,
        frame_of_reference_uid: frame.clone(),
        score,
        decision,
        note: text(c::comment()),
    })
}
