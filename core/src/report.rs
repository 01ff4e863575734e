//! Files a user keeps: `det.json` (the documented schema) and the LUNA16 CSV, written
//! atomically and carrying what made them.
//!
//! `det.json` fields are snake_case and stable; a change to them is a change of `schema`.

use std::path::Path;

use serde::{Deserialize, Serialize};
use tessera_dicom::io::{JsonFileError, JsonKind, read_json};

use crate::pipeline::{Detection, DetectionResult, RunStats};
use tessera_plan::blend::BlendMode;

/// The schema name and version written into every `det.json`.
pub const SCHEMA: &str = "tessera.detections/1";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DetectionReport {
    pub schema: String,
    pub tool: Tool,
    pub series_uid: String,
    /// The study, frame of reference, patient and instances the detections are in: what a
    /// DICOM SR made from this file cites. Absent in files from before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<tessera_dicom::volume::SeriesSource>,
    /// What was odd about the input series (uneven spacing, tilt, left-out files...).
    #[serde(default)]
    pub input_warnings: Vec<String>,
    /// Slices no file provided, interpolated because gaps were allowed (`--allow-gaps`).
    #[serde(default)]
    pub filled_slices: Vec<tessera_dicom::volume::FilledSlice>,
    pub config: ConfigRecord,
    pub runtime: RuntimeRecord,
    pub model: ModelRecord,
    pub plan: PlanRecord,
    /// The run's timings and memory, as the pipeline measured them.
    pub stats: RunStats,
    pub detections: Vec<Detection>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tool {
    pub name: String,
    pub version: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConfigRecord {
    pub patch: [usize; 3],
    pub overlap: f64,
    pub blend: BlendMode,
    pub device: String,
    pub precision: String,
    pub threads: usize,
    pub allocator: String,
    pub score_threshold: f32,
    /// The card's rescoring stage was asked for (it runs when the card has one).
    #[serde(default)]
    pub rescore: bool,
    /// The card's coarse pass was asked for (it runs when the card has one).
    #[serde(default)]
    pub coarse_pass: bool,
    pub nms_iou: f64,
    pub allow_single_pass: bool,
    pub memory_budget_bytes: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuntimeRecord {
    pub onnxruntime: String,
    pub execution_provider: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelRecord {
    pub name: String,
    pub sha256: String,
    /// The rescoring stage's file, when it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rescore_sha256: Option<String>,
    /// Its findings are lung nodules: Lung-RADS categories are suggested, for the reader's
    /// own findings too. (Absent in files from before it was kept: see
    /// [`DetectionReport::suggests_lung_rads`].)
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub lung_rads: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanRecord {
    pub windows_per_axis: [usize; 3],
    pub halo: [usize; 3],
    pub recompute_factor: f64,
    pub predicted_peak_bytes: Option<u64>,
    /// The grid the model ran on (after resampling): size and spacing.
    pub model_grid_size: [usize; 3],
    pub model_spacing_mm: [f64; 3],
}

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("cannot write {}", path.display())]
    Write {
        path: std::path::PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Read(#[from] JsonFileError),
}

/// det.json, as [`read_json`] names and checks it.
pub const KIND: JsonKind = JsonKind {
    what: "a detections file",
    schema: Some(SCHEMA),
};

impl DetectionReport {
    pub fn from_result(result: &DetectionResult) -> Self {
        let c = &result.config;
        Self {
            schema: SCHEMA.into(),
            tool: Tool {
                name: "tessera".into(),
                version: env!("CARGO_PKG_VERSION").into(),
            },
            series_uid: result.series_uid.clone(),
            source: Some(result.source.clone()),
            input_warnings: result.input_warnings.clone(),
            filled_slices: result.filled_slices.clone(),
            config: ConfigRecord {
                patch: c.tile.patch,
                overlap: c.tile.overlap,
                blend: c.tile.blend,
                device: c.device.to_string(),
                precision: c.precision.to_string(),
                threads: c.threads,
                allocator: c.allocator.to_string(),
                score_threshold: result.score_threshold,
                rescore: c.rescore,
                coarse_pass: c.coarse_pass,
                nms_iou: c.nms_iou,
                allow_single_pass: c.tile.allow_single_pass,
                memory_budget_bytes: c.tile.memory_budget_bytes,
            },
            runtime: RuntimeRecord {
                onnxruntime: result.onnxruntime_version.clone(),
                execution_provider: result.execution_provider.clone(),
            },
            model: ModelRecord {
                name: result.model_name.clone(),
                sha256: result.model_sha256.clone(),
                rescore_sha256: result.rescore_sha256.clone(),
                lung_rads: result.lung_rads,
            },
            plan: PlanRecord {
                windows_per_axis: result.plan.windows_per_axis,
                halo: result.plan.halo,
                recompute_factor: result.plan.recompute_factor(),
                predicted_peak_bytes: result.plan.predicted_peak_bytes,
                model_grid_size: result.model_geometry.size,
                model_spacing_mm: result.model_geometry.spacing_mm,
            },
            stats: result.stats.clone(),
            detections: result.detections.clone(),
        }
    }

    /// Writes `det.json` atomically.
    pub fn write_json(&self, path: &Path) -> Result<(), ReportError> {
        self.write_files(path, None)
    }

    /// Reads a `det.json`, checking its schema.
    pub fn read_json(path: &Path) -> Result<Self, ReportError> {
        Ok(read_json(path, KIND)?)
    }

    /// Whether the run's findings are lung nodules (Lung-RADS suggested): its model says so,
    /// or, in a file from before it was recorded, a detection has a suggestion.
    pub fn suggests_lung_rads(&self) -> bool {
        self.model.lung_rads || self.detections.iter().any(|d| d.lung_rads.is_some())
    }

    /// The LUNA16 submission format: `seriesuid,coordX,coordY,coordZ,probability` (world mm).
    pub fn luna16_csv(&self) -> String {
        let mut out = String::from("seriesuid,coordX,coordY,coordZ,probability\n");
        for d in &self.detections {
            let [x, y, z] = d.center_lps_mm;
            out.push_str(&format!(
                "{},{x:.3},{y:.3},{z:.3},{:.6}\n",
                self.series_uid, d.score
            ));
        }
        out
    }

    /// Writes `det.json` and, when asked, the LUNA16 CSV, as a set: both or neither.
    pub fn write_files(&self, json: &Path, csv: Option<&Path>) -> Result<(), ReportError> {
        let write_error = |path: &Path, source| ReportError::Write {
            path: path.to_path_buf(),
            source,
        };
        let mut json_bytes = serde_json::to_vec_pretty(self)
            .map_err(|e| write_error(json, std::io::Error::other(e)))?;
        json_bytes.push(b'\n');
        let csv_text = csv.map(|_| self.luna16_csv());
        let mut files: Vec<(&Path, &[u8])> = vec![(json, &json_bytes)];
        if let (Some(path), Some(text)) = (csv, &csv_text) {
            files.push((path, text.as_bytes()));
        }
        tessera_dicom::io::write_set(&files).map_err(|e| match e {
            tessera_dicom::io::OutputError::Write { path, source } => {
                ReportError::Write { path, source }
            }
            other => ReportError::Write {
                path: json.to_path_buf(),
                source: std::io::Error::other(other.to_string()),
            },
        })
    }

    pub fn write_luna16_csv(&self, path: &Path) -> Result<(), ReportError> {
        tessera_dicom::io::write_atomic(path, self.luna16_csv().as_bytes()).map_err(|source| {
            ReportError::Write {
                path: path.to_path_buf(),
                source,
            }
        })
    }
}
