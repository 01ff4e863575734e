//! DICOM CT series: scan a folder, group into series, sort the slices, decode to a [`Volume`].
//!
//! This module reads files and never writes them (the writer in [`write`](mod@write) makes new files only).
//! Every failure names the file or series and the reason.
//!
//! ```no_run
//! use tessera_dicom::dicom;
//!
//! let report = dicom::scan("path/to/study".as_ref())?;
//! let options = dicom::LoadOptions::default(); // refuse gaps and unreadable slices
//! for series in &report.series {
//!     let layout = dicom::layout(series, options)?;
//!     println!("{} slices, warnings: {:?}", layout.slices.len(), layout.warnings);
//! }
//! let volume = dicom::load_series(&report.series[0], options)?;
//! println!("{}", volume.geometry.size_label());
//! # Ok::<(), tessera_dicom::dicom::DicomError>(())
//! ```

mod decode;
mod guard;
mod header;
mod layout;
mod part10;
mod scan;
pub mod sr;
pub mod write;

use std::path::PathBuf;

pub use decode::{check_transfer_syntaxes, decode};
pub use header::{FileHeader, FrameHeader};
pub use header::{MAX_FRAMES, MAX_POSITION_MM, MAX_SIDE, MAX_SPACING_MM, MIN_SPACING_MM};
pub use layout::{FrameRef, LoadOptions, SeriesLayout, SliceSource, layout, series_name};
pub use scan::{ScanReport, SeriesFiles, SkipKind, Skipped, scan};

use crate::volume::Volume;

