//! What one DICOM file says about itself, read without its pixel data.
//!
//! Classic CT puts one slice per file; enhanced (multi-frame) CT puts the per-slice geometry in
//! functional group sequences. Both become a [`FileHeader`] with one [`FrameHeader`] per frame,
//! so that grouping and sorting never care which kind a slice came from.

use std::path::{Path, PathBuf};

use dicom_core::Tag;
use dicom_dictionary_std::tags;
use dicom_object::{DefaultDicomObject, InMemDicomObject, OpenFileOptions};

use super::DicomError;
use crate::geometry::Vec3;
use crate::volume::SeriesInfo;

/// The geometry and value mapping of one frame (one slice).
#[derive(Debug, Clone, PartialEq)]
pub struct FrameHeader {
    /// Frame index inside its file (0 for single-frame files).
    pub frame: u32,
    /// ImagePositionPatient: centre of the first voxel, LPS mm.
    pub position_lps_mm: Vec3,
    /// ImageOrientationPatient: row direction then column direction.
    pub orientation: [f64; 6],
    /// PixelSpacing as `[between columns (x), between rows (y)]` mm (DICOM stores it y, x).
    pub pixel_spacing_mm: [f64; 2],
    pub rescale_slope: f64,
    pub rescale_intercept: f64,
}

/// The header of one DICOM image file.
#[derive(Debug, Clone)]
pub struct FileHeader {
    pub path: PathBuf,
    pub info: SeriesInfo,
    pub sop_class_uid: String,
    pub transfer_syntax_uid: String,
    pub instance_number: Option<i64>,
    pub image_type: Vec<String>,
    pub rows: u32,
    pub columns: u32,
    pub frames: Vec<FrameHeader>,
}

impl FileHeader {
    /// Scouts and localizers are images too, but never part of a volume.
    pub fn is_localizer(&self) -> bool {
        self.image_type
            .iter()
            .any(|t| t.eq_ignore_ascii_case("LOCALIZER"))
    }
}

/// Why a file found while scanning is not an image slice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotAnImage {
    /// Not a DICOM Part 10 file at all.
    NotDicom(String),
    /// A DICOM object without pixel data, e.g. a DICOMDIR, a structured report.
    NoPixels(String),
}

/// Reads the header of `path` (stopping before the pixel data).
///
/// `Ok(Err(_))` is a file to skip with a reason; `Err(_)` is an image we could not make sense of.
pub fn read_header(path: &Path) -> Result<Result<FileHeader, NotAnImage>, DicomError> {
    if !has_dicom_magic(path)? {
        return Ok(Err(NotAnImage::NotDicom(
            "no DICM marker at byte 128 (not a DICOM Part 10 file)".into(),
        )));
    }
    let obj = match OpenFileOptions::new()
        .read_until(tags::PIXEL_DATA)
        .open_file(path)
    {
        Ok(obj) => obj,
        Err(e) => {
            return Err(DicomError::Parse {
                path: path.to_path_buf(),
                reason: e.to_string(),
            });
        }
    };
    header_from_object(path, &obj)
}

