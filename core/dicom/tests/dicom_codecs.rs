//! Compressed transfer syntaxes and enhanced (multi-frame) CT, each checked against the same
//! slices stored natively.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use dicom_core::value::C;
use dicom_core::{DataElement, PrimitiveValue, VR};
use dicom_dictionary_std::{tags, uids};
use dicom_encoding::TransferSyntaxIndex;
use dicom_object::meta::FileMetaTableBuilder;
use dicom_object::{InMemDicomObject, open_file};
use dicom_transfer_syntax_registry::TransferSyntaxRegistry;
use tessera_dicom::dicom::write::{CtSlice, PixelEncoding, write_ct_slice};
use tessera_dicom::dicom::{self};
use tessera_dicom::volume::{SeriesInfo, Voxels};

const COLS: u16 = 16;
const ROWS: u16 = 8;

fn values(slice: usize) -> Vec<i16> {
    // Negative and positive, runs and changes: exercises sign handling and RLE.
    (0..usize::from(COLS) * usize::from(ROWS))
        .map(|i| {
            if i % 5 == 0 {
                -1000
            } else {
                (slice * 37 + i * 3) as i16 - 200
            }
        })
        .collect()
}

fn write_series(dir: &std::path::Path, encoding: impl Fn(&[i16]) -> PixelEncoding) {
    let info = SeriesInfo {
        frame_of_reference_uid: "2.25.8".into(),
        series_uid: "2.25.7".into(),
        modality: "CT".into(),
        ..SeriesInfo::default()
    };
    for k in 0..3 {
        let stored = values(k);
        write_ct_slice(
            &dir.join(format!("s{k}.dcm")),
            &CtSlice {
                info: &info,
                sop_instance_uid: format!("2.25.70{k}"),
                instance_number: k as i64 + 1,
                position_lps_mm: [0.0, 0.0, 3.0 * k as f64],
                orientation: [1.0, 0.0, 0.0, 0.0, 1.0, 0.0],
                pixel_spacing_mm: [1.0, 1.0],
                slice_thickness_mm: 3.0,
                columns: COLS,
                rows: ROWS,
                stored: &stored,
                rescale_slope: 1.0,
                rescale_intercept: 0.0,
                image_type: "ORIGINAL\\PRIMARY\\AXIAL",
                encoding: encoding(&stored),
            },
        )
        .unwrap();
    }
}

fn expected_volume() -> Vec<i16> {
    (0..3).flat_map(values).collect()
}

fn loaded_values(dir: &std::path::Path) -> Vec<i16> {
    let (volume, _) = dicom::open(dir, None, Default::default()).unwrap();
    let Voxels::I16(a) = volume.voxels else {
        panic!("expected i16")
    };
    a.iter().copied().collect()
}

/// DICOM RLE (PS3.5 Annex G): one PackBits segment per byte plane, most significant first.
/// Literal runs only: valid RLE that any decoder must accept.
fn rle_encode(samples: &[i16]) -> Vec<u8> {
    let planes: [Vec<u8>; 2] = [
        samples.iter().map(|v| v.to_be_bytes()[0]).collect(),
        samples.iter().map(|v| v.to_be_bytes()[1]).collect(),
    ];
    let segments: Vec<Vec<u8>> = planes
        .iter()
        .map(|plane| {
            let mut out = Vec::new();
            for chunk in plane.chunks(128) {
                out.push((chunk.len() - 1) as u8);
                out.extend_from_slice(chunk);
            }
            if out.len() % 2 == 1 {
                out.push(0x80); // a no-op byte keeps the segment even, as the standard asks
            }
            out
        })
        .collect();
    let mut header = [0u32; 16];
    header[0] = 2;
    header[1] = 64;
    header[2] = 64 + segments[0].len() as u32;
    let mut bytes: Vec<u8> = header.iter().flat_map(|v| v.to_le_bytes()).collect();
    for s in segments {
        bytes.extend(s);
    }
    bytes
}

#[test]
fn rle_lossless_decodes_to_the_stored_values() {
    let dir = tempfile::tempdir().unwrap();
    write_series(dir.path(), |stored| PixelEncoding::Encapsulated {
        transfer_syntax_uid: uids::RLE_LOSSLESS.into(),
        fragments: vec![rle_encode(stored)],
    });
    assert_eq!(loaded_values(dir.path()), expected_volume());
}

