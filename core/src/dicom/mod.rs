//! DICOM CT series: scan a folder, group into series, sort the slices, decode to a [`Volume`].
//!
//! This module reads files and never writes them (the writer in [`write`](mod@write) makes new files only).
//! Every failure names the file or series and the reason.
//!
//! ```no_run
//! use tessera_core::dicom;
//!
//! let report = dicom::scan("path/to/study".as_ref())?;
//! for series in &report.series {
//!     let layout = dicom::layout(series)?;
//!     println!("{} slices, warnings: {:?}", layout.slices.len(), layout.warnings);
//! }
//! let volume = dicom::load_series(&report.series[0])?;
//! println!("{}", volume.geometry.size_label());
//! # Ok::<(), tessera_core::dicom::DicomError>(())
//! ```

mod decode;
mod header;
mod layout;
mod scan;
pub mod write;

use std::path::PathBuf;

pub use decode::{check_transfer_syntaxes, decode};
pub use header::{FileHeader, FrameHeader};
pub use layout::{FrameRef, SeriesLayout, SliceSource, layout, series_name};
pub use scan::{ScanReport, SeriesFiles, Skipped, scan};

use crate::volume::Volume;

/// Why a file or series could not be read.
#[derive(Debug, thiserror::Error)]
pub enum DicomError {
    #[error("cannot read {}: {source}", path.display())]
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
    #[error("no DICOM image series found in {} ({files} file(s) looked at{})", path.display(), skipped_summary(skipped))]
    NoSeries {
        path: PathBuf,
        files: usize,
        skipped: Vec<Skipped>,
    },
    #[error("no series with UID {uid} in {}", path.display())]
    SeriesNotFound { uid: String, path: PathBuf },
}

impl DicomError {
    /// The reason alone, without the file name (for lists that already show the file).
    pub fn reason(&self) -> String {
        match self {
            Self::Io { source, .. } => source.to_string(),
            Self::Parse { reason, .. } | Self::Decode { reason, .. } => reason.clone(),
            Self::MissingAttribute { attribute, .. } => format!("lacks {attribute}"),
            Self::UnsupportedTransferSyntax { name, uid, .. } => {
                format!("unsupported transfer syntax {name} ({uid})")
            }
            other => other.to_string(),
        }
    }
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
pub fn load_series(series: &SeriesFiles) -> Result<Volume, DicomError> {
    let layout = layout(series)?;
    decode(series, &layout)
}

/// Scans `path` and loads one series: the one with `series_uid`, or else the largest
/// non-localizer stack (most frames), which is what a reader opening a study folder wants.
pub fn open(
    path: &std::path::Path,
    series_uid: Option<&str>,
) -> Result<(Volume, ScanReport), DicomError> {
    let report = scan(path)?;
    let volume = load_series(choose(&report, path, series_uid)?)?;
    Ok((volume, report))
}

/// The geometry [`open`] would give, from the headers alone (no pixel is decoded).
pub fn open_geometry(
    path: &std::path::Path,
    series_uid: Option<&str>,
) -> Result<crate::volume::Geometry, DicomError> {
    let report = scan(path)?;
    Ok(layout(choose(&report, path, series_uid)?)?.geometry)
}

/// The series with `series_uid`, or else the [`largest_stack`].
fn choose<'a>(
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
