//! A reader's review of one run: a decision per finding, notes, findings the reader added.
//! Kept as `review.json` beside the run's `det.json` (schema `tessera.review/1`) and written
//! atomically; it names the run it belongs to, so it is never applied to another.

use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tessera_dicom::io::{JsonFileError, JsonKind, read_json};

use crate::report::DetectionReport;

/// The schema name and version written into every `review.json`.
pub const SCHEMA: &str = "tessera.review/1";

/// A reader's call on one finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Accepted,
    Rejected,
    Unsure,
}

impl Decision {
    pub const ALL: [Self; 3] = [Self::Accepted, Self::Rejected, Self::Unsure];

    pub fn label(self) -> &'static str {
        match self {
            Self::Accepted => "accepted",
            Self::Rejected => "rejected",
            Self::Unsure => "unsure",
        }
    }
}

/// The decision on one detection of the run (`index` in det.json's `detections`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FindingReview {
    pub index: usize,
    pub decision: Option<Decision>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
    /// When it was decided, DICOM DT (`YYYYMMDDHHMMSS`, local time).
    pub decided_at: String,
    /// The reader's Lung-RADS category, where it differs from the suggestion or confirms it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lung_rads: Option<crate::lungrads::Category>,
    /// The reader's own axes, drawn over the measured ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub axes: Option<crate::measure::AxialAxes>,
}

/// A finding the detector did not report, drawn by the reader.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AddedFinding {
    pub center_lps_mm: [f64; 3],
    pub size_mm: [f64; 3],
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
    pub added_at: String,
    /// Its measurements on the study's voxels, made when it was drawn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measurements: Option<crate::measure::Measurements>,
    /// The reader's Lung-RADS category for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lung_rads: Option<crate::lungrads::Category>,
    /// The reader's call on it once drawn; absent (files from before it was kept): accepted,
    /// since drawing it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<Decision>,
}

impl AddedFinding {
    /// The reader's call on it: drawing one accepts it until the reader decides otherwise.
    pub fn decision(&self) -> Decision {
        self.decision.unwrap_or(Decision::Accepted)
    }

    /// The Lung-RADS category its measurements suggest, in a run whose findings are lung
    /// nodules ([`DetectionReport::suggests_lung_rads`]); `None` when it was not measured.
    pub fn lung_rads_suggestion(&self) -> Option<crate::lungrads::Suggestion> {
        self.measurements.as_ref().map(crate::lungrads::of)
    }

    /// The suggestion it gets in `report`'s run: only in a run of lung nodules.
    pub fn suggestion_in(&self, report: &DetectionReport) -> Option<crate::lungrads::Suggestion> {
        report
            .suggests_lung_rads()
            .then(|| self.lung_rads_suggestion())
            .flatten()
    }

    /// Its category: the reader's, else, in a run of lung nodules, the suggestion; with the
    /// rule when suggested.
    pub fn lung_rads_in(
        &self,
        report: &DetectionReport,
    ) -> Option<(crate::lungrads::Category, Option<String>)> {
        self.lung_rads.map(|c| (c, None)).or_else(|| {
            self.suggestion_in(report)
                .map(|s| (s.category, Some(s.rule)))
        })
    }

