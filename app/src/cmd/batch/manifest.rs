//! A batch's manifest: one study a line, as CSV (a header naming the columns) or JSON lines.
//!
//! CSV columns: `study` (a folder or file, relative to the manifest's folder), or `url` and
//! `study_uid` (a DICOMweb study); `id` optional. JSON lines: the same names as keys. A line
//! that does not parse, a study that does not exist, an id that is not a plain folder name or
//! is used twice: refused before anything runs, naming the line.

use std::path::{Path, PathBuf};

/// Where one study comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A DICOM folder or file, or a NIfTI or MetaImage volume.
    Path(PathBuf),
    /// A study on a PACS, retrieved over DICOMweb before it runs.
    Dicomweb { url: String, study_uid: String },
}

/// One line of the manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// 1-based line number in the manifest file.
    pub line: usize,
    /// The study's folder name under the batch's output folder.
    pub id: String,
    pub source: Source,
}

impl Entry {
    /// What the summary shows as the study.
    pub fn describe(&self) -> String {
        match &self.source {
            Source::Path(p) => p.display().to_string(),
            Source::Dicomweb { url, study_uid } => format!("{url} study {study_uid}"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("{}{}: {reason}", path.display(), line.map_or(String::new(), |l| format!(" line {l}")))]
pub struct ManifestError {
    pub path: PathBuf,
    pub line: Option<usize>,
    pub reason: String,
}

/// The entries of the manifest at `path` (`.csv`, or `.jsonl`/`.ndjson`).
pub fn read(path: &Path) -> Result<Vec<Entry>, ManifestError> {
    let fail = |line: Option<usize>, reason: String| ManifestError {
        path: path.to_path_buf(),
        line,
        reason,
    };
    let bytes =
        tessera_dicom::io::read_regular_file(path).map_err(|e| fail(None, e.to_string()))?;
    let text = String::from_utf8(bytes).map_err(|_| fail(None, "not UTF-8 text".into()))?;
    let base = path.parent().unwrap_or(Path::new("."));
    let name = path
        .extension()
        .map(|e| e.to_string_lossy().to_ascii_lowercase());
    let fields = match name.as_deref() {
        Some("csv") => csv_lines(&text).map_err(|(l, r)| fail(Some(l), r))?,
        Some("jsonl" | "ndjson") => json_lines(&text).map_err(|(l, r)| fail(Some(l), r))?,
        _ => {
            return Err(fail(
                None,
                "a manifest is .csv (with a header) or .jsonl (one JSON object a line)".into(),
            ));
        }
    };
    let mut entries: Vec<Entry> = Vec::with_capacity(fields.len());
    for (line, get) in fields {
        let entry = entry(base, line, &get).map_err(|r| fail(Some(line), r))?;
        if let Some(first) = entries.iter().find(|e| e.id == entry.id) {
            return Err(fail(
                Some(line),
                format!(
                    "id '{}' is line {}'s too: give each study its own id",
                    entry.id, first.line
                ),
            ));
        }
        entries.push(entry);
    }
    if entries.is_empty() {
        return Err(fail(None, "no studies in it".into()));
    }
    Ok(entries)
}

type Fields = Vec<(String, String)>;

fn entry(base: &Path, line: usize, fields: &Fields) -> Result<Entry, String> {
    let get = |key: &str| {
        fields
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.trim().to_string())
            .filter(|v| !v.is_empty())
    };
    let source = match (get("study"), get("url"), get("study_uid")) {
        (Some(study), None, None) => {
            let path = base.join(&study);
            if !path.exists() {
                return Err(format!("the study {} does not exist", path.display()));
            }
            Source::Path(path)
        }
        (None, Some(url), Some(study_uid)) => Source::Dicomweb { url, study_uid },
        _ => {
            return Err(
                "give either `study` (a folder or file) or both `url` and `study_uid`".into(),
            );
        }
    };
    let id = match (get("id"), &source) {
        (Some(id), _) => id,
        (None, Source::Path(p)) => p
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        (None, Source::Dicomweb { study_uid, .. }) => study_uid.clone(),
    };
    let plain = !id.is_empty()
        && !id.starts_with('.')
        && id.len() <= 128
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if !plain {
        return Err(format!(
            "id '{id}' is not a plain folder name (letters, digits, '.', '_', '-'; not starting with '.')"
        ));
    }
    Ok(Entry { line, id, source })
}

/// CSV with a header; no quoting (a line with a quote is refused: use JSON lines then).
fn csv_lines(text: &str) -> Result<Vec<(usize, Fields)>, (usize, String)> {
    let mut lines = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'));
    let Some((header_line, header)) = lines.next() else {
        return Ok(Vec::new());
    };
    let columns: Vec<String> = header.split(',').map(|c| c.trim().to_string()).collect();
    if let Some(unknown) = columns
        .iter()
        .find(|c| !["study", "id", "url", "study_uid"].contains(&c.as_str()))
    {
        return Err((
            header_line,
            format!("unknown column '{unknown}' (the header names study, id, url, study_uid)"),
        ));
    }
    let mut out = Vec::new();
    for (line, text) in lines {
        if text.contains('"') {
            return Err((
                line,
                "quoted fields are not read: use a .jsonl manifest for paths with commas or quotes"
                    .into(),
            ));
        }
        let values: Vec<&str> = text.split(',').collect();
        if values.len() != columns.len() {
            return Err((
                line,
                format!(
                    "{} fields where the header has {}",
                    values.len(),
                    columns.len()
                ),
            ));
        }
        out.push((
            line,
            columns
                .iter()
                .cloned()
                .zip(values.iter().map(|v| (*v).to_string()))
                .collect(),
        ));
    }
    Ok(out)
}

fn json_lines(text: &str) -> Result<Vec<(usize, Fields)>, (usize, String)> {
    let mut out = Vec::new();
    for (i, text) in text.lines().enumerate() {
        let line = i + 1;
        if text.trim().is_empty() {
            continue;
        }
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| (line, format!("not JSON: {e}")))?;
        let object = value
            .as_object()
            .ok_or((line, "not a JSON object".to_string()))?;
        let mut fields = Fields::new();
        for (key, value) in object {
            if !["study", "id", "url", "study_uid"].contains(&key.as_str()) {
                return Err((line, format!("unknown key '{key}'")));
            }
            let text = value
                .as_str()
                .ok_or((line, format!("'{key}' is not a string")))?;
            fields.push((key.clone(), text.to_string()));
        }
        out.push((line, fields));
    }
    Ok(out)
}
