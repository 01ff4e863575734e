//! What one DICOM file says about itself, read without its pixel data.
//!
//! Classic CT puts one slice per file; enhanced (multi-frame) CT puts the per-slice geometry in
//! functional group sequences. Both become a [`FileHeader`] with one [`FrameHeader`] per frame,
//! so that grouping and sorting never care which kind a slice came from.

use std::path::{Path, PathBuf};

use dicom_core::Tag;
use dicom_dictionary_std::tags;
use dicom_object::{DefaultDicomObject, InMemDicomObject, OpenFileOptions};

use dicom_object::file::ReadPreamble;

use super::part10::{self, Opened, Part10};

use super::guard::Extent;
use crate::geometry::Vec3;
use crate::volume::{MAX_VOXELS, SeriesInfo, StudyIdentity};

/// Rows and columns above this are not CT images (the largest CT matrices are 2048).
pub const MAX_SIDE: u32 = 16384;
/// Frames in one file above this are refused (an enhanced CT of a whole body has a few thousand).
pub const MAX_FRAMES: i64 = 20_000;
/// Positions further than this from the origin (100 m) are not in a patient.
pub const MAX_POSITION_MM: f64 = 1e5;
/// Rescale slopes and intercepts beyond this do not map stored values to HU (CT uses 1 and
/// -1024; values past it overflow `f32` HU or make every voxel the same).
pub const MAX_RESCALE: f64 = 1e5;
/// Pixel spacings outside this range are not CT pixels, mm.
pub const MIN_SPACING_MM: f64 = 1e-3;
pub const MAX_SPACING_MM: f64 = 100.0;

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
    pub sop_instance_uid: String,
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

/// A DICOM image file that cannot be used, with what could still be read of it (so that a
/// series can say which of its slices is missing, and where).
#[derive(Debug, Clone, PartialEq)]
pub struct Unreadable {
    pub reason: String,
    pub series_uid: Option<String>,
    pub position_lps_mm: Option<Vec3>,
}

impl Unreadable {
    fn new(reason: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            series_uid: None,
            position_lps_mm: None,
        }
    }
}

/// What reading one file's header found.
#[derive(Debug, Clone)]
pub enum HeaderOutcome {
    Image(Box<FileHeader>),
    NotAnImage(NotAnImage),
    Unreadable(Unreadable),
}

/// Why a file could not be opened for its pixels: the file system's error, or what is wrong
/// with its content (not DICOM, or a structure its size cannot hold).
#[derive(Debug)]
pub(crate) enum OpenFailure {
    Io(std::io::Error),
    Content(String),
}

/// Opens `path` as a regular file (see [`crate::io::open_regular`]) and checks its element
/// structure against its size (see [`guard`](super::guard)).
pub(crate) fn open_checked(path: &Path) -> Result<(Part10, Extent), OpenFailure> {
    match part10::open(path).map_err(OpenFailure::Io)? {
        Opened::Dicom(mut stream, bytes) => {
            let extent = super::guard::check(&mut stream, bytes).map_err(OpenFailure::Content)?;
            Ok((stream, extent))
        }
        Opened::NotDicom(reason) => Err(OpenFailure::Content(reason)),
    }
}