/// Why a file or series could not be read.
#[derive(Debug, thiserror::Error)]
pub enum DicomError {
    #[error("cannot read {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot parse DICOM file {}: {reason}", path.display())]
    Parse { path: PathBuf, reason: String },
    #[error("{} lacks {attribute}", path.display())]
    MissingAttribute {
        path: PathBuf,
        attribute: &'static str,
    },
    #[error("unsupported transfer syntax {name} ({uid}) in {}", path.display())]
    UnsupportedTransferSyntax {
        name: String,
        uid: String,
        path: PathBuf,
    },
    #[error("cannot decode pixel data of {}: {reason}", path.display())]
    Decode { path: PathBuf, reason: String },
    #[error("{series} cannot be a volume: {reason}")]
    NotAVolume { series: String, reason: String },
    #[error(
        "{series} has missing or unreadable slices: {detail}. Nothing is filled in unless asked: allow gaps (--allow-gaps; in the viewer, 'Allow gaps' when opening) to interpolate over them"
    )]
    MissingSlices { series: String, detail: String },
    #[error("{series}: {} file(s) could not be decoded: {}", files.len(), describe_files(files))]
    Undecodable {
        series: String,
        files: Vec<(PathBuf, String)>,
    },
    #[error("{} is {kind}, not a file or folder", path.display())]
    NotAFileOrFolder { path: PathBuf, kind: &'static str },
    #[error("no DICOM image series found in {} ({files} file(s) looked at{})", path.display(), skipped_summary(skipped))]
    NoSeries {
        path: PathBuf,
        files: usize,
        skipped: Vec<Skipped>,
    },
    #[error("no series with UID {uid} in {}", path.display())]
    SeriesNotFound { uid: String, path: PathBuf },
    /// A NIfTI or MetaImage file opened through [`crate::study::open`].
    #[error(transparent)]
    ImageFile(#[from] crate::image_file::ImageFileError),
}

impl DicomError {
    /// The reason alone, without the file name (for lists that already show the file).
    pub fn reason(&self) -> String {
        match self {
            Self::Io { source, .. } => source.to_string(),
            Self::Parse { reason, .. } | Self::Decode { reason, .. } => reason.clone(),
            Self::ImageFile(e) => e.reason.clone(),
            Self::MissingAttribute { attribute, .. } => format!("lacks {attribute}"),
            Self::UnsupportedTransferSyntax { name, uid, .. } => {
                format!("unsupported transfer syntax {name} ({uid})")
            }
            other => other.to_string(),
        }
    }
}

fn describe_files(files: &[(PathBuf, String)]) -> String {
    files
        .iter()
        .map(|(path, reason)| format!("{}: {reason}", path.display()))
        .collect::<Vec<_>>()
        .join("; ")
}

fn skipped_summary(skipped: &[Skipped]) -> String {
    match skipped.first() {
        None => String::new(),
        Some(s) => format!(
            "; e.g. {}: {}{}",
            s.path.display(),
            s.reason,
            if skipped.len() > 1 {
                format!(" (+{} more skipped)", skipped.len() - 1)
            } else {
                String::new()
            }
        ),
    }
}

/// Lays out and decodes one series.
///
/// Files that fail to decode refuse the series, all named; with `options.allow_gaps` they are
/// left out and interpolated over like any other gap, and listed in the volume's warnings.
pub fn load_series(series: &SeriesFiles, options: LoadOptions) -> Result<Volume, DicomError> {
    let plan = layout(series, options)?;
    match decode(series, &plan) {
        Err(DicomError::Undecodable {
            series: name,
            files,
        }) if options.allow_gaps && files.len() < series.files.len() => {
            let mut rest = series.clone();
            rest.files
                .retain(|f| !files.iter().any(|(p, _)| *p == f.path));
            rest.unreadable
                .extend(files.into_iter().map(|(path, reason)| {
                    let position = series
                        .files
                        .iter()
                        .find(|f| f.path == path)
                        .map(|f| f.frames[0].position_lps_mm);
                    Skipped {
                        position_lps_mm: position,
                        series_uid: Some(series.first().info.series_uid.clone()),
                        ..Skipped::unreadable(path, format!("cannot decode: {reason} ({name})"))
                    }
                }));
            let plan = layout(&rest, options)?;
            decode(&rest, &plan)
        }
        other => other,
    }
}

/// Scans `path` and loads one series: the one with `series_uid`, or else the largest
/// non-localizer stack (most frames), which is what a reader opening a study folder wants.
pub fn open(
    path: &std::path::Path,
    series_uid: Option<&str>,
    options: LoadOptions,
) -> Result<(Volume, ScanReport), DicomError> {
    let report = scan(path)?;
    let volume = load_series(choose(&report, path, series_uid)?, options)?;
    Ok((volume, report))
}

/// The geometry [`open`] would give, from the headers alone (no pixel is decoded).
pub fn open_geometry(
    path: &std::path::Path,
    series_uid: Option<&str>,
    options: LoadOptions,
) -> Result<crate::volume::Geometry, DicomError> {
    let report = scan(path)?;
    Ok(layout(choose(&report, path, series_uid)?, options)?.geometry)
}

/// The series with `series_uid`, or else the [`largest_stack`].
pub fn choose<'a>(
    report: &'a ScanReport,
    path: &std::path::Path,
    series_uid: Option<&str>,
) -> Result<&'a SeriesFiles, DicomError> {
    match series_uid {
        Some(uid) => report
            .series
            .iter()
            .find(|s| s.first().info.series_uid == uid)
            .ok_or_else(|| DicomError::SeriesNotFound {
                uid: uid.to_string(),
                path: path.to_path_buf(),
            }),
        None => largest_stack(report).ok_or_else(|| DicomError::NoSeries {
            path: path.to_path_buf(),
            files: report.files_seen,
            skipped: report.skipped.clone(),
        }),
    }
}

/// The stack a reader most likely wants: not a scout, most frames, first in scan order on ties.
pub fn largest_stack(report: &ScanReport) -> Option<&SeriesFiles> {
    report
        .series
        .iter()
        .filter(|s| !s.first().is_localizer())
        .reduce(|best, s| {
            if s.frame_count() > best.frame_count() {
                s
            } else {
                best
            }
        })
        .or_else(|| report.series.first())
}
