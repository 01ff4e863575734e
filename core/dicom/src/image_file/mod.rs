//! One-file volumes the peers' users hold: NIfTI-1 (`.nii`, `.nii.gz`; MONAI, nnU-Net) and
//! MetaImage (`.mhd` + its data file, or `.mha`; LUNA16's own format), read into a [`Volume`]
//! with their geometry in DICOM's patient frame (LPS, millimetres).
//!
//! Every size a header gives is checked before anything is allocated (sides, voxel count,
//! spacing, position, the data's length), as the DICOM reader does. Such a volume cites no DICOM
//! instance, so nothing derived from it can be an SR (`Volume::instances` stays empty).
//!
//! ```no_run
//! use tessera_dicom::image_file;
//!
//! let volume = image_file::read("scan.nii.gz".as_ref())?;
//! println!("{} at {:?} mm", volume.geometry.size_label(), volume.geometry.spacing_mm);
//! # Ok::<(), image_file::ImageFileError>(())
//! ```

mod metaimage;
mod nifti;
mod samples;

use std::path::{Path, PathBuf};

use crate::dicom::{MAX_POSITION_MM, MAX_SIDE, MAX_SPACING_MM, MIN_SPACING_MM};
use crate::geometry::{Affine3, norm};
use crate::volume::{Geometry, MAX_VOXELS, SeriesInfo, Volume};

use samples::SampleType;

/// The volume formats read besides DICOM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// NIfTI-1, one file (`.nii`), or gzip-compressed (`.nii.gz`).
    Nifti,
    /// MetaImage: a text header (`.mhd`) naming its data file, or both in one (`.mha`).
    MetaImage,
}

impl Format {
    pub fn name(self) -> &'static str {
        match self {
            Self::Nifti => "NIfTI",
            Self::MetaImage => "MetaImage",
        }
    }
}

/// Why a NIfTI or MetaImage file could not be read; every message names the file.
#[derive(Debug, thiserror::Error)]
#[error("cannot read {format} file {}: {reason}", path.display())]
pub struct ImageFileError {
    pub path: PathBuf,
    pub format: &'static str,
    pub reason: String,
}

impl ImageFileError {
    /// The error maker for one file: `fail(reason)` names the file and the format.
    fn maker(path: &Path, format: &'static str) -> impl Fn(String) -> Self {
        let path = path.to_path_buf();
        move |reason| Self {
            path: path.clone(),
            format,
            reason,
        }
    }
}

/// The format `path`'s name says it is (`.nii`, `.nii.gz`, `.mhd`, `.mha`, any case), if any.
pub fn format_of(path: &Path) -> Option<Format> {
    let name = path.file_name()?.to_str()?.to_ascii_lowercase();
    if name.ends_with(".nii") || name.ends_with(".nii.gz") {
        Some(Format::Nifti)
    } else if name.ends_with(".mhd") || name.ends_with(".mha") {
        Some(Format::MetaImage)
    } else {
        None
    }
}

/// Reads the volume in `path`, whose format its name gives (see [`format_of`]), in DICOM's
/// usual voxel order ([`Geometry::flips_to_lps`]: a NIfTI's rows often run the other way), so
/// that views, and models trained on DICOM series, see it as they would the series.
pub fn read(path: &Path) -> Result<Volume, ImageFileError> {
    let volume = match format_of(path) {
        Some(Format::Nifti) => nifti::read(path)?,
        Some(Format::MetaImage) => metaimage::read(path)?,
        None => Err(ImageFileError {
            path: path.to_path_buf(),
            format: "volume",
            reason: "the name ends in none of .nii, .nii.gz, .mhd, .mha".into(),
        })?,
    };
    let flips = volume.geometry.flips_to_lps();
    Ok(volume.flipped(flips).unwrap_or(volume))
}

