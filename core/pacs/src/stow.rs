//! STOW-RS: DICOM files to the server.

use std::path::{Path, PathBuf};

use serde_json::Value as Json;

use crate::{PacsError, Server, multipart};

/// Requests carry at most this many bytes of files (a series goes in a few requests).
const BATCH_BYTES: usize = 64 << 20;

/// What the server took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    pub sent: usize,
    /// SOP instance UIDs the server confirmed.
    pub stored: Vec<String>,
}

impl Server {
    /// Stores the files at `paths` (each must be a DICOM Part 10 file; all are read and
    /// checked before anything is sent).
    pub fn store_files(&self, paths: &[PathBuf]) -> Result<Stored, PacsError> {
        let files = paths
            .iter()
            .map(|path| read_dicom(path))
            .collect::<Result<Vec<_>, _>>()?;
        self.store(&files)
    }

    /// Stores DICOM Part 10 files given as bytes, in batches; every refusal is an error that
    /// names the instances and the server's reason.
    pub fn store(&self, files: &[Vec<u8>]) -> Result<Stored, PacsError> {
        let url = self.url("studies");
        let mut stored = Vec::new();
        let mut failed = Vec::new();
        let mut batch: Vec<&[u8]> = Vec::new();
        let mut batch_bytes = 0;
        for (i, file) in files.iter().enumerate() {
            batch_bytes += file.len();
            batch.push(file);
            if batch_bytes >= BATCH_BYTES || i + 1 == files.len() {
                let boundary = format!("tessera-{}", uuid::Uuid::new_v4().simple());
                let body = multipart::join(&batch, &boundary);
                let content_type =
                    format!("multipart/related; type=\"application/dicom\"; boundary={boundary}");
                let mut response = self.post(&url, &content_type, &body)?;
                let text = response
                    .body_mut()
                    .with_config()
                    .limit(16 << 20)
                    .read_to_string()
                    .map_err(|e| protocol(&url, e.to_string()))?;
                let (ok, refused) = outcome(&text).map_err(|reason| protocol(&url, reason))?;
                stored.extend(ok);
                failed.extend(refused);
                batch.clear();
                batch_bytes = 0;
            }
        }
        if !failed.is_empty() {
            return Err(PacsError::StoreRefused {
                sent: files.len(),
                stored: stored.len(),
                failed: failed.join("; "),
            });
        }
        Ok(Stored {
            sent: files.len(),
            stored,
        })
    }
}

fn read_dicom(path: &Path) -> Result<Vec<u8>, PacsError> {
    let bytes = tessera_dicom::io::read_regular_file(path).map_err(|source| PacsError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    if bytes.len() < 132 || &bytes[128..132] != b"DICM" {
        return Err(PacsError::Read {
            path: path.to_path_buf(),
            source: std::io::Error::other("not a DICOM Part 10 file (no DICM marker at byte 128)"),
        });
    }
    Ok(bytes)
}

fn protocol(url: &str, reason: String) -> PacsError {
    PacsError::Protocol {
        url: url.into(),
        reason,
    }
}

/// The stored instances' UIDs and the refusals (`UID: reason code`) of a STOW answer.
fn outcome(text: &str) -> Result<(Vec<String>, Vec<String>), String> {
    let json: Json = serde_json::from_str(text)
        .map_err(|e| format!("the STOW answer is not DICOM JSON: {e}"))?;
    let items = |tag: &str| -> Vec<Json> {
        json.get(tag)
            .and_then(|a| a.get("Value"))
            .and_then(Json::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let text_of = |item: &Json, tag: &str| -> String {
        item.get(tag)
            .and_then(|a| a.get("Value"))
            .and_then(Json::as_array)
            .and_then(|v| v.first())
            .map(|v| match v {
                Json::String(s) => s.clone(),
                other => other.to_string(),
            })
            .unwrap_or_default()
    };
    let stored = items("00081199")
        .iter()
        .map(|i| text_of(i, "00081155"))
        .collect();
    let failed = items("00081198")
        .iter()
        .map(|i| {
            format!(
                "{}: failure reason {}",
                text_of(i, "00081155"),
                text_of(i, "00081197")
            )
        })
        .collect();
    Ok((stored, failed))
}
