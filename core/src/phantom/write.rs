//! Writes a phantom as a DICOM CT series (one file per slice) plus `truth.json`.

use std::path::Path;

use ndarray::Axis;
use rayon::prelude::*;

use super::{Phantom, PhantomError};
use tessera_dicom::dicom::write::{CtSlice, PixelEncoding, write_ct_slice};
use tessera_dicom::volume::Voxels;

/// Name of the ground-truth file beside the slices.
pub const TRUTH_FILE: &str = "truth.json";

/// Stored value = HU + 1024, as most CT scanners store it.
const RESCALE_INTERCEPT: f64 = -1024.0;

/// Writes `phantom` into `dir` (created if needed): `IMG00001.dcm`... and `truth.json`.
pub fn write_series(phantom: &Phantom, dir: &Path) -> Result<(), PhantomError> {
    let io = |source| PhantomError::Io {
        path: dir.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(dir).map_err(io)?;
    let volume = &phantom.volume;
    let Voxels::I16(voxels) = &volume.voxels else {
        // generate() only makes i16 volumes; f32 ones would need a rescale of their own.
        return Err(io(std::io::Error::other("phantom voxels are not i16")));
    };
    let geometry = &volume.geometry;
    let [nx, ny, _] = geometry.size;
    let (columns, rows) = (u16::try_from(nx), u16::try_from(ny));
    let (Ok(columns), Ok(rows)) = (columns, rows) else {
        return Err(io(std::io::Error::other(
            "slices over 65535 voxels wide cannot be DICOM",
        )));
    };
    if volume.instances.len() != geometry.size[2] {
        return Err(io(std::io::Error::other(
            "phantom volume lists fewer instances than slices",
        )));
    }
    voxels
        .axis_iter(Axis(0))
        .into_par_iter()
        .enumerate()
        .try_for_each(|(z, slice)| {
            let stored: Vec<i16> = slice
                .iter()
                .map(|hu| hu.saturating_sub(RESCALE_INTERCEPT as i16))
                .collect();
            let position = geometry.world_from_voxel.apply([0.0, 0.0, z as f64]);
            write_ct_slice(
                &dir.join(format!("IMG{:05}.dcm", z + 1)),
                &CtSlice {
                    info: &volume.info,
                    sop_instance_uid: volume.instances[z].sop_instance_uid.clone(),
                    instance_number: z as i64 + 1,
                    position_lps_mm: position,
                    orientation: [1.0, 0.0, 0.0, 0.0, 1.0, 0.0],
                    pixel_spacing_mm: [geometry.spacing_mm[0], geometry.spacing_mm[1]],
                    slice_thickness_mm: geometry.spacing_mm[2],
                    columns,
                    rows,
                    stored: &stored,
                    rescale_slope: 1.0,
                    rescale_intercept: RESCALE_INTERCEPT,
                    image_type: "ORIGINAL\\PRIMARY\\AXIAL",
                    encoding: PixelEncoding::Native,
                },
            )
        })?;
    let json =
        serde_json::to_vec_pretty(&phantom.truth).map_err(|e| io(std::io::Error::other(e)))?;
    tessera_dicom::io::write_atomic(&dir.join(TRUTH_FILE), &json).map_err(io)
}
