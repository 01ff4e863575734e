//! A run's findings, and a reader's decisions on them, as a DICOM Comprehensive 3D SR that a
//! PACS, OHIF or Slicer files with the study: TID 1500 (Measurement Report), one TID 1411
//! measurement group per finding with its region as a SCOORD3D ellipsoid in the series' frame
//! of reference, its size, the detector's certainty and the algorithm (TID 4019), and the
//! reader's decision. [`findings`] reads such a report back.
//!
//! It never modifies the study: the SR is a new object in a new series of the same study.

mod build;
pub mod codes;
mod read;

use std::path::Path;

use sha2::{Digest, Sha256};

pub use read::{SrFinding, SrMeasurements, findings};

use crate::report::DetectionReport;
use crate::review::Review;
use tessera_dicom::dicom::sr::SrDocument;

/// Which findings go into the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Selection {
    /// Those the reader accepted (and drew): what goes back to the PACS after a review.
    AcceptedOnly,
    /// Every detection (and every drawn finding), each with its decision when it has one.
    All,
}

/// The new object's identity and time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SrOptions {
    pub selection: Selection,
    pub sop_instance_uid: String,
    pub series_uid: String,
    /// DICOM DA and TM.
    pub content_date: String,
    pub content_time: String,
}

impl SrOptions {
    /// New UIDs, stamped with the local time now.
    pub fn now(selection: Selection) -> Self {
        let now = chrono::Local::now();
        Self {
            selection,
            sop_instance_uid: tessera_dicom::dicom::write::new_uid(),
            series_uid: tessera_dicom::dicom::write::new_uid(),
            content_date: now.format("%Y%m%d").to_string(),
            content_time: now.format("%H%M%S").to_string(),
        }
    }
}

/// The local time now as DICOM DT (`YYYYMMDDHHMMSS`), for review stamps.
pub fn now_dt() -> String {
    chrono::Local::now().format("%Y%m%d%H%M%S").to_string()
}

#[derive(Debug, thiserror::Error)]
pub enum SrError {
    #[error(
        "the detections file does not record its study's frame of reference and instances (it was written before Tessera recorded them): run `tessera detect` again"
    )]
    NoSource,
    #[error(
        "the study was not read from DICOM (a NIfTI or MetaImage volume): an SR cites the DICOM instances it measured, and there are none to cite. Run detect on the DICOM series to export an SR; det.json and the CSV hold the findings"
    )]
    NoDicomSource,
    #[error(
        "series {series} has no FrameOfReferenceUID: an SR's 3D coordinates cannot be placed without one"
    )]
    NoFrameOfReference { series: String },
    #[error("'accepted only' needs a review: give the review (--review) or export all findings")]
    AcceptedOnlyWithoutReview,
    #[error(transparent)]
    Write(#[from] tessera_dicom::dicom::write::WriteError),
    #[error("cannot encode the SR: {0}")]
    Encode(String),
    #[error(transparent)]
    Read(#[from] tessera_dicom::dicom::DicomError),
    #[error("{} is not a Tessera-readable measurement report: {reason}", path.display())]
    NotAReport {
        path: std::path::PathBuf,
        reason: String,
    },
}

/// The SR document for `report` (and `review`), ready to write or send.
pub fn document<'a>(
    report: &'a DetectionReport,
    review: Option<&Review>,
    options: &SrOptions,
) -> Result<(SrDocument<'a>, usize), SrError> {
    let source = report.source.as_ref().ok_or(SrError::NoSource)?;
    if source.instances.is_empty() {
        return Err(SrError::NoDicomSource);
    }
    let (root, complete) = build::tree(report, review, options.selection)?;
    let count = root
        .child(&codes::imaging_measurements())
        .map_or(0, |m| m.children.len());
    let doc = SrDocument {
        source,
        sop_instance_uid: options.sop_instance_uid.clone(),
        series_uid: options.series_uid.clone(),
        series_number: 9001,
        instance_number: 1,
        series_description: format!("Tessera findings ({})", report.model.name),
        manufacturer: "Tessera".into(),
        model_name: report.model.name.clone(),
        software_versions: format!("{} {}", report.tool.name, report.tool.version),
        content_date: options.content_date.clone(),
        content_time: options.content_time.clone(),
        complete,
        private_schemes: vec![(
            codes::TESSERA_SCHEME.into(),
            "Tessera review decisions".into(),
        )],
        root,
    };
    Ok((doc, count))
}

/// Writes the SR to `path` atomically; returns how many findings it holds.
pub fn write(
    path: &Path,
    report: &DetectionReport,
    review: Option<&Review>,
    options: &SrOptions,
) -> Result<usize, SrError> {
    let (doc, count) = document(report, review, options)?;
    tessera_dicom::dicom::sr::write_sr(path, &doc)?;
    Ok(count)
}

/// A stable UID for something identified by a SHA-256 hex digest (the model, as the device
/// observer): its first 128 bits under `2.25`.
pub fn uid_from_hash(sha256_hex: &str) -> String {
    let digest = Sha256::digest(sha256_hex.as_bytes());
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    format!("2.25.{}", u128::from_be_bytes(bytes))
}
