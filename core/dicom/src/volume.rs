//! A CT volume: voxels in Hounsfield units plus the geometry that places them in the patient.
//!
//! Storage order is ndarray `[z, y, x]` (slice, row, column), so one axial slice is contiguous.
//! Sizes and spacings are given in `x, y, z` order everywhere else; [`Geometry`] converts.
//! This module never reads files: `dicom` and `phantom` build volumes.

use ndarray::Array3;
use serde::{Deserialize, Serialize};

use crate::geometry::{Affine3, Vec3, dot, norm};

/// The most voxels a volume (or one file, or a resampled grid) may have: 2^30, 2 GiB as `i16`,
/// 4 GiB as `f32`. A whole-body CT at 0.5 mm is about a quarter of this; anything larger is a
/// header error, and refusing it beats an allocation that aborts the process.
pub const MAX_VOXELS: usize = 1 << 30;

/// Voxel values, kept as `i16` HU when the stored values and the rescale allow it exactly.
#[derive(Debug, Clone, PartialEq)]
pub enum Voxels {
    /// HU, `[z, y, x]`.
    I16(Array3<i16>),
    /// HU, `[z, y, x]`: used when a rescale slope or intercept makes the values non-integer.
    F32(Array3<f32>),
}

impl Voxels {
    /// `[x, y, z]` sizes.
    pub fn size(&self) -> [usize; 3] {
        let (z, y, x) = match self {
            Self::I16(a) => a.dim(),
            Self::F32(a) => a.dim(),
        };
        [x, y, z]
    }

    /// The value at voxel `[x, y, z]`, or `None` outside the volume.
    pub fn hu_at(&self, [x, y, z]: [usize; 3]) -> Option<f32> {
        match self {
            Self::I16(a) => a.get([z, y, x]).map(|v| f32::from(*v)),
            Self::F32(a) => a.get([z, y, x]).copied(),
        }
    }

    /// A copy as `f32` HU, `[z, y, x]`.
    pub fn to_f32(&self) -> Array3<f32> {
        match self {
            Self::I16(a) => a.mapv(f32::from),
            Self::F32(a) => a.clone(),
        }
    }

    pub fn is_i16(&self) -> bool {
        matches!(self, Self::I16(_))
    }
}

/// Where the voxel grid sits in the patient.
/// A slice of the volume that no file provides: interpolated from its neighbours.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FilledSlice {
    /// Slice index `z` in the volume.
    pub index: usize,
    /// Centre of its first voxel, LPS mm.
    pub position_lps_mm: Vec3,
    /// The unreadable file that would have been this slice, when its position is known.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub file: Option<std::path::PathBuf>,
}

impl FilledSlice {
    /// One line for warnings: index, position and file.
    pub fn describe(&self) -> String {
        let p = self.position_lps_mm;
        format!(
            "slice {} at ({:.2}, {:.2}, {:.2}) mm is interpolated{}",
            self.index,
            p[0],
            p[1],
            p[2],
            match &self.file {
                Some(f) => format!(" (in place of unreadable {})", f.display()),
                None => " (no file at this position)".into(),
            }
        )
    }
}

/// A box of a study's own voxels `[x, y, z]`: `min` inclusive, `max` exclusive. (Boxes on
/// the grid a model ran on are `tessera_maps::decode::ModelGridBox`.)
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StudyVoxelBox {
    pub min: [usize; 3],
    pub max: [usize; 3],
}

