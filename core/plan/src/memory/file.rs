//! The memory calibration file (`memory_model.json`) that `tessera sweep` writes and
//! `tessera detect --memory-model` reads: a memory model and what it was measured on.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::line::MemoryModel;

/// `memory_model.json`: a calibration, and what it was measured on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryModelFile {
    pub model_name: String,
    pub model_sha256: String,
    pub device: String,
    pub allocator: String,
    pub model: MemoryModel,
    /// `(largest window voxels, peak bytes above what the process and the pass held)` per
    /// pass of each run (the main windows; the coarse pass when it ran).
    pub points: Vec<(usize, u64)>,
}

#[derive(Debug, thiserror::Error)]
pub enum CalibrationError {
    #[error("cannot read {}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{} is not a memory_model.json", path.display())]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
}

impl MemoryModelFile {
    /// Reads a calibration written by `tessera sweep`; one written before the model recorded
    /// its largest window gets it from its points.
    pub fn read(path: &Path) -> Result<Self, CalibrationError> {
        let bytes = tessera_dicom::io::read_regular_file(path).map_err(|source| {
            CalibrationError::Read {
                path: path.to_path_buf(),
                source,
            }
        })?;
        let mut file: Self =
            serde_json::from_slice(&bytes).map_err(|source| CalibrationError::Parse {
                path: path.to_path_buf(),
                source,
            })?;
        let largest = file.points.iter().map(|p| p.0).max();
        file.model.largest_window_voxels = file.model.largest_window_voxels.or(largest);
        Ok(file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_it_writes_and_names_a_bad_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = MemoryModelFile {
            model_name: "m".into(),
            model_sha256: "00".into(),
            device: "cpu".into(),
            allocator: "none".into(),
            model: MemoryModel {
                fixed_bytes: 1000.0,
                bytes_per_voxel: 2.5,
                calibration_runs: 1,
                worst_error: 0.0,
                stages_bytes: 0.0,
                largest_window_voxels: None,
            },
            points: vec![(10, 1025)],
        };
        let path = dir.path().join("memory_model.json");
        std::fs::write(&path, serde_json::to_vec(&file).unwrap()).unwrap();
        // Written before the model kept its largest window: read back with it, from the points.
        let mut expected = file.clone();
        expected.model.largest_window_voxels = Some(10);
        assert_eq!(MemoryModelFile::read(&path).unwrap(), expected);
        std::fs::write(&path, serde_json::to_vec(&expected).unwrap()).unwrap();
        assert_eq!(MemoryModelFile::read(&path).unwrap(), expected);

        std::fs::write(&path, b"{}").unwrap();
        let err = MemoryModelFile::read(&path).unwrap_err();
        assert!(matches!(err, CalibrationError::Parse { .. }));
        assert!(err.to_string().contains("memory_model.json"));
        let missing = dir.path().join("absent.json");
        assert!(matches!(
            MemoryModelFile::read(&missing).unwrap_err(),
            CalibrationError::Read { .. }
        ));
    }
}
