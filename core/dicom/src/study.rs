//! What a user opens: a DICOM folder or file (through [`dicom`](crate::dicom)), or one NIfTI or
//! MetaImage volume (through [`image_file`](crate::image_file)), told apart by the file's name.
//! The CLI's commands and the viewer open studies through here.

use std::path::{Path, PathBuf};

use crate::dicom::{self, DicomError, LoadOptions, ScanReport};
use crate::image_file;
use crate::volume::Volume;

/// Opens `path`: a NIfTI or MetaImage file as its one volume (the scan report then lists no
/// DICOM series), anything else as [`dicom::open`] does.
pub fn open(
    path: &Path,
    series_uid: Option<&str>,
    options: LoadOptions,
) -> Result<(Volume, ScanReport), DicomError> {
    if image_file::format_of(path).is_none() {
        return dicom::open(path, series_uid, options);
    }
    let volume = image_file::read(path)?;
    if let Some(uid) = series_uid
        && uid != volume.info.series_uid
    {
        return Err(DicomError::SeriesNotFound {
            uid: uid.to_string(),
            path: path.to_path_buf(),
        });
    }
    let report = ScanReport {
        root: path.to_path_buf(),
        files_seen: 1,
        ..ScanReport::default()
    };
    Ok((volume, report))
}

/// The geometry [`open`] would give: from the headers alone for DICOM
/// ([`dicom::open_geometry`]); a volume file is read whole (its header is the small part).
pub fn open_geometry(
    path: &Path,
    series_uid: Option<&str>,
    options: LoadOptions,
) -> Result<crate::volume::Geometry, DicomError> {
    if image_file::format_of(path).is_none() {
        return dicom::open_geometry(path, series_uid, options);
    }
    Ok(open(path, series_uid, options)?.0.geometry)
}

/// Every file opening `path` read: the path, its DICOM files (and those skipped), or a
/// MetaImage header's data file. Outputs must not replace any of them.
pub fn input_files(path: &Path, report: &ScanReport) -> Vec<PathBuf> {
    let mut inputs = image_file::files_of(path);
    for series in &report.series {
        inputs.extend(series.files.iter().map(|f| f.path.clone()));
    }
    inputs.extend(report.skipped.iter().map(|s| s.path.clone()));
    inputs
}
