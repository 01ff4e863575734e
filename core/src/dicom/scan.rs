//! Walks a file or folder tree, reads every header, and groups images into series.
//!
//! Grouping follows 3D Slicer and Weasis: SeriesInstanceUID first, then split on orientation,
//! image size and scout (LOCALIZER) images, so that one series UID holding a scout and an axial
//! stack gives two candidate volumes. Nothing found is dropped silently: every file is either
//! in a series or in the report's `skipped` list with a reason.

use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::Serialize;

use super::DicomError;
use super::header::{FileHeader, NotAnImage, read_header};

/// Orientation cosines closer than this belong to the same stack.
const ORIENTATION_TOLERANCE: f64 = 1e-3;

type HeaderResult = Result<Result<FileHeader, NotAnImage>, DicomError>;

/// A file that is not part of any series, and why.
#[derive(Debug, Clone, Serialize)]
pub struct Skipped {
    pub path: PathBuf,
    pub reason: String,
}

/// Image files that can form one volume.
#[derive(Debug, Clone)]
pub struct SeriesFiles {
    /// Files sorted by path; their frames are sorted geometrically by `layout`.
    pub files: Vec<FileHeader>,
    /// Set when the series UID was split into several stacks: what this part is.
    pub split_note: Option<String>,
}

impl SeriesFiles {
    pub fn first(&self) -> &FileHeader {
        // Invariant: a group is created with its first file and never emptied.
        &self.files[0]
    }

    pub fn frame_count(&self) -> usize {
        self.files.iter().map(|f| f.frames.len()).sum()
    }
}

/// Everything a scan found.
#[derive(Debug, Clone, Default)]
pub struct ScanReport {
    pub root: PathBuf,
    pub files_seen: usize,
    pub series: Vec<SeriesFiles>,
    pub skipped: Vec<Skipped>,
}

/// Scans `path` (a file or a folder, recursively) for DICOM image series.
///
/// Unreadable or malformed DICOM files are reported in `skipped` with the reason; only a path
/// that does not exist or cannot be listed is an error.
pub fn scan(path: &Path) -> Result<ScanReport, DicomError> {
    let mut files = Vec::new();
    collect_files(path, &mut files)?;
    files.sort();
    let results: Vec<(PathBuf, HeaderResult)> = files
        .par_iter()
        .map(|file| (file.clone(), read_header(file)))
        .collect();

    let mut report = ScanReport {
        root: path.to_path_buf(),
        files_seen: files.len(),
        ..ScanReport::default()
    };
    let mut headers = Vec::new();
    for (file, result) in results {
        match result {
            Ok(Ok(header)) => headers.push(header),
            Ok(Err(NotAnImage::NotDicom(reason) | NotAnImage::NoPixels(reason))) => {
                report.skipped.push(Skipped { path: file, reason });
            }
            Err(error) => report.skipped.push(Skipped {
                path: file,
                reason: error.reason(),
            }),
        }
    }
    report.series = group(headers);
    Ok(report)
}

fn collect_files(path: &Path, out: &mut Vec<PathBuf>) -> Result<(), DicomError> {
    let io_error = |source| DicomError::Io {
        path: path.to_path_buf(),
        source,
    };
    let meta = std::fs::metadata(path).map_err(io_error)?;
    if meta.is_file() {
        out.push(path.to_path_buf());
        return Ok(());
    }
    for entry in std::fs::read_dir(path).map_err(io_error)? {
        let entry = entry.map_err(io_error)?;
        let child = entry.path();
        let file_type = entry.file_type().map_err(io_error)?;
        if file_type.is_dir() {
            collect_files(&child, out)?;
        } else if file_type.is_file() || file_type.is_symlink() && child.is_file() {
            out.push(child);
        }
    }
    Ok(())
}

/// Groups headers into stacks; deterministic for a given (path-sorted) input.
fn group(headers: Vec<FileHeader>) -> Vec<SeriesFiles> {
    let mut groups: Vec<SeriesFiles> = Vec::new();
    for header in headers {
        let home = groups.iter_mut().find(|g| same_stack(g.first(), &header));
        match home {
            Some(g) => g.files.push(header),
            None => groups.push(SeriesFiles {
                files: vec![header],
                split_note: None,
            }),
        }
    }
    // Name the parts of a series UID that was split, so a reader sees why there are several.
    for i in 0..groups.len() {
        let uid = groups[i].first().info.series_uid.clone();
        let parts = groups
            .iter()
            .filter(|g| g.first().info.series_uid == uid)
            .count();
        if parts > 1 {
            let first = groups[i].first();
            let kind = if first.is_localizer() {
                "scout/localizer"
            } else {
                "stack"
            };
            let o = first.frames[0].orientation;
            groups[i].split_note = Some(format!(
                "series UID split into {parts} parts: this {kind} is {}x{} with orientation [{:.3},{:.3},{:.3},{:.3},{:.3},{:.3}]",
                first.columns, first.rows, o[0], o[1], o[2], o[3], o[4], o[5]
            ));
        }
    }
    groups
}

/// Headers always hold at least one frame (`read_header` refuses files it cannot place).
fn same_stack(a: &FileHeader, b: &FileHeader) -> bool {
    a.info.series_uid == b.info.series_uid
        && a.rows == b.rows
        && a.columns == b.columns
        && a.is_localizer() == b.is_localizer()
        && a.frames[0]
            .orientation
            .iter()
            .zip(b.frames[0].orientation.iter())
            .all(|(x, y)| (x - y).abs() < ORIENTATION_TOLERANCE)
}