    /// Its size: as measured, or the mean of the drawn box's axial sides.
    pub fn mean_diameter_mm(&self) -> f64 {
        self.measurements.as_ref().map_or_else(
            || crate::measure::box_mean_diameter_mm(self.size_mm),
            |m| m.mean_diameter_mm,
        )
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Review {
    pub schema: String,
    /// [`run_id`] of the det.json reviewed.
    pub run_id: String,
    pub series_uid: String,
    pub model_sha256: String,
    /// DICOM PN (`Family^Given`), from the viewer's settings.
    pub reader: String,
    pub findings: Vec<FindingReview>,
    #[serde(default)]
    pub added: Vec<AddedFinding>,
}

/// A review file, as [`read_json`] names and checks it.
pub const KIND: JsonKind = JsonKind {
    what: "a review file",
    schema: Some(SCHEMA),
};

#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    #[error(transparent)]
    Read(#[from] JsonFileError),
    #[error(
        "{} reviews run {found}, not this one ({expected}): the detections differ, so its decisions would land on the wrong findings",
        path.display()
    )]
    OtherRun {
        path: std::path::PathBuf,
        expected: String,
        found: String,
    },
    #[error("{} decides finding {index}, but the run has {count}", path.display())]
    NoSuchFinding {
        path: std::path::PathBuf,
        index: usize,
        count: usize,
    },
    #[error("cannot write {}", path.display())]
    Write {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// A run's identity: the first 16 hex digits of SHA-256 over its series, model and
/// detections (so a rerun that finds the same boxes keeps its review, and any change in
/// them does not).
pub fn run_id(report: &DetectionReport) -> String {
    let mut hasher = Sha256::new();
    hasher.update(report.series_uid.as_bytes());
    hasher.update([0]);
    hasher.update(report.model.sha256.as_bytes());
    hasher.update([0]);
    // Serialising plain data into a Vec cannot fail; an empty hash input would still differ.
    hasher.update(serde_json::to_vec(&report.detections).unwrap_or_default());
    hasher
        .finalize()
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl Review {
    /// An empty review of `report` by `reader`.
    pub fn new(report: &DetectionReport, reader: &str) -> Self {
        Self {
            schema: SCHEMA.into(),
            run_id: run_id(report),
            series_uid: report.series_uid.clone(),
            model_sha256: report.model.sha256.clone(),
            reader: reader.into(),
            findings: Vec::new(),
            added: Vec::new(),
        }
    }

    /// The axes the reader drew for detection `index`, if any.
    pub fn axes_of(&self, index: usize) -> Option<&crate::measure::AxialAxes> {
        self.of(index)?.axes.as_ref()
    }

    /// The review of detection `index`, if any.
    pub fn of(&self, index: usize) -> Option<&FindingReview> {
        self.findings.iter().find(|f| f.index == index)
    }

    /// Sets (or clears, with `None`) the decision on detection `index`, stamped `now`.
    pub fn decide(&mut self, index: usize, decision: Option<Decision>, now: &str) {
        match self.findings.iter_mut().find(|f| f.index == index) {
            Some(f) => {
                f.decision = decision;
                f.decided_at = now.into();
            }
            None => {
                self.findings.push(FindingReview {
                    index,
                    decision,
                    note: String::new(),
                    decided_at: now.into(),
                    lung_rads: None,
                    axes: None,
                });
                self.findings.sort_by_key(|f| f.index);
            }
        }
    }

    /// Whether every detection of a run of `count` has a decision.
    pub fn is_complete(&self, count: usize) -> bool {
        (0..count).all(|i| self.of(i).is_some_and(|f| f.decision.is_some()))
    }

    /// Reads `path` and checks that it reviews `report`.
    pub fn read_for(path: &Path, report: &DetectionReport) -> Result<Self, ReviewError> {
        let path_buf = path.to_path_buf();
        let review: Self = read_json(path, KIND)?;
        let expected = run_id(report);
        if review.run_id != expected {
            return Err(ReviewError::OtherRun {
                path: path_buf,
                expected,
                found: review.run_id,
            });
        }
        let count = report.detections.len();
        if let Some(f) = review.findings.iter().find(|f| f.index >= count) {
            return Err(ReviewError::NoSuchFinding {
                path: path_buf,
                index: f.index,
                count,
            });
        }
        Ok(review)
    }

    /// Writes `review.json` atomically.
    pub fn write(&self, path: &Path) -> Result<(), ReviewError> {
        let write_error = |source| ReviewError::Write {
            path: path.to_path_buf(),
            source,
        };
        let mut bytes =
            serde_json::to_vec_pretty(self).map_err(|e| write_error(std::io::Error::other(e)))?;
        bytes.push(b'\n');
        tessera_dicom::io::write_atomic(path, &bytes).map_err(write_error)
    }
}
