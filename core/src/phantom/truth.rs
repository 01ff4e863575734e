//! Ground truth of a phantom: each nodule's centre and extent, in LPS millimetres and voxels.

use serde::{Deserialize, Serialize};

use super::PhantomSpec;
use super::structures::{Attachment, Nodule, NoduleKind};
use tessera_dicom::volume::{Geometry, StudyVoxelBox};

/// One nodule as written to `truth.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NoduleTruth {
    pub id: usize,
    pub kind: NoduleKind,
    pub attachment: Attachment,
    pub diameter_mm: f64,
    pub center_lps_mm: [f64; 3],
    /// Fractional voxel coordinates `[x, y, z]` of the centre.
    pub center_voxel: [f64; 3],
    /// Voxels the sphere overlaps: `min` inclusive, `max` exclusive.
    pub box_voxel: StudyVoxelBox,
    pub box_lps_mm: MmBox,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MmBox {
    pub min: [f64; 3],
    pub max: [f64; 3],
}

/// `truth.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Truth {
    pub generator: String,
    pub spec: PhantomSpec,
    pub series_uid: String,
    pub size: [usize; 3],
    pub spacing_mm: [f64; 3],
    pub nodules: Vec<NoduleTruth>,
}

impl Truth {
    pub(super) fn new(spec: &PhantomSpec, geometry: &Geometry, nodules: &[Nodule]) -> Self {
        let origin = geometry.origin_lps_mm();
        let nodules = nodules
            .iter()
            .enumerate()
            .map(|(id, n)| {
                // Phantom mm are from the x/y centre and the first slice; LPS adds the origin.
                let center_lps_mm = [n.centre[0], n.centre[1], n.centre[2] + origin[2]];
                let r = n.diameter_mm / 2.0;
                let center_voxel: [f64; 3] = std::array::from_fn(|a| {
                    (center_lps_mm[a] - origin[a]) / geometry.spacing_mm[a]
                });
                // Every voxel the sphere's box overlaps; the specs place every nodule inside
                // the volume (a test checks it), so an empty box would show in that test.
                let box_voxel = StudyVoxelBox::covering(
                    std::array::from_fn(|a| center_voxel[a] - r / geometry.spacing_mm[a]),
                    std::array::from_fn(|a| center_voxel[a] + r / geometry.spacing_mm[a]),
                    geometry.size,
                )
                .unwrap_or_default();
                NoduleTruth {
                    id,
                    kind: n.kind,
                    attachment: n.attachment,
                    diameter_mm: n.diameter_mm,
                    center_lps_mm,
                    center_voxel,
                    box_voxel,
                    box_lps_mm: MmBox {
                        min: std::array::from_fn(|a| center_lps_mm[a] - r),
                        max: std::array::from_fn(|a| center_lps_mm[a] + r),
                    },
                }
            })
            .collect();
        Self {
            generator: format!("tessera {} phantom", env!("CARGO_PKG_VERSION")),
            spec: spec.clone(),
            series_uid: super::rng::uid(spec.seed, 2),
            size: geometry.size,
            spacing_mm: geometry.spacing_mm,
            nodules,
        }
    }
}
