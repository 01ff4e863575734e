//! WADO-RS: a study's CT series into a folder, written as a set.

use std::io::Read as _;
use std::path::{Path, PathBuf};

use crate::qido::{SeriesRow, percent_encode};
use crate::{PacsError, Server, multipart};

/// At most this much per series (a 2^30-voxel volume as 16-bit samples, plus headers):
/// more is not a CT series the loader would accept.
const MAX_SERIES_BYTES: u64 = 3 << 30;
const CHUNK_BYTES: usize = 1 << 20;

/// How far a retrieval is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Series finished, of `series_total`.
    pub series_done: usize,
    pub series_total: usize,
    /// Bytes received so far (all series).
    pub bytes: u64,
    /// Bytes the current series will have, when the server said.
    pub series_bytes_expected: Option<u64>,
}

/// What a retrieval wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retrieved {
    pub dir: PathBuf,
    pub files: usize,
    pub bytes: u64,
    pub series: Vec<SeriesRow>,
}

impl Server {
    /// Retrieves the CT series of `study_uid` (or only `series_uid`) into `out`, which must
    /// not exist or be an empty folder. Files arrive in a hidden folder beside `out` that is
    /// renamed into place at the end; on any error or cancel it is removed, and `out` is as
    /// it was.
    pub fn retrieve_ct(
        &self,
        study_uid: &str,
        series_uid: Option<&str>,
        out: &Path,
        cancelled: &dyn Fn() -> bool,
        progress: &mut dyn FnMut(&Progress),
    ) -> Result<Retrieved, PacsError> {
        check_target(out)?;
        let all = self.search_series(study_uid)?;
        let series: Vec<SeriesRow> = all
            .iter()
            .filter(|s| s.modality == "CT" && series_uid.is_none_or(|uid| s.series_uid == uid))
            .cloned()
            .collect();
        if series.is_empty() {
            let found: Vec<String> = all
                .iter()
                .filter(|s| series_uid.is_none_or(|uid| s.series_uid == uid))
                .map(|s| format!("{} {}", s.modality, s.series_uid))
                .collect();
            return Err(PacsError::NotCt {
                study_uid: study_uid.into(),
                found: if found.is_empty() {
                    format!("none with UID {}", series_uid.unwrap_or("?"))
                } else {
                    found.join(", ")
                },
            });
        }
        let partial = partial_dir(out);
        let result = self.retrieve_into(study_uid, &series, &partial, cancelled, progress);
        let finish = result.and_then(|(files, bytes)| {
            let write = |source| PacsError::Write {
                path: out.to_path_buf(),
                source,
            };
            if out.exists() {
                // An empty folder (checked above): replaced by the complete one.
                std::fs::remove_dir(out).map_err(write)?;
            }
            std::fs::rename(&partial, out).map_err(write)?;
            Ok((files, bytes))
        });
        match finish {
            Ok((files, bytes)) => Ok(Retrieved {
                dir: out.to_path_buf(),
                files,
                bytes,
                series,
            }),
            Err(e) => {
                // Best effort: the partial folder is ours and holds nothing the user had.
                let _ = std::fs::remove_dir_all(&partial);
                Err(e)
            }
        }
    }

    fn retrieve_into(
        &self,
        study_uid: &str,
        series: &[SeriesRow],
        dir: &Path,
        cancelled: &dyn Fn() -> bool,
        progress: &mut dyn FnMut(&Progress),
    ) -> Result<(usize, u64), PacsError> {
        std::fs::create_dir_all(dir).map_err(|source| PacsError::Write {
            path: dir.to_path_buf(),
            source,
        })?;
        let mut state = Progress {
            series_done: 0,
            series_total: series.len(),
            bytes: 0,
            series_bytes_expected: None,
        };
        let mut files = 0;
        for (index, row) in series.iter().enumerate() {
            let url = self.url(&format!(
                "studies/{}/series/{}",
                percent_encode(study_uid),
                percent_encode(&row.series_uid)
            ));
            let body = self.download(&url, &mut state, cancelled, progress)?;
            let (content_type, bytes) = body;
            let boundary =
                multipart::boundary(&content_type).ok_or_else(|| PacsError::Protocol {
                    url: url.clone(),
                    reason: format!(
                        "Content-Type '{content_type}' is not multipart with a boundary"
                    ),
                })?;
            let parts =
                multipart::split(&bytes, &boundary).map_err(|reason| PacsError::Protocol {
                    url: url.clone(),
                    reason,
                })?;
            for (n, part) in parts.iter().enumerate() {
                if part.len() < 132 || &part[128..132] != b"DICM" {
                    return Err(PacsError::Protocol {
                        url: url.clone(),
                        reason: format!("part {} is not a DICOM file", n + 1),
                    });
                }
                let path = dir.join(format!("S{:02}_{:05}.dcm", index + 1, n + 1));
                std::fs::write(&path, part).map_err(|source| PacsError::Write { path, source })?;
                files += 1;
            }
            state.series_done += 1;
            progress(&state);
        }
        Ok((files, state.bytes))
    }

    /// The body of a GET of `url` as multipart DICOM, read in chunks between which `cancelled`
    /// is asked and `progress` told.
    fn download(
        &self,
        url: &str,
        state: &mut Progress,
        cancelled: &dyn Fn() -> bool,
        progress: &mut dyn FnMut(&Progress),
    ) -> Result<(String, Vec<u8>), PacsError> {
        let mut response = self.get(url, "multipart/related; type=\"application/dicom\"")?;
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        state.series_bytes_expected = response.body().content_length();
        let mut reader = response
            .body_mut()
            .with_config()
            .limit(MAX_SERIES_BYTES)
            .reader();
        let mut bytes = Vec::new();
        let mut chunk = vec![0u8; CHUNK_BYTES];
        loop {
            if cancelled() {
                return Err(PacsError::Cancelled);
            }
            let read = reader.read(&mut chunk).map_err(|e| PacsError::Protocol {
                url: url.into(),
                reason: format!("the transfer broke off after {} bytes: {e}", bytes.len()),
            })?;
            if read == 0 {
                break;
            }
            bytes.extend_from_slice(&chunk[..read]);
            state.bytes += read as u64;
            progress(state);
        }
        Ok((content_type, bytes))
    }
}

/// `out` must be new, or an empty folder: a retrieval never mixes with files already there.
fn check_target(out: &Path) -> Result<(), PacsError> {
    let refuse = |reason: &str| PacsError::Target {
        path: out.to_path_buf(),
        reason: reason.into(),
    };
    match std::fs::read_dir(out).map(|mut entries| entries.next().is_none()) {
        Ok(true) => Ok(()),
        Ok(false) => Err(refuse(
            "the folder is not empty (give a new or empty folder)",
        )),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(_) if out.exists() => Err(refuse("it exists and is not a folder")),
        Err(e) => Err(refuse(&e.to_string())),
    }
}

/// A hidden folder beside `out`, unique to this retrieval.
fn partial_dir(out: &Path) -> PathBuf {
    let name = out
        .file_name()
        .map_or_else(|| "retrieval".into(), |n| n.to_string_lossy().into_owned());
    let parent = out
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    parent.join(format!(".{name}.partial-{}", uuid::Uuid::new_v4().simple()))
}
