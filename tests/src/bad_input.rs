//! Bad DICOM input made from real slices: a few consecutive LIDC-IDRI-0001 slices copied into a
//! temporary folder, then one of them damaged in a named way. Used by the CLI's bad-input suite
//! and the viewer's tests; the real files are only read, and never committed.

// Test helpers: failing loudly is their job.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use dicom_core::value::PrimitiveValue;
use dicom_core::{DataElement, Tag, VR};
use dicom_object::open_file;

/// Slices taken from the real series (consecutive in position).
pub const SLICES: usize = 6;
/// The slice that is damaged: in the middle, so that a gap there is a gap inside the volume.
pub const VICTIM: usize = 3;

const ROWS: Tag = Tag(0x0028, 0x0010);
const COLUMNS: Tag = Tag(0x0028, 0x0011);
const NUMBER_OF_FRAMES: Tag = Tag(0x0028, 0x0008);
const BITS_ALLOCATED: Tag = Tag(0x0028, 0x0100);
const SAMPLES_PER_PIXEL: Tag = Tag(0x0028, 0x0002);
const PHOTOMETRIC: Tag = Tag(0x0028, 0x0004);
const RESCALE_SLOPE: Tag = Tag(0x0028, 0x1053);
const RESCALE_INTERCEPT: Tag = Tag(0x0028, 0x1052);
const IMAGE_POSITION: Tag = Tag(0x0020, 0x0032);
const IMAGE_ORIENTATION: Tag = Tag(0x0020, 0x0037);
const PIXEL_SPACING: Tag = Tag(0x0028, 0x0030);

/// The source: `lidc/LIDC-IDRI-0001` under the shared data (see [`crate::shared_data`]).
pub fn source_series() -> Option<Vec<PathBuf>> {
    let dir = crate::shared_data("lidc/LIDC-IDRI-0001")?;
    let report = tessera_dicom::dicom::scan(&dir).expect("scanning LIDC-IDRI-0001");
    let series = &report.series[0];
    let layout = tessera_dicom::dicom::layout(series, Default::default()).expect("its layout");
    // Slices around the middle, in position order.
    let middle = layout.slices.len() / 2;
    Some(
        layout.slices[middle..middle + SLICES]
            .iter()
            .map(|s| match s {
                tessera_dicom::dicom::SliceSource::Frame(f) => series.files[f.file].path.clone(),
                other => panic!("LIDC-IDRI-0001 has no gaps, found {other:?}"),
            })
            .collect(),
    )
}

/// Copies the source slices into `dir/study` as `s0.dcm`... and returns that folder.
pub fn copy_study(sources: &[PathBuf], dir: &Path) -> PathBuf {
    let study = dir.join("study");
    std::fs::create_dir_all(&study).unwrap();
    for (i, source) in sources.iter().enumerate() {
        std::fs::copy(source, slice_path(&study, i)).unwrap();
    }
    study
}

pub fn slice_path(study: &Path, i: usize) -> PathBuf {
    study.join(format!("s{i}.dcm"))
}

/// One way to damage a study, and what the error must say about it.
#[derive(Debug)]
pub struct DicomKind {
    pub name: &'static str,
    /// Damages the copied study (usually slice [`VICTIM`]).
    pub damage: fn(&Path),
    /// Text the error must contain besides the file name (the reason).
    pub reason: &'static str,
    /// Whether the message names the damaged file (a missing file has no name to give).
    pub names_file: bool,
}

fn edit(study: &Path, f: impl FnOnce(&mut dicom_object::DefaultDicomObject)) {
    let path = slice_path(study, VICTIM);
    let mut obj = open_file(&path).unwrap();
    f(&mut obj);
    obj.write_to_file(&path).unwrap();
}

fn put(study: &Path, tag: Tag, vr: VR, value: PrimitiveValue) {
    edit(study, |obj| {
        obj.put(DataElement::new(tag, vr, value));
    });
}

fn put_str(study: &Path, tag: Tag, vr: VR, text: &str) {
    put(study, tag, vr, PrimitiveValue::from(text));
}

fn remove(study: &Path, tag: Tag) {
    edit(study, |obj| {
        obj.remove_element(tag);
    });
}

/// Rewrites the victim's bytes.
fn bytes(study: &Path, f: impl FnOnce(&mut Vec<u8>)) {
    let path = slice_path(study, VICTIM);
    let mut data = std::fs::read(&path).unwrap();
    f(&mut data);
    std::fs::write(&path, data).unwrap();
}

/// Offset of the PixelData element's length field.
fn pixel_length_at(data: &[u8]) -> usize {
    let tag = [0xE0, 0x7F, 0x10, 0x00];
    let at = data
        .windows(4)
        .rposition(|w| w == tag)
        .expect("a PixelData element");
    if &data[at + 4..at + 6] == b"OW" || &data[at + 4..at + 6] == b"OB" {
        at + 8
    } else {
        at + 4
    }
}

