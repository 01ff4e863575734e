//! One series as `tessera info` lists it and the viewer's series picker shows it.

use std::path::PathBuf;

use serde::Serialize;
use tessera_dicom::dicom::{self, SeriesFiles};

/// One series as `info --json` prints it (a documented, stable schema).
#[derive(Debug, Clone, Serialize)]
pub struct SeriesRow {
    pub series_uid: String,
    pub modality: String,
    pub description: String,
    pub series_number: Option<i64>,
    pub patient_id: String,
    pub size: [usize; 3],
    pub spacing_mm: [f64; 3],
    pub origin_lps_mm: [f64; 3],
    pub files: usize,
    pub frames: usize,
    pub localizer: bool,
    pub transfer_syntaxes: Vec<String>,
    pub warnings: Vec<String>,
    /// Slices no file provides, interpolated (only with `--allow-gaps`).
    pub filled_slices: Vec<tessera_dicom::volume::FilledSlice>,
    /// Image files that could not be read and may be slices of this series.
    pub unreadable_files: Vec<PathBuf>,
    /// Set when the series cannot be a volume; then size and spacing are zero.
    pub error: Option<String>,
}

/// The row of a volume read from one NIfTI or MetaImage file.
pub fn volume_row(volume: &tessera_dicom::Volume) -> SeriesRow {
    let info = &volume.info;
    SeriesRow {
        series_uid: info.series_uid.clone(),
        modality: info.modality.clone(),
        description: info.series_description.clone(),
        series_number: info.series_number,
        patient_id: info.patient_id.clone(),
        size: volume.geometry.size,
        spacing_mm: volume.geometry.spacing_mm,
        origin_lps_mm: volume.geometry.origin_lps_mm(),
        files: 1,
        frames: volume.geometry.size[2],
        localizer: false,
        transfer_syntaxes: Vec::new(),
        warnings: volume.warnings.clone(),
        filled_slices: Vec::new(),
        unreadable_files: Vec::new(),
        error: None,
    }
}

/// The row of `series`, laid out with `options` (its error in the row when it is no volume).
pub fn row(series: &SeriesFiles, options: dicom::LoadOptions) -> SeriesRow {
    let first = series.first();
    let mut transfer_syntaxes: Vec<String> = series
        .files
        .iter()
        .map(|f| f.transfer_syntax_uid.clone())
        .collect();
    transfer_syntaxes.sort();
    transfer_syntaxes.dedup();
    let mut warnings = Vec::new();
    if let Err(e) = dicom::check_transfer_syntaxes(series) {
        warnings.push(format!("cannot decode: {e}"));
    }
    let mut filled_slices = Vec::new();
    let (size, spacing_mm, origin_lps_mm, error) = match dicom::layout(series, options) {
        Ok(layout) => {
            warnings.extend(layout.warnings);
            filled_slices = layout.filled;
            (
                layout.geometry.size,
                layout.geometry.spacing_mm,
                layout.geometry.origin_lps_mm(),
                None,
            )
        }
        Err(e) => ([0; 3], [0.0; 3], [0.0; 3], Some(e.to_string())),
    };
    SeriesRow {
        series_uid: first.info.series_uid.clone(),
        modality: first.info.modality.clone(),
        description: first.info.series_description.clone(),
        series_number: first.info.series_number,
        patient_id: first.info.patient_id.clone(),
        size,
        spacing_mm,
        origin_lps_mm,
        files: series.files.len(),
        frames: series.frame_count(),
        localizer: first.is_localizer(),
        transfer_syntaxes,
        warnings,
        filled_slices,
        unreadable_files: series.unreadable.iter().map(|u| u.path.clone()).collect(),
        error,
    }
}
