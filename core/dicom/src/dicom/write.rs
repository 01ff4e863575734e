//! Writes new CT image files (the phantom's study, the tests' synthetic edge cases).
//!
//! Files are written atomically: a temporary file beside the target, then a rename. It never
//! opens an existing file for writing.

use std::path::{Path, PathBuf};

use dicom_core::value::{C, PixelFragmentSequence};
use dicom_core::{DataElement, PrimitiveValue, VR};
use dicom_dictionary_std::{tags, uids};
use dicom_object::InMemDicomObject;
use dicom_object::meta::FileMetaTableBuilder;

use crate::geometry::Vec3;

/// The SOP class of the CT images this module writes.
pub const CT_IMAGE_STORAGE: &str = uids::CT_IMAGE_STORAGE;
use crate::volume::SeriesInfo;

/// How the pixel data is stored.
#[derive(Debug, Clone, PartialEq)]
pub enum PixelEncoding {
    /// Explicit VR little endian, native 16-bit signed samples.
    Native,
    /// Encapsulated fragments under another transfer syntax (tests use it for unsupported ones).
    Encapsulated {
        transfer_syntax_uid: String,
        fragments: Vec<Vec<u8>>,
    },
}

/// One CT slice to write.
#[derive(Debug, Clone)]
pub struct CtSlice<'a> {
    pub info: &'a SeriesInfo,
    /// The frame of reference is `info.frame_of_reference_uid`.
    pub sop_instance_uid: String,
    pub instance_number: i64,
    /// Centre of the first voxel, LPS mm.
    pub position_lps_mm: Vec3,
    /// Row direction then column direction.
    pub orientation: [f64; 6],
    /// `[x, y]` mm (written to PixelSpacing as y, x, as DICOM orders it).
    pub pixel_spacing_mm: [f64; 2],
    pub slice_thickness_mm: f64,
    pub columns: u16,
    pub rows: u16,
    /// Stored values, row after row; HU = stored * slope + intercept.
    pub stored: &'a [i16],
    pub rescale_slope: f64,
    pub rescale_intercept: f64,
    pub image_type: &'a str,
    pub encoding: PixelEncoding,
}

/// Why a file could not be written.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("cannot write {}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot encode DICOM for {}", path.display())]
    Encode {
        path: PathBuf,
        #[source]
        source: EncodeError,
    },
}