/// Every kind of damaged DICOM input the suite checks, generated from real slices.
#[allow(
    clippy::too_many_lines,
    reason = "one table of cases, read top to bottom"
)]
pub fn dicom_kinds() -> Vec<DicomKind> {
    macro_rules! kind {
        ($name:expr, $reason:expr, $damage:expr) => {
            DicomKind {
                name: $name,
                damage: $damage,
                reason: $reason,
                names_file: true,
            }
        };
    }
    vec![
        kind!("Rows 0", "Rows is 0", |s| put(
            s,
            ROWS,
            VR::US,
            PrimitiveValue::from(0u16)
        )),
        kind!("Columns 0", "Columns is 0", |s| put(
            s,
            COLUMNS,
            VR::US,
            PrimitiveValue::from(0u16)
        )),
        kind!("Rows 60000", "Rows is 60000, outside 1 to 16384", |s| put(
            s,
            ROWS,
            VR::US,
            PrimitiveValue::from(60000u16)
        )),
        kind!("NumberOfFrames 1e6", "NumberOfFrames is 1000000", |s| {
            put_str(s, NUMBER_OF_FRAMES, VR::IS, "1000000");
        }),
        kind!(
            "BitsAllocated 12",
            "BitsAllocated 12 is not supported",
            |s| put(s, BITS_ALLOCATED, VR::US, PrimitiveValue::from(12u16))
        ),
        kind!("SamplesPerPixel 3 (RGB claims)", "PixelData holds", |s| {
            put(s, SAMPLES_PER_PIXEL, VR::US, PrimitiveValue::from(3u16));
            put_str(s, PHOTOMETRIC, VR::CS, "RGB");
        }),
        kind!("RescaleSlope 0", "RescaleSlope 0 is not", |s| put_str(
            s,
            RESCALE_SLOPE,
            VR::DS,
            "0"
        )),
        kind!("RescaleSlope NaN", "RescaleSlope NaN is not", |s| put_str(
            s,
            RESCALE_SLOPE,
            VR::DS,
            "NaN"
        )),
        kind!(
            "RescaleSlope 1e30",
            "RescaleSlope 1000000000000000000000000000000 is not",
            |s| {
                put_str(s, RESCALE_SLOPE, VR::DS, "1e30");
            }
        ),
        kind!(
            "RescaleIntercept inf",
            "RescaleIntercept inf is not a finite",
            |s| put_str(s, RESCALE_INTERCEPT, VR::DS, "inf")
        ),
        kind!("position z 1e300", "ImagePositionPatient", |s| put_str(
            s,
            IMAGE_POSITION,
            VR::DS,
            "-166\\-171\\1e300"
        )),
        kind!("position z 1e7", "within 100000 mm", |s| put_str(
            s,
            IMAGE_POSITION,
            VR::DS,
            "-166\\-171\\1e7"
        )),
        kind!("position NaN", "ImagePositionPatient", |s| put_str(
            s,
            IMAGE_POSITION,
            VR::DS,
            "NaN\\0\\0"
        )),
        kind!(
            "position missing",
            "lacks ImagePositionPatient",
            |s| remove(s, IMAGE_POSITION)
        ),
        kind!("orientation NaN", "ImageOrientationPatient", |s| put_str(
            s,
            IMAGE_ORIENTATION,
            VR::DS,
            "1\\0\\0\\0\\NaN\\0"
        )),
        kind!(
            "PixelSpacing 1e6",
            "PixelSpacing [1000000.0, 1000000.0] is not",
            |s| {
                put_str(s, PIXEL_SPACING, VR::DS, "1e6\\1e6");
            }
        ),
        kind!("PixelSpacing 0", "PixelSpacing", |s| put_str(
            s,
            PIXEL_SPACING,
            VR::DS,
            "0\\0"
        )),
        kind!("PixelSpacing negative", "PixelSpacing", |s| put_str(
            s,
            PIXEL_SPACING,
            VR::DS,
            "-0.7\\0.7"
        )),
        kind!(
            "PixelData length 0xFFFFFFF0",
            "declares 4294967280 bytes",
            |s| bytes(s, |d| {
                let at = pixel_length_at(d);
                d[at..at + 4].copy_from_slice(&0xFFFF_FFF0u32.to_le_bytes());
            })
        ),
        kind!(
            "34 KB file declaring 4 GiB of pixels",
            "declares 4294967280 bytes",
            |s| bytes(s, |d| {
                let at = pixel_length_at(d);
                d[at..at + 4].copy_from_slice(&0xFFFF_FFF0u32.to_le_bytes());
                d.truncate(34 * 1024);
            })
        ),
        kind!("pixel data cut short", "bytes, but only", |s| bytes(
            s,
            |d| {
                let n = d.len() - 1000;
                d.truncate(n);
            }
        )),
        kind!("pixel data twice as long", "far more than", |s| bytes(
            s,
            |d| {
                let at = pixel_length_at(d);
                let len = u32::from_le_bytes([d[at], d[at + 1], d[at + 2], d[at + 3]]);
                d[at..at + 4].copy_from_slice(&(len * 2).to_le_bytes());
                d.extend(vec![0u8; len as usize]);
            }
        )),
        kind!("no pixel data", "no PixelData", |s| bytes(s, |d| {
            let at = pixel_length_at(d);
            // Cut just before the PixelData element's tag.
            let tag_at = if &d[at - 4..at - 2] == b"OW" {
                at - 8
            } else {
                at - 4
            };
            d.truncate(tag_at);
        })),
        kind!("header cut at 300 bytes", "remain in the file", |s| bytes(
            s,
            |d| d.truncate(300)
        )),
        kind!(
            "garbage after the DICM marker",
            "no TransferSyntaxUID in the file meta group",
            |s| bytes(s, |d| {
                for (i, b) in d.iter_mut().enumerate().skip(132) {
                    *b = (i * 7919 % 251) as u8;
                }
            })
        ),
        kind!("unknown transfer syntax", "transfer syntax", |s| bytes(
            s,
            |d| {
                let uid = b"1.2.840.10008.1.2.1\0";
                let at = d
                    .windows(uid.len())
                    .position(|w| w == uid)
                    .expect("explicit VR little endian");
                d[at..at + uid.len()].copy_from_slice(b"1.2.840.99999.1.2.1\0");
            }
        )),
        DicomKind {
            name: "a slice missing in mid-series",
            damage: |s| std::fs::remove_file(slice_path(s, VICTIM)).unwrap(),
            reason: "about 1 slice(s) missing",
            names_file: false,
        },
    ]
}
