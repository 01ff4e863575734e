//! What a batch keeps per study (`ID/batch.json`, written last, with the study's outputs, as a
//! set) and the summary made from those records (`summary.csv`, `summary.md`): written by
//! `tessera batch`, read by it and by the viewer's File > Open batch results.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tessera_dicom::io::{JsonFileError, JsonKind, read_json};
use tessera_plan::bytes::format_bytes;

pub const SCHEMA: &str = "tessera.batch-study/1";
/// The marker that says an output folder is a batch's (anything else non-empty is refused).
pub const MARKER: &str = ".tessera-batch";

/// One study's result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StudyRecord {
    pub schema: String,
    pub id: String,
    pub line: usize,
    pub study: String,
    /// The folder or file `detect` ran on (for a DICOMweb line, where it was retrieved);
    /// empty when the study failed before.
    #[serde(default)]
    pub study_path: PathBuf,
    pub status: Status,
    /// Why it failed (the command's last error line).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What makes two runs the same: the model's hash and the detect arguments.
    pub model_sha256: String,
    pub settings: Vec<String>,
    #[serde(default)]
    pub detections: usize,
    pub elapsed_s: f64,
    #[serde(default)]
    pub peak_memory_bytes: u64,
    /// "384x384x128 (3 windows)".
    #[serde(default)]
    pub plan: String,
}

/// How a study's run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Done,
    Failed,
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Done => "done",
            Self::Failed => "failed",
        })
    }
}

impl StudyRecord {
    pub fn is_done(&self) -> bool {
        self.status == Status::Done
    }

    /// Whether `dir` holds this record's complete outputs: det.json (and the CSV), and the SR
    /// when `sr` is asked for.
    pub fn outputs_complete(&self, dir: &Path, sr: bool) -> bool {
        self.is_done()
            && dir.join("det.json").is_file()
            && dir.join("luna16.csv").is_file()
            && (!sr || dir.join("sr.dcm").is_file())
    }

    pub fn read(path: &Path) -> Result<Self, JsonFileError> {
        read_json(
            path,
            JsonKind {
                what: "a batch record",
                schema: Some(SCHEMA),
            },
        )
    }
}

/// The summary of `records`, as CSV and Markdown.
pub fn summary(records: &[StudyRecord]) -> (String, String) {
    let mut csv =
        String::from("id,line,study,status,detections,elapsed_s,peak_memory_bytes,plan,error\n");
    let clean = |s: &str| s.replace([',', '\n', '\r'], " ");
    for r in records {
        let _ = writeln!(
            csv,
            "{},{},{},{},{},{:.2},{},{},{}",
            r.id,
            r.line,
            clean(&r.study),
            r.status,
            r.detections,
            r.elapsed_s,
            r.peak_memory_bytes,
            clean(&r.plan),
            clean(r.error.as_deref().unwrap_or(""))
        );
    }
    let failed = records.iter().filter(|r| !r.is_done()).count();
    let mut md = format!(
        "# Tessera batch\n\n{} studies: {} done, {failed} failed.\n\n| id | study | status | detections | time s | peak memory | plan | error |\n|---|---|---|---|---|---|---|---|\n",
        records.len(),
        records.len() - failed
    );
    let cell = |s: &str| s.replace('|', "\\|").replace('\n', " ");
    for r in records {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {:.2} | {} | {} | {} |",
            r.id,
            cell(&r.study),
            r.status,
            r.detections,
            r.elapsed_s,
            if r.peak_memory_bytes > 0 {
                format_bytes(r.peak_memory_bytes)
            } else {
                "-".into()
            },
            cell(&r.plan),
            cell(r.error.as_deref().unwrap_or(""))
        );
    }
    (csv, md)
}

/// Every study record under `out` (one folder per study), in manifest line order.
pub fn collect(out: &Path) -> anyhow::Result<Vec<StudyRecord>> {
    let mut records = Vec::new();
    for entry in std::fs::read_dir(out)? {
        let path = entry?.path().join("batch.json");
        if path.is_file() {
            records.push(StudyRecord::read(&path)?);
        }
    }
    records.sort_by_key(|r| r.line);
    Ok(records)
}

/// Rewrites `out/summary.csv` and `out/summary.md` from the records there, as a set.
pub fn write_summary(out: &Path) -> anyhow::Result<Vec<StudyRecord>> {
    let records = collect(out)?;
    write_summary_of(out, &records)?;
    Ok(records)
}

/// Rewrites the summary files in `out` from `records` (the batch's, kept as it runs: no
/// record is read again after each study).
pub fn write_summary_of(out: &Path, records: &[StudyRecord]) -> anyhow::Result<()> {
    let (csv, md) = summary(records);
    tessera_dicom::io::write_set(&[
        (&out.join("summary.csv"), csv.as_bytes()),
        (&out.join("summary.md"), md.as_bytes()),
    ])?;
    Ok(())
}

/// `record` in `records` (replacing the one with its id), kept in manifest line order.
pub fn upsert(records: &mut Vec<StudyRecord>, record: StudyRecord) {
    records.retain(|r| r.id != record.id);
    let at = records.partition_point(|r| r.line <= record.line);
    records.insert(at, record);
}
