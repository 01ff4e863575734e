//! Writing files a user keeps: atomically, so a crash or cancel never leaves half a file.

use std::io::Write;
use std::path::{Path, PathBuf};

/// Writes `bytes` to `path` through a temporary file in the same folder, then renames it.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = stage(path, bytes)?;
    let result = std::fs::rename(&tmp, path);
    if result.is_err() {
        // Best effort: the temporary file is ours and worthless after a failure.
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// Writes several files as a set: every file goes to a temporary file first, and only when all
/// of them are written are they renamed into place, so a failure leaves none of them changed.
///
/// Two entries with the same path are refused (e.g. a sidecar that would replace its volume).
pub fn write_set(files: &[(&Path, &[u8])]) -> Result<(), OutputError> {
    for (i, (path, _)) in files.iter().enumerate() {
        if files[..i].iter().any(|(other, _)| other == path) {
            return Err(OutputError::SamePath {
                path: path.to_path_buf(),
            });
        }
    }
    let mut staged = Vec::with_capacity(files.len());
    for (path, bytes) in files {
        match stage(path, bytes) {
            Ok(tmp) => staged.push((tmp, *path)),
            Err(source) => {
                for (tmp, _) in &staged {
                    // Best effort: the temporary files are ours and worthless now.
                    let _ = std::fs::remove_file(tmp);
                }
                return Err(OutputError::Write {
                    path: path.to_path_buf(),
                    source,
                });
            }
        }
    }
    for (i, (tmp, path)) in staged.iter().enumerate() {
        if let Err(source) = std::fs::rename(tmp, path) {
            for (rest, _) in &staged[i..] {
                let _ = std::fs::remove_file(rest);
            }
            return Err(OutputError::Write {
                path: path.to_path_buf(),
                source,
            });
        }
    }
    Ok(())
}

/// Writes `bytes` to a synced temporary file beside `path` and returns its path.
fn stage(path: &Path, bytes: &[u8]) -> std::io::Result<PathBuf> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "out".into());
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(bytes)?;
        file.sync_all()
    })();
    match result {
        Ok(()) => Ok(tmp),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// Why an output path is refused, or could not be written.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    #[error("refusing to write {}: it is one of the input files", path.display())]
    IsInput { path: PathBuf },
    #[error("refusing to write {} inside the input {}: outputs go beside a study, not into it (--force to write there anyway)", path.display(), input.display())]
    InsideInput { path: PathBuf, input: PathBuf },
    #[error("refusing to overwrite {}: it is a DICOM file (--force to overwrite it)", path.display())]
    WouldOverwriteDicom { path: PathBuf },
    #[error("cannot write {}: it is {kind}", path.display())]
    NotAFile { path: PathBuf, kind: &'static str },
    #[error("refusing to write into {}: it is not empty and not a folder this command wrote ({reason}); choose a new or empty folder", path.display())]
    NotOurFolder { path: PathBuf, reason: String },
    #[error("two outputs would be the same file {}", path.display())]
    SamePath { path: PathBuf },
    #[error("cannot write {}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Checks that writing `path` modifies nothing the user gave as input.
///
/// `inputs` are the files and folders a run reads (a study folder, its series files). Refused:
/// an input file itself (always), a path inside an input folder or beside an input file (a
/// DICOM file stands for its folder's study; a NIfTI or MetaImage volume is a whole study in
/// itself, and outputs may go beside it), or an existing DICOM file (those two unless
/// `force`), or anything that is not a regular file.
pub fn check_output(path: &Path, inputs: &[PathBuf], force: bool) -> Result<(), OutputError> {
    if let Ok(meta) = std::fs::metadata(path)
        && !meta.is_file()
    {
        return Err(OutputError::NotAFile {
            path: path.to_path_buf(),
            kind: file_kind(&meta),
        });
    }
    let target = absolute(path);
    let volume_files: Vec<PathBuf> = inputs
        .iter()
        .filter(|i| crate::image_file::format_of(i).is_some())
        .flat_map(|i| crate::image_file::files_of(i))
        .map(|f| absolute(&f))
        .collect();
    for input in inputs {
        let input_abs = absolute(input);
        if input_abs == target {
            return Err(OutputError::IsInput {
                path: path.to_path_buf(),
            });
        }
        let folder = if input_abs.is_dir() {
            Some(input_abs.as_path())
        } else if volume_files.contains(&input_abs) {
            None
        } else {
            input_abs.parent()
        };
        if !force
            && let Some(folder) = folder
            && target.starts_with(folder)
        {
            return Err(OutputError::InsideInput {
                path: path.to_path_buf(),
                input: input.clone(),
            });
        }
    }
    if !force && is_dicom_file(path) {
        return Err(OutputError::WouldOverwriteDicom {
            path: path.to_path_buf(),
        });
    }
    Ok(())
}

/// `path` made absolute with symlinks resolved, as far as it exists (a file to be written does
/// not exist yet: its folder is resolved and its name appended).
fn absolute(path: &Path) -> PathBuf {
    if let Ok(p) = std::fs::canonicalize(path) {
        return p;
    }
    let name = path.file_name().map(std::ffi::OsStr::to_os_string);
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    match (std::fs::canonicalize(&parent), name) {
        (Ok(dir), Some(name)) => dir.join(name),
        _ => std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf()),
    }
}

/// Opens `path` for reading when it is a regular file, with its size. A FIFO, device or
/// folder is refused by kind (`ErrorKind::InvalidInput`) instead of opened: reading a FIFO
/// would wait forever for a writer.
pub fn open_regular(path: &Path) -> std::io::Result<(std::fs::File, u64)> {
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("it is {}, not a regular file", file_kind(&meta)),
        ));
    }
    Ok((std::fs::File::open(path)?, meta.len()))
}