/// Why a data set could not be made into Part 10 bytes.
#[derive(Debug, thiserror::Error)]
pub enum EncodeError {
    #[error("cannot build the file meta group")]
    Meta(#[source] Box<dicom_object::WithMetaError>),
    #[error("cannot write the data set")]
    Write(#[source] Box<dicom_object::WriteError>),
    #[error("{stored} stored values for a {columns}x{rows} slice")]
    PixelCount {
        stored: usize,
        columns: u16,
        rows: u16,
    },
}

/// Writes `slice` to `path` atomically.
#[allow(
    clippy::too_many_lines,
    reason = "the attributes of one CT slice, one line each, in tag order"
)]
pub fn write_ct_slice(path: &Path, slice: &CtSlice<'_>) -> Result<(), WriteError> {
    let encode_error = |source: EncodeError| WriteError::Encode {
        path: path.to_path_buf(),
        source,
    };
    let info = slice.info;
    let mut obj = InMemDicomObject::new_empty();
    let mut put_str = |tag, vr, value: &str| {
        obj.put(DataElement::new(tag, vr, PrimitiveValue::from(value)));
    };
    put_str(tags::SPECIFIC_CHARACTER_SET, VR::CS, "ISO_IR 100");
    put_str(tags::IMAGE_TYPE, VR::CS, slice.image_type);
    put_str(tags::SOP_CLASS_UID, VR::UI, CT_IMAGE_STORAGE);
    put_str(tags::SOP_INSTANCE_UID, VR::UI, &slice.sop_instance_uid);
    let who = &info.identity;
    put_str(tags::STUDY_DATE, VR::DA, &who.study_date);
    put_str(tags::STUDY_TIME, VR::TM, &who.study_time);
    put_str(tags::ACCESSION_NUMBER, VR::SH, &who.accession_number);
    put_str(tags::MODALITY, VR::CS, &info.modality);
    put_str(tags::MANUFACTURER, VR::LO, &info.manufacturer);
    put_str(tags::STUDY_DESCRIPTION, VR::LO, &info.study_description);
    put_str(tags::SERIES_DESCRIPTION, VR::LO, &info.series_description);
    put_str(
        tags::REFERRING_PHYSICIAN_NAME,
        VR::PN,
        &who.referring_physician_name,
    );
    put_str(tags::PATIENT_NAME, VR::PN, &who.patient_name);
    put_str(tags::PATIENT_ID, VR::LO, &who.patient_id);
    put_str(tags::PATIENT_BIRTH_DATE, VR::DA, &who.patient_birth_date);
    put_str(tags::PATIENT_SEX, VR::CS, &who.patient_sex);
    put_str(tags::SLICE_THICKNESS, VR::DS, &ds(slice.slice_thickness_mm));
    put_str(tags::STUDY_INSTANCE_UID, VR::UI, &info.study_uid);
    put_str(tags::SERIES_INSTANCE_UID, VR::UI, &info.series_uid);
    put_str(tags::STUDY_ID, VR::SH, &who.study_id);
    // Type 2 (and 2C) attributes of the CT Image IOD: present, empty where unknown.
    put_str(tags::BODY_PART_EXAMINED, VR::CS, "CHEST");
    put_str(tags::PATIENT_POSITION, VR::CS, "HFS");
    put_str(tags::POSITION_REFERENCE_INDICATOR, VR::LO, "");
    put_str(tags::KVP, VR::DS, "");
    put_str(tags::ACQUISITION_NUMBER, VR::IS, "");
    put_str(
        tags::SERIES_NUMBER,
        VR::IS,
        &info.series_number.unwrap_or(1).to_string(),
    );
    put_str(
        tags::INSTANCE_NUMBER,
        VR::IS,
        &slice.instance_number.to_string(),
    );
    put_str(
        tags::FRAME_OF_REFERENCE_UID,
        VR::UI,
        &info.frame_of_reference_uid,
    );
    put_str(tags::PHOTOMETRIC_INTERPRETATION, VR::CS, "MONOCHROME2");
    put_str(
        tags::RESCALE_INTERCEPT,
        VR::DS,
        &ds(slice.rescale_intercept),
    );
    put_str(tags::RESCALE_SLOPE, VR::DS, &ds(slice.rescale_slope));
    put_str(tags::RESCALE_TYPE, VR::LO, "HU");
    let mut put_multi = |tag, values: &[f64]| {
        let strs: C<String> = values.iter().map(|v| ds(*v)).collect();
        obj.put(DataElement::new(tag, VR::DS, PrimitiveValue::Strs(strs)));
    };
    put_multi(tags::IMAGE_POSITION_PATIENT, &slice.position_lps_mm);
    put_multi(tags::IMAGE_ORIENTATION_PATIENT, &slice.orientation);
    put_multi(
        tags::PIXEL_SPACING,
        &[slice.pixel_spacing_mm[1], slice.pixel_spacing_mm[0]],
    );
    if let Some((center, width)) = info.window_hu {
        put_multi(tags::WINDOW_CENTER, &[center]);
        put_multi(tags::WINDOW_WIDTH, &[width]);
    }
    let mut put_us = |tag, value: u16| {
        obj.put(DataElement::new(tag, VR::US, PrimitiveValue::from(value)));
    };
    put_us(tags::SAMPLES_PER_PIXEL, 1);
    put_us(tags::ROWS, slice.rows);
    put_us(tags::COLUMNS, slice.columns);
    put_us(tags::BITS_ALLOCATED, 16);
    put_us(tags::BITS_STORED, 16);
    put_us(tags::HIGH_BIT, 15);
    put_us(tags::PIXEL_REPRESENTATION, 1);

    let transfer_syntax = match &slice.encoding {
        PixelEncoding::Native => {
            let expected = usize::from(slice.rows) * usize::from(slice.columns);
            if slice.stored.len() != expected {
                return Err(encode_error(EncodeError::PixelCount {
                    stored: slice.stored.len(),
                    columns: slice.columns,
                    rows: slice.rows,
                }));
            }
            let bytes: C<u8> = slice.stored.iter().flat_map(|v| v.to_le_bytes()).collect();
            obj.put(DataElement::new(
                tags::PIXEL_DATA,
                VR::OW,
                PrimitiveValue::U8(bytes),
            ));
            uids::EXPLICIT_VR_LITTLE_ENDIAN.to_string()
        }
        PixelEncoding::Encapsulated {
            transfer_syntax_uid,
            fragments,
        } => {
            let sequence = PixelFragmentSequence::new(Vec::<u32>::new(), fragments.clone());
            obj.put(DataElement::new(tags::PIXEL_DATA, VR::OB, sequence));
            transfer_syntax_uid.clone()
        }
    };
    let file = obj
        .with_meta(
            FileMetaTableBuilder::new()
                .transfer_syntax(transfer_syntax)
                .implementation_class_uid(IMPLEMENTATION_CLASS_UID)
                .implementation_version_name("TESSERA_0_1"),
        )
        .map_err(|e| encode_error(EncodeError::Meta(Box::new(e))))?;
    let mut bytes = Vec::with_capacity(slice.stored.len() * 2 + 4096);
    file.write_all(&mut bytes)
        .map_err(|e| encode_error(EncodeError::Write(Box::new(e))))?;
    crate::io::write_atomic(path, &bytes).map_err(|source| WriteError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// A new UID under `2.25` (PS3.5 B.2): a random (version 4) UUID as a decimal integer.
pub fn new_uid() -> String {
    format!("2.25.{}", uuid::Uuid::new_v4().as_u128())
}

/// Tessera's implementation class UID, under the UUID-derived `2.25` root.
pub const IMPLEMENTATION_CLASS_UID: &str = "2.25.177313712146311437227307613474474196337";

/// A DICOM decimal string: at most 16 characters, no trailing zeros.
pub fn ds(value: f64) -> String {
    for decimals in (0..=6).rev() {
        let mut s = format!("{value:.decimals$}");
        if s.contains('.') {
            s = s.trim_end_matches('0').trim_end_matches('.').to_string();
        }
        if s == "-0" {
            s = "0".into();
        }
        if s.len() <= 16 {
            return s;
        }
    }
    format!("{value:.3e}")
}

#[cfg(test)]
mod tests {
    use super::ds;

    #[test]
    fn decimal_strings_are_short_and_exact_enough() {
        assert_eq!(ds(0.703125), "0.703125");
        assert_eq!(ds(-1024.0), "-1024");
        assert_eq!(ds(2.5), "2.5");
        assert_eq!(ds(-0.0), "0");
        assert_eq!(ds(-123456.1234567), "-123456.123457");
    }
}