/// Reads `range` of `file` into memory (the range was checked against the file's size).
pub(crate) fn read_range(
    file: &mut Part10,
    range: std::ops::Range<u64>,
) -> std::io::Result<Vec<u8>> {
    use std::io::{Read, Seek, SeekFrom};
    file.seek(SeekFrom::Start(range.start))?;
    let mut bytes = Vec::new();
    file.take(range.end - range.start).read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Reads the header of `path` (never its pixel data). The file is opened once: marker,
/// structure check and header all read through the same handle.
pub fn read_header(path: &Path) -> HeaderOutcome {
    let unreadable = |reason: String| HeaderOutcome::Unreadable(Unreadable::new(reason));
    let (mut file, file_bytes) = match part10::open(path) {
        Ok(Opened::Dicom(stream, bytes)) => (stream, bytes),
        Ok(Opened::NotDicom(reason)) => {
            return HeaderOutcome::NotAnImage(NotAnImage::NotDicom(reason));
        }
        // Not a regular file (a FIFO, a socket): not a DICOM file, listed by kind.
        Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => {
            return HeaderOutcome::NotAnImage(NotAnImage::NotDicom(e.to_string()));
        }
        Err(e) => return unreadable(e.to_string()),
    };
    let extent = match super::guard::check(&mut file, file_bytes) {
        Ok(extent) => extent,
        Err(reason) => return unreadable(reason),
    };
    let bytes = match read_range(&mut file, 0..extent.header_end) {
        Ok(bytes) => bytes,
        Err(e) => return unreadable(e.to_string()),
    };
    let obj = match OpenFileOptions::new()
        .read_preamble(ReadPreamble::Always)
        .read_until(tags::PIXEL_DATA)
        .from_reader(bytes.as_slice())
    {
        Ok(obj) => obj,
        Err(e) => return unreadable(e.to_string()),
    };
    header_from_object(path, &obj, &extent)
}

#[allow(
    clippy::too_many_lines,
    reason = "a flat list of the attributes a slice must have, each read once"
)]
fn header_from_object(path: &Path, obj: &DefaultDicomObject, extent: &Extent) -> HeaderOutcome {
    let sop_class_uid = text(obj, tags::SOP_CLASS_UID);
    let meta_class = obj
        .meta()
        .media_storage_sop_class_uid
        .trim_end_matches('\0')
        .to_string();
    if meta_class == dicom_dictionary_std::uids::MEDIA_STORAGE_DIRECTORY_STORAGE {
        return HeaderOutcome::NotAnImage(NotAnImage::NoPixels(
            "DICOMDIR (media directory index)".into(),
        ));
    }
    let (Some(rows), Some(columns)) = (int(obj, tags::ROWS), int(obj, tags::COLUMNS)) else {
        let class = if sop_class_uid.is_empty() {
            meta_class
        } else {
            sop_class_uid
        };
        return HeaderOutcome::NotAnImage(NotAnImage::NoPixels(format!(
            "no Rows/Columns: not an image (SOP class {class})"
        )));
    };
    let series_uid = text(obj, tags::SERIES_INSTANCE_UID);
    let broken = |reason: String| {
        HeaderOutcome::Unreadable(Unreadable {
            reason,
            series_uid: Some(series_uid.clone()).filter(|u| !u.is_empty()),
            position_lps_mm: floats(obj, tags::IMAGE_POSITION_PATIENT)
                .and_then(|v| vec3(&v))
                .filter(|p| p.iter().all(|c| c.abs() <= MAX_POSITION_MM)),
        })
    };
    let side = |value: i64, name: &str| -> Result<u32, String> {
        u32::try_from(value)
            .ok()
            .filter(|v| (1..=MAX_SIDE).contains(v))
            .ok_or_else(|| format!("{name} is {value}, outside 1 to {MAX_SIDE}"))
    };
    let (rows, columns) = match (side(rows, "Rows"), side(columns, "Columns")) {
        (Ok(r), Ok(c)) => (r, c),
        (Err(e), _) | (_, Err(e)) => return broken(e),
    };
    let number_of_frames = int(obj, tags::NUMBER_OF_FRAMES).unwrap_or(1);
    if !(1..=MAX_FRAMES).contains(&number_of_frames) {
        return broken(format!(
            "NumberOfFrames is {number_of_frames}, outside 1 to {MAX_FRAMES}"
        ));
    }
    if let Err(reason) = check_pixel_promise(obj, extent, rows, columns, number_of_frames) {
        return broken(reason);
    }
    let frames = if number_of_frames > 1
        || obj
            .get(tags::PER_FRAME_FUNCTIONAL_GROUPS_SEQUENCE)
            .is_some()
    {
        multi_frame_headers(obj, number_of_frames)
    } else {
        single_frame_header(obj).map(|frame| frame.into_iter().collect())
    };
    let frames = match frames {
        Ok(frames) if !frames.is_empty() => frames,
        // No geometry at all: an image that was never a slice (a secondary capture, a
        // screenshot), not a damaged one.
        Ok(_) if !has_any_geometry(obj) => {
            return HeaderOutcome::NotAnImage(NotAnImage::NoPixels(
                "an image without ImagePositionPatient, ImageOrientationPatient or PixelSpacing: not a slice of a volume (e.g. a secondary capture)".into(),
            ));
        }
        Ok(_) => {
            return broken(
                "lacks ImagePositionPatient, ImageOrientationPatient or PixelSpacing (the slice cannot be placed)".into(),
            );
        }
        Err(reason) => return broken(reason),
    };

    let window_hu = match (
        floats(obj, tags::WINDOW_CENTER),
        floats(obj, tags::WINDOW_WIDTH),
    ) {
        (Some(c), Some(w)) if !c.is_empty() && !w.is_empty() => Some((c[0], w[0])),
        _ => None,
    };
    let info = SeriesInfo {
        series_uid,
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
        window_hu: window_hu.filter(|(c, w)| c.is_finite() && w.is_finite() && *w > 0.0),
        slice_thickness_mm: floats(obj, tags::SLICE_THICKNESS)
            .and_then(|v| v.first().copied())
            .filter(|t| t.is_finite()),
        frame_of_reference_uid: text(obj, tags::FRAME_OF_REFERENCE_UID),
        identity: identity(obj),
    };
    HeaderOutcome::Image(Box::new(FileHeader {
        path: path.to_path_buf(),
        info,
        sop_class_uid,
        sop_instance_uid: text(obj, tags::SOP_INSTANCE_UID),
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

/// The Patient and General Study attributes, verbatim.
fn identity(obj: &InMemDicomObject) -> StudyIdentity {
    StudyIdentity {
        patient_name: text(obj, tags::PATIENT_NAME),
        patient_id: text(obj, tags::PATIENT_ID),
        patient_birth_date: text(obj, tags::PATIENT_BIRTH_DATE),
        patient_sex: text(obj, tags::PATIENT_SEX),
        study_date: text(obj, tags::STUDY_DATE),
        study_time: text(obj, tags::STUDY_TIME),
        study_id: text(obj, tags::STUDY_ID),
        accession_number: text(obj, tags::ACCESSION_NUMBER),
        referring_physician_name: text(obj, tags::REFERRING_PHYSICIAN_NAME),
    }
}

/// Whether any of the attributes that place a slice is present (top level or per frame).
fn has_any_geometry(obj: &InMemDicomObject) -> bool {
    [
        tags::IMAGE_POSITION_PATIENT,
        tags::IMAGE_ORIENTATION_PATIENT,
        tags::PIXEL_SPACING,
        tags::PER_FRAME_FUNCTIONAL_GROUPS_SEQUENCE,
        tags::SHARED_FUNCTIONAL_GROUPS_SEQUENCE,
    ]
    .into_iter()
    .any(|tag| obj.get(tag).is_some())
}

/// Checks what the header promises against the pixel data the file holds, before any of it is
/// decoded: supported sample sizes, a size within [`MAX_VOXELS`], and, for uncompressed
/// syntaxes, exactly enough bytes (a shorter element is a truncated file; a much longer one is
/// not what the header describes).
fn check_pixel_promise(
    obj: &InMemDicomObject,
    extent: &Extent,
    rows: u32,
    columns: u32,
    frames: i64,
) -> Result<(), String> {
    let Some(pixels) = &extent.pixel_data else {
        return Err("no PixelData (the file may be truncated)".into());
    };
    let bits = int(obj, tags::BITS_ALLOCATED).unwrap_or(16);
    if !matches!(bits, 8 | 16 | 32) {
        return Err(format!(
            "BitsAllocated {bits} is not supported (8, 16 or 32)"
        ));
    }
    let samples = int(obj, tags::SAMPLES_PER_PIXEL).unwrap_or(1);
    if !(1..=4).contains(&samples) {
        return Err(format!("SamplesPerPixel {samples} is not 1 to 4"));
    }
    // Bounded above: rows and columns <= MAX_SIDE, frames <= MAX_FRAMES, samples <= 4.
    let voxels = u64::from(rows) * u64::from(columns) * frames.unsigned_abs();
    if voxels > MAX_VOXELS as u64 {
        return Err(format!(
            "{columns}x{rows} pixels x {frames} frame(s) is over the limit of {MAX_VOXELS} voxels per file"
        ));
    }
    let promised = voxels * samples.unsigned_abs() * (bits.unsigned_abs() / 8);
    let held = pixels.end - pixels.start;
    let native = matches!(
        extent.transfer_syntax_uid.as_str(),
        "1.2.840.10008.1.2" | "1.2.840.10008.1.2.1" | "1.2.840.10008.1.2.2"
    );
    if native && held < promised {
        return Err(format!(
            "PixelData holds {held} bytes, but Rows x Columns x frames x samples promise {promised} (truncated?)"
        ));
    }
    if native && held > promised + promised / 2 + 2 {
        return Err(format!(
            "PixelData holds {held} bytes, far more than the {promised} its header describes"
        ));
    }
    Ok(())
}

fn single_frame_header(obj: &InMemDicomObject) -> Result<Option<FrameHeader>, String> {
    let (Some(position), Some(orientation), Some(spacing)) = (
        floats(obj, tags::IMAGE_POSITION_PATIENT),
        floats(obj, tags::IMAGE_ORIENTATION_PATIENT),
        floats(obj, tags::PIXEL_SPACING),
    ) else {
        return Ok(None);
    };
    checked_frame(
        0,
        &position,
        &orientation,
        &spacing,
        floats(obj, tags::RESCALE_SLOPE),
        floats(obj, tags::RESCALE_INTERCEPT),
    )
    .map(Some)
}

/// Builds a frame header from its attribute values, refusing values no CT can have.
fn checked_frame(
    frame: u32,
    position: &[f64],
    orientation: &[f64],
    spacing: &[f64],
    slope: Option<Vec<f64>>,
    intercept: Option<Vec<f64>>,
) -> Result<FrameHeader, String> {
    let position_lps_mm = vec3(position)
        .filter(|p| p.iter().all(|c| c.abs() <= MAX_POSITION_MM))
        .ok_or_else(|| {
            format!(
                "ImagePositionPatient {position:?} is not three finite numbers within {MAX_POSITION_MM} mm"
            )
        })?;
    let orientation = six(orientation).ok_or_else(|| {
        format!("ImageOrientationPatient {orientation:?} is not six finite numbers")
    })?;
    let pixel_spacing_mm = spacing_xy(spacing).ok_or_else(|| {
        format!(
            "PixelSpacing {spacing:?} is not two numbers from {MIN_SPACING_MM} to {MAX_SPACING_MM} mm"
        )
    })?;
    let rescale_slope = slope.and_then(|v| v.first().copied()).unwrap_or(1.0);
    if !(rescale_slope.is_finite() && rescale_slope != 0.0 && rescale_slope.abs() <= MAX_RESCALE) {
        return Err(format!(
            "RescaleSlope {rescale_slope} is not a finite, non-zero number within {MAX_RESCALE}"
        ));
    }
    let rescale_intercept = intercept.and_then(|v| v.first().copied()).unwrap_or(0.0);
    if !(rescale_intercept.is_finite() && rescale_intercept.abs() <= MAX_RESCALE) {
        return Err(format!(
            "RescaleIntercept {rescale_intercept} is not a finite number within {MAX_RESCALE}"
        ));
    }
    Ok(FrameHeader {
        frame,
        position_lps_mm,
        orientation,
        pixel_spacing_mm,
        rescale_slope,
        rescale_intercept,
    })
}

/// Enhanced CT: each frame's attributes live in the per-frame functional group item, or in the
/// shared one when they are the same for all frames. Returns no frames if one cannot be placed.
fn multi_frame_headers(
    obj: &InMemDicomObject,
    number_of_frames: i64,
) -> Result<Vec<FrameHeader>, String> {
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
        let (Some(position), Some(orientation), Some(spacing)) = (
            lookup(
                index,
                tags::PLANE_POSITION_SEQUENCE,
                tags::IMAGE_POSITION_PATIENT,
            ),
            lookup(
                index,
                tags::PLANE_ORIENTATION_SEQUENCE,
                tags::IMAGE_ORIENTATION_PATIENT,
            ),
            lookup(index, tags::PIXEL_MEASURES_SEQUENCE, tags::PIXEL_SPACING),
        ) else {
            return Ok(Vec::new());
        };
        let value = |tag| {
            lookup(index, tags::PIXEL_VALUE_TRANSFORMATION_SEQUENCE, tag)
                .or_else(|| floats(obj, tag))
        };
        // `index` < MAX_FRAMES, checked by the caller.
        let frame =
            u32::try_from(index).map_err(|_| format!("frame {index} is beyond any file's"))?;
        let header = checked_frame(
            frame,
            &position,
            &orientation,
            &spacing,
            value(tags::RESCALE_SLOPE),
            value(tags::RESCALE_INTERCEPT),
        )
        .map_err(|reason| format!("frame {index}: {reason}"))?;
        frames.push(header);
    }
    Ok(frames)
}

/// An attribute's text without padding (`\0`, spaces); empty when absent.
pub(crate) fn text(obj: &InMemDicomObject, tag: Tag) -> String {
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

fn vec3(v: &[f64]) -> Option<Vec3> {
    (v.len() >= 3 && v[..3].iter().all(|x| x.is_finite())).then(|| [v[0], v[1], v[2]])
}

fn six(v: &[f64]) -> Option<[f64; 6]> {
    (v.len() >= 6 && v[..6].iter().all(|x| x.is_finite()))
        .then(|| [v[0], v[1], v[2], v[3], v[4], v[5]])
}

/// DICOM PixelSpacing is (row spacing, column spacing) = (y, x); we keep x first.
fn spacing_xy(v: &[f64]) -> Option<[f64; 2]> {
    let ok = v.len() >= 2
        && v[..2]
            .iter()
            .all(|x| (MIN_SPACING_MM..=MAX_SPACING_MM).contains(x));
    ok.then(|| [v[1], v[0]])
}