fn has_dicom_magic(path: &Path) -> Result<bool, DicomError> {
    use std::io::Read;
    let mut file = std::fs::File::open(path).map_err(|source| DicomError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut head = [0u8; 132];
    let mut filled = 0;
    while filled < head.len() {
        match file.read(&mut head[filled..]) {
            Ok(0) => return Ok(false),
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(source) => {
                return Err(DicomError::Io {
                    path: path.to_path_buf(),
                    source,
                });
            }
        }
    }
    Ok(&head[128..] == b"DICM")
}

fn header_from_object(
    path: &Path,
    obj: &DefaultDicomObject,
) -> Result<Result<FileHeader, NotAnImage>, DicomError> {
    let sop_class_uid = text(obj, tags::SOP_CLASS_UID);
    let meta_class = obj
        .meta()
        .media_storage_sop_class_uid
        .trim_end_matches('\0')
        .to_string();
    if meta_class == dicom_dictionary_std::uids::MEDIA_STORAGE_DIRECTORY_STORAGE {
        return Ok(Err(NotAnImage::NoPixels(
            "DICOMDIR (media directory index)".into(),
        )));
    }
    let (Some(rows), Some(columns)) = (int(obj, tags::ROWS), int(obj, tags::COLUMNS)) else {
        let class = if sop_class_uid.is_empty() {
            meta_class
        } else {
            sop_class_uid
        };
        return Ok(Err(NotAnImage::NoPixels(format!(
            "no Rows/Columns: not an image (SOP class {class})"
        ))));
    };
    let missing = |attribute: &'static str| DicomError::MissingAttribute {
        path: path.to_path_buf(),
        attribute,
    };
    let rows = u32::try_from(rows).map_err(|_| missing("Rows (positive)"))?;
    let columns = u32::try_from(columns).map_err(|_| missing("Columns (positive)"))?;

    let number_of_frames = int(obj, tags::NUMBER_OF_FRAMES).unwrap_or(1).max(1);
    let frames = if number_of_frames > 1
        || obj
            .get(tags::PER_FRAME_FUNCTIONAL_GROUPS_SEQUENCE)
            .is_some()
    {
        multi_frame_headers(obj, number_of_frames)
    } else {
        single_frame_header(obj).into_iter().collect()
    };
    if frames.is_empty() {
        return Err(missing(
            "ImagePositionPatient / ImageOrientationPatient / PixelSpacing (the slice cannot be placed)",
        ));
    }

    let window_hu = match (
        floats(obj, tags::WINDOW_CENTER),
        floats(obj, tags::WINDOW_WIDTH),
    ) {
        (Some(c), Some(w)) if !c.is_empty() && !w.is_empty() => Some((c[0], w[0])),
        _ => None,
    };
    let info = SeriesInfo {
        series_uid: text(obj, tags::SERIES_INSTANCE_UID),
        study_uid: text(obj, tags::STUDY_INSTANCE_UID),
        modality: text(obj, tags::MODALITY),
        series_description: text(obj, tags::SERIES_DESCRIPTION),
        series_number: int(obj, tags::SERIES_NUMBER),
        patient_name: text(obj, tags::PATIENT_NAME)
            .replace('^', " ")
            .trim()
            .to_string(),
        patient_id: text(obj, tags::PATIENT_ID),
        study_date: text(obj, tags::STUDY_DATE),
        study_description: text(obj, tags::STUDY_DESCRIPTION),
        manufacturer: text(obj, tags::MANUFACTURER),
        window_hu,
        slice_thickness_mm: floats(obj, tags::SLICE_THICKNESS).and_then(|v| v.first().copied()),
    };
    Ok(Ok(FileHeader {
        path: path.to_path_buf(),
        info,
        sop_class_uid,
        transfer_syntax_uid: obj
            .meta()
            .transfer_syntax()
            .trim_end_matches('\0')
            .to_string(),
        instance_number: int(obj, tags::INSTANCE_NUMBER),
        image_type: obj
            .get(tags::IMAGE_TYPE)
            .and_then(|e| e.to_str().ok())
            .map(|s| s.split('\\').map(|p| p.trim().to_string()).collect())
            .unwrap_or_default(),
        rows,
        columns,
        frames,
    }))
}

fn single_frame_header(obj: &InMemDicomObject) -> Option<FrameHeader> {
    Some(FrameHeader {
        frame: 0,
        position_lps_mm: vec3(&floats(obj, tags::IMAGE_POSITION_PATIENT)?)?,
        orientation: six(&floats(obj, tags::IMAGE_ORIENTATION_PATIENT)?)?,
        pixel_spacing_mm: spacing_xy(&floats(obj, tags::PIXEL_SPACING)?)?,
        rescale_slope: first_float(obj, tags::RESCALE_SLOPE).unwrap_or(1.0),
        rescale_intercept: first_float(obj, tags::RESCALE_INTERCEPT).unwrap_or(0.0),
    })
}