/// Writes the native series into `dir`, re-encoded in the transfer syntax `uid`, and checks
/// that the scan sees that syntax.
fn write_series_as(dir: &std::path::Path, uid: &str) {
    write_series(dir, |_| PixelEncoding::Native);
    let syntax = TransferSyntaxRegistry.get(uid).unwrap();
    for k in 0..3 {
        let path = dir.join(format!("s{k}.dcm"));
        let mut obj = open_file(&path).unwrap();
        obj.update_meta(|meta| meta.set_transfer_syntax(syntax));
        obj.write_to_file(&path).unwrap();
    }
    let report = dicom::scan(dir).unwrap();
    assert_eq!(report.series[0].first().transfer_syntax_uid, uid);
}

#[test]
fn deflated_explicit_little_endian_decodes() {
    let dir = tempfile::tempdir().unwrap();
    write_series_as(dir.path(), uids::DEFLATED_EXPLICIT_VR_LITTLE_ENDIAN);
    assert_eq!(loaded_values(dir.path()), expected_volume());
}

/// Native pixels: little endian is read straight from the file, big endian through dicom-rs;
/// each gives the stored values.
#[test]
fn native_syntaxes_decode_to_the_stored_values() {
    for uid in [
        uids::EXPLICIT_VR_LITTLE_ENDIAN,
        uids::IMPLICIT_VR_LITTLE_ENDIAN,
        "1.2.840.10008.1.2.2", // explicit VR big endian (retired, still found in archives)
    ] {
        let dir = tempfile::tempdir().unwrap();
        write_series_as(dir.path(), uid);
        assert_eq!(loaded_values(dir.path()), expected_volume(), "{uid}");
    }
}

/// JPEG 2000 (lossless) through the pure-Rust openjp2 decoder, from a committed codestream.
#[test]
fn jpeg_2000_lossless_decodes_to_the_encoded_ramp() {
    let codestream = include_bytes!("fixtures/ramp_32x16.j2k").to_vec();
    let dir = tempfile::tempdir().unwrap();
    let info = SeriesInfo {
        frame_of_reference_uid: "2.25.8".into(),
        series_uid: "2.25.9".into(),
        modality: "CT".into(),
        ..SeriesInfo::default()
    };
    let placeholder = vec![0i16; 32 * 16]; // the writer ignores samples for encapsulated data
    for k in 0..2 {
        write_ct_slice(
            &dir.path().join(format!("j{k}.dcm")),
            &CtSlice {
                info: &info,
                sop_instance_uid: format!("2.25.90{k}"),
                instance_number: k + 1,
                position_lps_mm: [0.0, 0.0, 2.0 * k as f64],
                orientation: [1.0, 0.0, 0.0, 0.0, 1.0, 0.0],
                pixel_spacing_mm: [1.0, 1.0],
                slice_thickness_mm: 2.0,
                columns: 32,
                rows: 16,
                stored: &placeholder,
                rescale_slope: 1.0,
                rescale_intercept: -1024.0,
                image_type: "ORIGINAL\\PRIMARY\\AXIAL",
                encoding: PixelEncoding::Encapsulated {
                    transfer_syntax_uid: uids::JPEG2000_LOSSLESS.into(),
                    fragments: vec![codestream.clone()],
                },
            },
        )
        .unwrap();
    }
    let got = loaded_values(dir.path());
    let ramp: Vec<i16> = (0..512).map(|i| ((7 * i) % 3000) as i16 - 1024).collect();
    assert_eq!(got[..512], ramp[..]);
    assert_eq!(got[512..], ramp[..]);
}