/// Reads a whole regular file (see [`open_regular`]).
pub fn read_regular_file(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let (mut file, bytes) = open_regular(path)?;
    let mut out = Vec::with_capacity(usize::try_from(bytes).unwrap_or(0));
    file.read_to_end(&mut out)?;
    Ok(out)
}

/// Why one of Tessera's own JSON files (det.json, a review, a memory calibration, a batch
/// record) could not be read: one shape for all of them.
#[derive(Debug, thiserror::Error)]
pub enum JsonFileError {
    #[error("cannot read {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} is not {what}", path.display())]
    Parse {
        path: PathBuf,
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },
    #[error("{} has schema {found}, not {expected}", path.display())]
    Schema {
        path: PathBuf,
        found: String,
        expected: &'static str,
    },
}

/// Which of Tessera's JSON files a file should be: its name in messages (`"a detections
/// file"`) and the `schema` it carries, when its kind has one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JsonKind {
    pub what: &'static str,
    pub schema: Option<&'static str>,
}

/// Reads `path` (a regular file) as `kind`: its `schema` checked, then parsed.
///
/// ```
/// use tessera_dicom::io::{JsonFileError, JsonKind, read_json};
/// #[derive(serde::Deserialize)]
/// struct Test {
///     detections: Vec<u32>,
/// }
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("x.json");
/// let kind = JsonKind { what: "a test file", schema: Some("test/1") };
/// // Another kind of file is named by its schema, not by the field it lacks.
/// std::fs::write(&path, r#"{"schema": "other/1"}"#).unwrap();
/// let read = read_json::<Test>(&path, kind);
/// assert!(matches!(read, Err(JsonFileError::Schema { .. })));
/// std::fs::write(&path, r#"{"schema": "test/1", "detections": [1, 2]}"#).unwrap();
/// assert_eq!(read_json::<Test>(&path, kind).unwrap().detections, [1, 2]);
/// ```
pub fn read_json<T: serde::de::DeserializeOwned>(
    path: &Path,
    kind: JsonKind,
) -> Result<T, JsonFileError> {
    #[derive(serde::Deserialize)]
    struct Schema {
        schema: Option<String>,
    }
    let path_buf = || path.to_path_buf();
    let bytes = read_regular_file(path).map_err(|source| JsonFileError::Read {
        path: path_buf(),
        source,
    })?;
    let parse_error = |source| JsonFileError::Parse {
        path: path_buf(),
        what: kind.what,
        source,
    };
    // The schema first: a file of another kind or version is named as such, not by the first
    // field it lacks.
    if let Some(expected) = kind.schema {
        let found = serde_json::from_slice::<Schema>(&bytes)
            .map_err(parse_error)?
            .schema;
        if found.as_deref() != Some(expected) {
            return Err(JsonFileError::Schema {
                path: path_buf(),
                found: found.unwrap_or_else(|| "none".into()),
                expected,
            });
        }
    }
    serde_json::from_slice(&bytes).map_err(parse_error)
}

/// What a path that is not a regular file is, in words.
pub fn file_kind(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let kind = meta.file_type();
    if kind.is_dir() {
        "a folder"
    } else if kind.is_fifo() {
        "a FIFO (named pipe)"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_block_device() || kind.is_char_device() {
        "a device"
    } else {
        "not a regular file"
    }
}

/// Whether `path` is a regular file with a DICOM Part 10 marker (false for anything else).
pub fn is_dicom_file(path: &Path) -> bool {
    open_regular(path).is_ok_and(|(mut file, _)| matches!(has_dicom_magic(&mut file), Ok(true)))
}

/// Whether `file` (from its start) has the 128-byte preamble and `DICM`.
pub(crate) fn has_dicom_magic(file: &mut std::fs::File) -> Result<bool, String> {
    use std::io::Read;
    let mut head = [0u8; 132];
    let mut filled = 0;
    while filled < head.len() {
        match file.read(&mut head[filled..]) {
            Ok(0) => return Ok(false),
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(&head[128..] == b"DICM")
}