/// The files reading `path` opens: the file itself, and a MetaImage header's data file.
pub fn files_of(path: &Path) -> Vec<PathBuf> {
    let mut files = vec![path.to_path_buf()];
    if format_of(path) == Some(Format::MetaImage)
        && let Ok(Some(data)) = metaimage::data_file(path)
    {
        files.push(data);
    }
    files
}

/// What a header says, before the voxels are read: checked by [`Header::check`].
struct Header {
    /// Voxel counts `[x, y, z]`.
    size: [usize; 3],
    /// Voxel indices to LPS millimetres.
    world_from_voxel: Affine3,
    samples: SampleType,
    big_endian: bool,
    /// `hu = slope * stored + intercept`.
    slope: f64,
    intercept: f64,
}

impl Header {
    /// The bytes the voxels take, once the sizes, spacing and position are checked.
    fn check(&self) -> Result<usize, String> {
        for (axis, side) in ["x", "y", "z"].iter().zip(self.size) {
            if !(1..=MAX_SIDE as usize).contains(&side) {
                return Err(format!(
                    "{side} voxels along {axis}, outside 1 to {MAX_SIDE}"
                ));
            }
        }
        let voxels: usize = self.size.iter().product();
        if voxels > MAX_VOXELS {
            return Err(format!(
                "{voxels} voxels, over the {MAX_VOXELS} a volume may have"
            ));
        }
        for axis in 0..3 {
            let spacing = norm(self.world_from_voxel.column(axis));
            if !(MIN_SPACING_MM..=MAX_SPACING_MM).contains(&spacing) {
                return Err(format!(
                    "a spacing of {spacing} mm along axis {axis}, outside {MIN_SPACING_MM} to {MAX_SPACING_MM} mm"
                ));
            }
        }
        let origin = self.world_from_voxel.translation;
        if !origin.iter().all(|c| c.abs() <= MAX_POSITION_MM) {
            return Err(format!(
                "an origin of {origin:?} mm, not three finite numbers within {MAX_POSITION_MM} mm"
            ));
        }
        if self.world_from_voxel.determinant().abs() < 1e-9 {
            return Err("its axes are not independent (a flat voxel grid)".into());
        }
        if !(self.slope.is_finite() && self.intercept.is_finite()) {
            return Err("a rescale slope or intercept that is not a finite number".into());
        }
        Ok(voxels * self.samples.bytes())
    }

    /// The volume from the voxels' bytes (exactly [`Header::check`]'s count).
    fn volume(
        &self,
        bytes: &[u8],
        info: SeriesInfo,
        warnings: Vec<String>,
    ) -> Result<Volume, String> {
        let spacing_mm = std::array::from_fn(|axis| norm(self.world_from_voxel.column(axis)));
        Ok(Volume {
            voxels: samples::to_voxels(
                bytes,
                self.samples,
                self.big_endian,
                (self.slope, self.intercept),
                self.size,
            )?,
            geometry: Geometry {
                size: self.size,
                spacing_mm,
                world_from_voxel: self.world_from_voxel,
            },
            info,
            warnings,
            filled_slices: Vec::new(),
            instances: Vec::new(),
        })
    }
}

/// Reads exactly `bytes` bytes from `reader`, growing the buffer only as data arrives (a header
/// that lies about the size costs no more memory than the file holds).
fn read_exact_capped(reader: &mut dyn std::io::Read, bytes: usize) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let mut out = Vec::new();
    reader
        .take(bytes as u64)
        .read_to_end(&mut out)
        .map_err(|e| format!("reading the voxels: {e}"))?;
    if out.len() < bytes {
        return Err(format!(
            "the voxels end after {} of the {bytes} bytes the header gives",
            out.len()
        ));
    }
    Ok(out)
}

/// LPS from RAS: NIfTI's world frame has x and y the other way round.
fn lps_from_ras(a: Affine3) -> Affine3 {
    let mut out = a;
    for row in 0..2 {
        out.linear[row] = a.linear[row].map(|v| -v);
        out.translation[row] = -a.translation[row];
    }
    out
}