/// Enhanced CT: one file, three frames, geometry in the functional groups, shuffled frame order.
#[test]
#[allow(
    clippy::too_many_lines,
    reason = "one table of cases, read top to bottom"
)]
fn enhanced_multi_frame_ct_uses_its_functional_groups() {
    let dir = tempfile::tempdir().unwrap();
    let order = [2usize, 0, 1];
    let ds_strs = |v: &[f64]| -> PrimitiveValue {
        PrimitiveValue::Strs(v.iter().map(|x| x.to_string()).collect::<C<String>>())
    };
    let item = |elements: Vec<DataElement<InMemDicomObject>>| {
        InMemDicomObject::from_element_iter(elements)
    };
    let sequence = |tag, items: Vec<InMemDicomObject>| {
        DataElement::new(tag, VR::SQ, dicom_core::value::DataSetSequence::from(items))
    };
    let shared = item(vec![
        sequence(
            tags::PLANE_ORIENTATION_SEQUENCE,
            vec![item(vec![DataElement::new(
                tags::IMAGE_ORIENTATION_PATIENT,
                VR::DS,
                ds_strs(&[1.0, 0.0, 0.0, 0.0, 1.0, 0.0]),
            )])],
        ),
        sequence(
            tags::PIXEL_MEASURES_SEQUENCE,
            vec![item(vec![
                DataElement::new(tags::PIXEL_SPACING, VR::DS, ds_strs(&[0.8, 0.6])),
                DataElement::new(tags::SLICE_THICKNESS, VR::DS, ds_strs(&[3.0])),
            ])],
        ),
        sequence(
            tags::PIXEL_VALUE_TRANSFORMATION_SEQUENCE,
            vec![item(vec![
                DataElement::new(tags::RESCALE_INTERCEPT, VR::DS, ds_strs(&[-1024.0])),
                DataElement::new(tags::RESCALE_SLOPE, VR::DS, ds_strs(&[1.0])),
            ])],
        ),
    ]);
    let per_frame: Vec<InMemDicomObject> = order
        .iter()
        .map(|&k| {
            item(vec![sequence(
                tags::PLANE_POSITION_SEQUENCE,
                vec![item(vec![DataElement::new(
                    tags::IMAGE_POSITION_PATIENT,
                    VR::DS,
                    ds_strs(&[0.0, 0.0, 3.0 * k as f64]),
                )])],
            )])
        })
        .collect();
    let pixels: C<u8> = order
        .iter()
        .flat_map(|&k| values(k))
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let mut obj = InMemDicomObject::new_empty();
    let mut put = |tag, vr, value: PrimitiveValue| {
        obj.put(DataElement::new(tag, vr, value));
    };
    put(
        tags::SOP_CLASS_UID,
        VR::UI,
        uids::ENHANCED_CT_IMAGE_STORAGE.into(),
    );
    put(tags::SOP_INSTANCE_UID, VR::UI, "2.25.99".into());
    put(tags::MODALITY, VR::CS, "CT".into());
    put(tags::SERIES_INSTANCE_UID, VR::UI, "2.25.98".into());
    put(tags::NUMBER_OF_FRAMES, VR::IS, "3".into());
    put(tags::SAMPLES_PER_PIXEL, VR::US, PrimitiveValue::from(1u16));
    put(
        tags::PHOTOMETRIC_INTERPRETATION,
        VR::CS,
        "MONOCHROME2".into(),
    );
    put(tags::ROWS, VR::US, PrimitiveValue::from(ROWS));
    put(tags::COLUMNS, VR::US, PrimitiveValue::from(COLS));
    put(tags::BITS_ALLOCATED, VR::US, PrimitiveValue::from(16u16));
    put(tags::BITS_STORED, VR::US, PrimitiveValue::from(16u16));
    put(tags::HIGH_BIT, VR::US, PrimitiveValue::from(15u16));
    put(
        tags::PIXEL_REPRESENTATION,
        VR::US,
        PrimitiveValue::from(1u16),
    );
    put(tags::PIXEL_DATA, VR::OW, PrimitiveValue::U8(pixels));
    obj.put(sequence(
        tags::SHARED_FUNCTIONAL_GROUPS_SEQUENCE,
        vec![shared],
    ));
    obj.put(sequence(
        tags::PER_FRAME_FUNCTIONAL_GROUPS_SEQUENCE,
        per_frame,
    ));
    obj.with_meta(FileMetaTableBuilder::new().transfer_syntax(uids::EXPLICIT_VR_LITTLE_ENDIAN))
        .unwrap()
        .write_to_file(dir.path().join("enhanced.dcm"))
        .unwrap();

    let (volume, report) = dicom::open(dir.path(), None, Default::default()).unwrap();
    assert_eq!(report.series[0].frame_count(), 3);
    assert_eq!(volume.geometry.size, [16, 8, 3]);
    assert_eq!(volume.geometry.spacing_mm[..2], [0.6, 0.8]);
    assert!((volume.geometry.spacing_mm[2] - 3.0).abs() < 1e-9);
    let Voxels::I16(a) = volume.voxels else {
        panic!("expected i16")
    };
    let got: Vec<i16> = a.iter().copied().collect();
    let want: Vec<i16> = expected_volume().iter().map(|v| v - 1024).collect();
    assert_eq!(got, want);
}