impl StudyVoxelBox {
    /// The voxels a continuous box `[lo, hi]` (voxel coordinates, voxel `i` covering
    /// `[i - 0.5, i + 0.5)`) overlaps, within a volume of `size`; a box thinner than a voxel
    /// gets the voxel it lies in. `None` when the box misses the volume. The one rounding of a
    /// box onto study voxels (detections, SR regions, drawn findings, phantom truth).
    ///
    /// ```
    /// use tessera_dicom::volume::StudyVoxelBox;
    /// let b = StudyVoxelBox::covering([1.2, 0.0, -3.0], [2.7, 0.0, 0.4], [10, 10, 10]).unwrap();
    /// assert_eq!((b.min, b.max), ([1, 0, 0], [4, 1, 1]));
    /// assert_eq!(StudyVoxelBox::covering([12.0; 3], [13.0; 3], [10, 10, 10]), None);
    /// ```
    pub fn covering(lo: [f64; 3], hi: [f64; 3], size: [usize; 3]) -> Option<Self> {
        let mut min = [0; 3];
        let mut max = [0; 3];
        for a in 0..3 {
            let first = (lo[a] + 0.5).floor();
            let end = (hi[a] + 0.5).ceil().max(first + 1.0);
            let (first, end) = (first.max(0.0), end.min(size[a] as f64));
            if first.partial_cmp(&end) != Some(std::cmp::Ordering::Less) {
                return None;
            }
            (min[a], max[a]) = (first as usize, end as usize);
        }
        Some(Self { min, max })
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Geometry {
    /// Voxel counts `[x, y, z]`.
    pub size: [usize; 3],
    /// Distance between voxel centres along each axis `[x, y, z]`, millimetres.
    pub spacing_mm: Vec3,
    /// Maps voxel indices `[x, y, z]` (centre of voxel 0 at 0) to LPS millimetres. Its columns
    /// are the axis directions times the spacing; the z column is not orthogonal to the others
    /// when the series has a gantry tilt.
    pub world_from_voxel: Affine3,
}

impl Geometry {
    /// Axis-aligned geometry (identity directions), as the phantom uses.
    pub fn axis_aligned(size: [usize; 3], spacing_mm: Vec3, origin_lps_mm: Vec3) -> Self {
        let [sx, sy, sz] = spacing_mm;
        Self {
            size,
            spacing_mm,
            world_from_voxel: Affine3::from_columns(
                [[sx, 0.0, 0.0], [0.0, sy, 0.0], [0.0, 0.0, sz]],
                origin_lps_mm,
            ),
        }
    }

    /// World position of the centre of voxel 0.
    pub fn origin_lps_mm(&self) -> Vec3 {
        self.world_from_voxel.translation
    }

    /// Unit direction of voxel axis `axis` in LPS.
    pub fn direction(&self, axis: usize) -> Vec3 {
        let column = self.world_from_voxel.column(axis);
        let length = norm(column);
        if length == 0.0 {
            return column;
        }
        [column[0] / length, column[1] / length, column[2] / length]
    }

    /// Angle between the z axis and the normal of the x/y plane, degrees (0 without tilt).
    pub fn tilt_deg(&self) -> f64 {
        let normal = crate::geometry::cross(self.direction(0), self.direction(1));
        // Either handedness: a grid whose slices run against the rows' normal is not tilted.
        dot(normal, self.direction(2))
            .abs()
            .clamp(-1.0, 1.0)
            .acos()
            .to_degrees()
    }

    pub fn voxel_count(&self) -> usize {
        self.size.iter().product()
    }

    /// This geometry with the axes in `flips` (`[x, y, z]`) reversed: voxel `i` becomes
    /// `n - 1 - i`, at the same place in the patient.
    pub fn flipped(&self, flips: [bool; 3]) -> Self {
        let w = &self.world_from_voxel;
        let mut translation = w.translation;
        let columns = std::array::from_fn(|a| {
            let column = w.column(a);
            if !flips[a] {
                return column;
            }
            let last = self.size[a].saturating_sub(1) as f64;
            for (t, c) in translation.iter_mut().zip(column) {
                *t += c * last;
            }
            crate::geometry::scale(column, -1.0)
        });
        Self {
            size: self.size,
            spacing_mm: self.spacing_mm,
            world_from_voxel: Affine3::from_columns(columns, translation),
        }
    }

    /// Per axis, whether it runs toward R, A or I along the patient axis it is nearest: the
    /// flips that put a volume in DICOM's usual voxel order (columns to the left, rows to the
    /// back, slices up), without permuting axes.
    pub fn flips_to_lps(&self) -> [bool; 3] {
        std::array::from_fn(|a| {
            let d = self.direction(a);
            let dominant = (0..3)
                .max_by(|i, j| d[*i].abs().total_cmp(&d[*j].abs()))
                .unwrap_or(a);
            d[dominant] < 0.0
        })
    }

    /// The extent formatted `XxYxZ`.
    pub fn size_label(&self) -> String {
        format_size(self.size)
    }
}

/// `XxYxZ`, the project's way of writing a size.
pub fn format_size(size: [usize; 3]) -> String {
    format!("{}x{}x{}", size[0], size[1], size[2])
}

/// What a viewer shows about where a volume came from.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SeriesInfo {
    pub series_uid: String,
    pub study_uid: String,
    pub modality: String,
    pub series_description: String,
    pub series_number: Option<i64>,
    pub patient_name: String,
    pub patient_id: String,
    pub study_date: String,
    pub study_description: String,
    pub manufacturer: String,
    /// Window from the files (centre, width in HU), when they carry one.
    pub window_hu: Option<(f64, f64)>,
    pub slice_thickness_mm: Option<f64>,
    /// The frame of reference the slices' positions are in (what an SR's coordinates cite).
    #[serde(default)]
    pub frame_of_reference_uid: String,
    /// Patient and study attributes as the files carry them, for objects derived from the
    /// study (an SR must repeat them verbatim to be filed with it).
    #[serde(default)]
    pub identity: StudyIdentity,
}

/// The Patient and General Study attributes a derived object copies from its source,
/// verbatim (names keep DICOM's `^` separators; dates are `YYYYMMDD`). Empty when absent.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StudyIdentity {
    pub patient_name: String,
    pub patient_id: String,
    pub patient_birth_date: String,
    pub patient_sex: String,
    pub study_date: String,
    pub study_time: String,
    pub study_id: String,
    pub accession_number: String,
    pub referring_physician_name: String,
}