/// Enhanced CT: each frame's attributes live in the per-frame functional group item, or in the
/// shared one when they are the same for all frames. Returns no frames if one cannot be placed.
fn multi_frame_headers(obj: &InMemDicomObject, number_of_frames: i64) -> Vec<FrameHeader> {
    let shared = obj
        .get(tags::SHARED_FUNCTIONAL_GROUPS_SEQUENCE)
        .and_then(|e| e.items())
        .and_then(|items| items.first());
    let per_frame = obj
        .get(tags::PER_FRAME_FUNCTIONAL_GROUPS_SEQUENCE)
        .and_then(|e| e.items())
        .unwrap_or(&[]);
    let lookup = |frame: usize, sequence: Tag, tag: Tag| -> Option<Vec<f64>> {
        let from = |group: &InMemDicomObject| {
            group
                .get(sequence)
                .and_then(|e| e.items())
                .and_then(|items| items.first())
                .and_then(|item| floats(item, tag))
        };
        per_frame
            .get(frame)
            .and_then(from)
            .or_else(|| shared.and_then(from))
    };
    let mut frames = Vec::new();
    for index in 0..usize::try_from(number_of_frames).unwrap_or(0) {
        let header = (|| {
            Some(FrameHeader {
                frame: u32::try_from(index).ok()?,
                position_lps_mm: vec3(&lookup(
                    index,
                    tags::PLANE_POSITION_SEQUENCE,
                    tags::IMAGE_POSITION_PATIENT,
                )?)?,
                orientation: six(&lookup(
                    index,
                    tags::PLANE_ORIENTATION_SEQUENCE,
                    tags::IMAGE_ORIENTATION_PATIENT,
                )?)?,
                pixel_spacing_mm: spacing_xy(&lookup(
                    index,
                    tags::PIXEL_MEASURES_SEQUENCE,
                    tags::PIXEL_SPACING,
                )?)?,
                rescale_slope: lookup(
                    index,
                    tags::PIXEL_VALUE_TRANSFORMATION_SEQUENCE,
                    tags::RESCALE_SLOPE,
                )
                .and_then(|v| v.first().copied())
                .or_else(|| first_float(obj, tags::RESCALE_SLOPE))
                .unwrap_or(1.0),
                rescale_intercept: lookup(
                    index,
                    tags::PIXEL_VALUE_TRANSFORMATION_SEQUENCE,
                    tags::RESCALE_INTERCEPT,
                )
                .and_then(|v| v.first().copied())
                .or_else(|| first_float(obj, tags::RESCALE_INTERCEPT))
                .unwrap_or(0.0),
            })
        })();
        match header {
            Some(h) => frames.push(h),
            None => return Vec::new(),
        }
    }
    frames
}

fn text(obj: &InMemDicomObject, tag: Tag) -> String {
    obj.get(tag)
        .and_then(|e| e.to_str().ok())
        .map(|s| {
            s.trim_matches(|c: char| c == '\0' || c.is_whitespace())
                .to_string()
        })
        .unwrap_or_default()
}

fn int(obj: &InMemDicomObject, tag: Tag) -> Option<i64> {
    obj.get(tag).and_then(|e| e.to_int::<i64>().ok())
}

fn floats(obj: &InMemDicomObject, tag: Tag) -> Option<Vec<f64>> {
    obj.get(tag).and_then(|e| e.to_multi_float64().ok())
}

fn first_float(obj: &InMemDicomObject, tag: Tag) -> Option<f64> {
    floats(obj, tag).and_then(|v| v.first().copied())
}

fn vec3(v: &[f64]) -> Option<Vec3> {
    (v.len() >= 3 && v[..3].iter().all(|x| x.is_finite())).then(|| [v[0], v[1], v[2]])
}

fn six(v: &[f64]) -> Option<[f64; 6]> {
    (v.len() >= 6 && v[..6].iter().all(|x| x.is_finite()))
        .then(|| [v[0], v[1], v[2], v[3], v[4], v[5]])
}

/// DICOM PixelSpacing is (row spacing, column spacing) = (y, x); we keep x first.
fn spacing_xy(v: &[f64]) -> Option<[f64; 2]> {
    let ok = v.len() >= 2 && v[..2].iter().all(|x| x.is_finite() && *x > 0.0);
    ok.then(|| [v[1], v[0]])
}
