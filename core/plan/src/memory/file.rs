//! The memory calibration file (`memory_model.json`) that `tessera sweep` writes and
//! `tessera detect --memory-model` reads: a memory model and what it was measured on.

use std::path::Path;

use serde::{Deserialize, Serialize};
use tessera_dicom::io::{JsonFileError, JsonKind, read_json};

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

/// `memory_model.json`, as [`read_json`] names it (it has no schema field).
pub const KIND: JsonKind = JsonKind {
    what: "a memory_model.json",
    schema: None,
};

impl MemoryModelFile {
    /// Reads a calibration written by `tessera sweep`; one written before the model recorded
    /// its largest window gets it from its points.
    pub fn read(path: &Path) -> Result<Self, JsonFileError> {
        let mut file: Self = read_json(path, KIND)?;
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
                later_steps_bytes: 0.0,
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
        assert!(matches!(err, JsonFileError::Parse { .. }));
        assert!(err.to_string().contains("memory_model.json"));
        let missing = dir.path().join("absent.json");
        assert!(matches!(
            MemoryModelFile::read(&missing).unwrap_err(),
            JsonFileError::Read { .. }
        ));
    }
}