/// What an object derived from a series (a report, an SR) must cite to be filed with it:
/// study, series, frame of reference, patient and study attributes, and the instances.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeriesSource {
    pub study_uid: String,
    pub series_uid: String,
    pub frame_of_reference_uid: String,
    pub modality: String,
    pub study_description: String,
    pub identity: StudyIdentity,
    pub instances: Vec<SourceInstance>,
    /// Unit vectors of the volume's x, y and z axes in LPS: the axes a detection's
    /// `size_mm` is measured along.
    pub axes_lps: [Vec3; 3],
}

/// One file (SOP instance) a volume was made from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceInstance {
    pub sop_class_uid: String,
    pub sop_instance_uid: String,
}

/// A loaded volume: voxels, geometry, provenance and what was odd about it.
#[derive(Debug, Clone)]
pub struct Volume {
    pub voxels: Voxels,
    pub geometry: Geometry,
    pub info: SeriesInfo,
    /// Things a reader should know (uneven spacing, interpolated slices, tilt...).
    pub warnings: Vec<String>,
    /// Slices no file provided, interpolated because gaps were allowed (empty otherwise).
    pub filled_slices: Vec<FilledSlice>,
    /// The files whose pixels are in the volume, in slice order, each once (empty for a
    /// volume that never came from files).
    pub instances: Vec<SourceInstance>,
}

impl Volume {
    /// This volume with the axes in `flips` reversed (voxels and geometry together, so every
    /// voxel keeps its place in the patient), or `None` when none is.
    pub fn flipped(&self, flips: [bool; 3]) -> Option<Self> {
        if !flips.contains(&true) {
            return None;
        }
        let voxels = match &self.voxels {
            Voxels::I16(v) => Voxels::I16(reversed(v, flips)),
            Voxels::F32(v) => Voxels::F32(reversed(v, flips)),
        };
        Some(Self {
            voxels,
            geometry: self.geometry.flipped(flips),
            info: self.info.clone(),
            warnings: self.warnings.clone(),
            // The source's slice indices do not apply to the new order; the warnings name them.
            filled_slices: Vec::new(),
            instances: self.instances.clone(),
        })
    }

    /// What a derived object cites: see [`SeriesSource`].
    pub fn source(&self) -> SeriesSource {
        SeriesSource {
            study_uid: self.info.study_uid.clone(),
            series_uid: self.info.series_uid.clone(),
            frame_of_reference_uid: self.info.frame_of_reference_uid.clone(),
            modality: self.info.modality.clone(),
            study_description: self.info.study_description.clone(),
            identity: self.info.identity.clone(),
            instances: self.instances.clone(),
            axes_lps: std::array::from_fn(|axis| self.geometry.direction(axis)),
        }
    }
}

/// `array` (`[z, y, x]`) reversed along the axes in `flips` (`[x, y, z]`), in standard layout.
fn reversed<T: Clone>(array: &Array3<T>, flips: [bool; 3]) -> Array3<T> {
    let mut view = array.view();
    for (a, flip) in flips.iter().enumerate() {
        if *flip {
            view.invert_axis(ndarray::Axis(2 - a));
        }
    }
    view.as_standard_layout().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_aligned_geometry_maps_voxels_to_mm() {
        let g = Geometry::axis_aligned([4, 5, 6], [0.5, 0.5, 2.0], [-10.0, -20.0, 30.0]);
        assert_eq!(
            g.world_from_voxel.apply([2.0, 4.0, 3.0]),
            [-9.0, -18.0, 36.0]
        );
        assert_eq!(g.size_label(), "4x5x6");
        assert_eq!(g.tilt_deg(), 0.0);
        assert_eq!(g.voxel_count(), 120);
        // Rows reversed (as a NIfTI often stores them): the same voxels, back in LPS order,
        // and still no tilt (a left-handed grid is not a tilted one).
        let f = g.flipped([false, true, false]);
        assert_eq!(f.tilt_deg(), 0.0);
        assert_eq!(f.flips_to_lps(), [false, true, false]);
        assert_eq!(
            f.world_from_voxel.apply([2.0, 0.0, 3.0]),
            g.world_from_voxel.apply([2.0, 4.0, 3.0])
        );
        assert_eq!(f.flipped([false, true, false]), g);
    }

    #[test]
    fn voxels_follow_the_flip() {
        let a = Array3::from_shape_fn((2, 3, 4), |(z, y, x)| (100 * z + 10 * y + x) as i16);
        let r = reversed(&a, [true, false, true]);
        assert_eq!(r[[0, 0, 0]], a[[1, 0, 3]]);
        assert_eq!(r[[1, 2, 3]], a[[0, 2, 0]]);
        assert!(r.is_standard_layout());
    }

    #[test]
    fn voxels_report_xyz_size_and_values() {
        let mut a = Array3::<i16>::zeros((3, 2, 4));
        a[[2, 1, 3]] = -1000;
        let v = Voxels::I16(a);
        assert_eq!(v.size(), [4, 2, 3]);
        assert_eq!(v.hu_at([3, 1, 2]), Some(-1000.0));
        assert_eq!(v.hu_at([4, 1, 2]), None);
    }
}
