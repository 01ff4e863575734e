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
use super::header::{FileHeader, HeaderOutcome, NotAnImage, read_header};
use crate::geometry::Vec3;
use crate::io::file_kind;

/// Orientation cosines closer than this belong to the same stack.
const ORIENTATION_TOLERANCE: f64 = 1e-3;

/// Why a file is not part of any series.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipKind {
    /// Not DICOM at all (a reader's XML, a README): expected in study folders.
    NotDicom,
    /// DICOM without pixels (a DICOMDIR, a report).
    NotAnImage,
    /// A DICOM image that cannot be read or makes no sense: possibly a missing slice.
    Unreadable,
}

/// A file that is not part of any series, and why.
#[derive(Debug, Clone, Serialize)]
pub struct Skipped {
    pub path: PathBuf,
    pub reason: String,
    pub kind: SkipKind,
    /// The series it says it belongs to, when that much could be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub series_uid: Option<String>,
    /// Where it says it lies, when that much could be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub position_lps_mm: Option<Vec3>,
}

impl Skipped {
    /// A file of a series that could not be used, without a known position.
    pub fn unreadable(path: PathBuf, reason: String) -> Self {
        Self {
            path,
            reason,
            kind: SkipKind::Unreadable,
            series_uid: None,
            position_lps_mm: None,
        }
    }
}

/// Image files that can form one volume.
#[derive(Debug, Clone)]
pub struct SeriesFiles {
    /// Files sorted by path; their frames are sorted geometrically by `layout`.
    pub files: Vec<FileHeader>,
    /// Set when the series UID was split into several stacks: what this part is.
    pub split_note: Option<String>,
    /// Image files that could not be read and may belong here: those that name this series,
    /// and those that name none but sit in the same folder as one of its files.
    pub unreadable: Vec<Skipped>,
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
    let results: Vec<(PathBuf, HeaderOutcome)> = files
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
        let skipped = |reason, kind| Skipped {
            path: file.clone(),
            reason,
            kind,
            series_uid: None,
            position_lps_mm: None,
        };
        match result {
            HeaderOutcome::Image(header) => headers.push(*header),
            HeaderOutcome::NotAnImage(NotAnImage::NotDicom(reason)) => {
                report.skipped.push(skipped(reason, SkipKind::NotDicom));
            }
            HeaderOutcome::NotAnImage(NotAnImage::NoPixels(reason)) => {
                report.skipped.push(skipped(reason, SkipKind::NotAnImage));
            }
            HeaderOutcome::Unreadable(u) => report.skipped.push(Skipped {
                series_uid: u.series_uid,
                position_lps_mm: u.position_lps_mm,
                ..skipped(u.reason, SkipKind::Unreadable)
            }),
        }
    }
    report.series = group(headers);
    attribute_unreadable(&mut report);
    Ok(report)
}

/// Gives each series the unreadable files that may be its missing slices.
fn attribute_unreadable(report: &mut ScanReport) {
    for series in &mut report.series {
        let uid = series.first().info.series_uid.clone();
        let folders: Vec<&Path> = series
            .files
            .iter()
            .filter_map(|f| f.path.parent())
            .collect();
        series.unreadable = report
            .skipped
            .iter()
            .filter(|s| s.kind == SkipKind::Unreadable)
            .filter(|s| match &s.series_uid {
                Some(u) => *u == uid,
                None => s.path.parent().is_some_and(|p| folders.contains(&p)),
            })
            .cloned()
            .collect();
    }
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
    if !meta.is_dir() {
        return Err(DicomError::NotAFileOrFolder {
            path: path.to_path_buf(),
            kind: file_kind(&meta),
        });
    }
    for entry in std::fs::read_dir(path).map_err(io_error)? {
        let entry = entry.map_err(io_error)?;
        let child = entry.path();
        let file_type = entry.file_type().map_err(io_error)?;
        if file_type.is_dir() {
            collect_files(&child, out)?;
        } else if !file_type.is_symlink() || child.is_file() {
            // Regular files, and special ones (FIFOs, sockets) so that they are reported as
            // skipped, by kind, rather than dropped without a word.
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
                unreadable: Vec::new(),
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
