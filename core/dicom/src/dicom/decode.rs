//! Decodes the pixel data of a laid-out series into a [`Volume`], in parallel over files.
//!
//! Stored values are read from the decoded native bytes (bits stored masked, sign extended) and
//! rescaled to HU with each frame's own slope and intercept. The volume stays `i16` when that is
//! exact (slope 1, whole intercept, values in range), computed in integers; otherwise it is
//! `f32`. Interpolated slices (missing from the series) are rounded to whole HU in an `i16`
//! volume: they are synthetic, so nothing measured is lost.

use dicom_dictionary_std::tags;
use dicom_encoding::TransferSyntaxIndex;
use dicom_object::OpenFileOptions;
use dicom_object::file::ReadPreamble;
use dicom_pixeldata::{DecodedPixelData, PixelDecoder, PixelRepresentation};
use dicom_transfer_syntax_registry::TransferSyntaxRegistry;
use ndarray::Array3;
use rayon::prelude::*;

use super::DicomError;
use super::header::{FileHeader, OpenFailure};
use super::layout::{FrameRef, SeriesLayout, SliceSource};
use super::scan::SeriesFiles;
use crate::volume::{SourceInstance, Volume, Voxels};

/// Checks that every file's transfer syntax can be decoded here, before any decoding starts.
pub fn check_transfer_syntaxes(series: &SeriesFiles) -> Result<(), DicomError> {
    for file in &series.files {
        let uid = file.transfer_syntax_uid.as_str();
        let unsupported = |name: &str| DicomError::UnsupportedTransferSyntax {
            name: name.to_string(),
            uid: uid.to_string(),
            path: file.path.clone(),
        };
        match TransferSyntaxRegistry.get(uid) {
            None => return Err(unsupported("unknown")),
            Some(ts) if !ts.can_decode_all() => return Err(unsupported(ts.name())),
            Some(_) => {}
        }
    }
    Ok(())
}

/// One decoded frame in HU.
enum Frame {
    I16(Vec<i16>),
    F32(Vec<f32>),
}

impl Frame {
    fn value(&self, i: usize) -> f32 {
        match self {
            Self::I16(v) => f32::from(v[i]),
            Self::F32(v) => v[i],
        }
    }
}

/// Decodes every frame that `layout` uses and assembles the volume.
///
/// A file that fails is reported with every other failure of the series
/// ([`DicomError::Undecodable`]), so that the caller can name them all or leave them out.
pub fn decode(series: &SeriesFiles, layout: &SeriesLayout) -> Result<Volume, DicomError> {
    check_transfer_syntaxes(series)?;
    let [nx, ny, nz] = layout.geometry.size;
    let frame_len = nx * ny;

    // Which frames of which file are needed, then decode each file once.
    let mut needed: Vec<Vec<u32>> = vec![Vec::new(); series.files.len()];
    for slice in &layout.slices {
        for frame_ref in frame_refs(slice) {
            needed[frame_ref.file].push(frame_ref.frame);
        }
    }
    let results: Vec<Result<Vec<(u32, Frame)>, DicomError>> = series
        .files
        .par_iter()
        .zip(needed.par_iter_mut())
        .map(|(file, frames)| {
            frames.sort_unstable();
            frames.dedup();
            decode_file(file, frames, frame_len)
        })
        .collect();
    let mut decoded = Vec::with_capacity(results.len());
    let mut failed = Vec::new();
    for (index, result) in results.into_iter().enumerate() {
        match result {
            Ok(frames) => decoded.push(frames),
            Err(error) => {
                failed.push((index, error.reason()));
                decoded.push(Vec::new());
            }
        }
    }
    if !failed.is_empty() {
        return Err(DicomError::Undecodable {
            series: super::series_name(series),
            files: failed
                .into_iter()
                .map(|(index, reason)| (series.files[index].path.clone(), reason))
                .collect(),
        });
    }
    let lookup = |frame_ref: FrameRef| -> &Frame {
        // Invariant: every frame in `needed` was decoded above, sorted by frame index.
        let file_frames = &decoded[frame_ref.file];
        let at = file_frames.partition_point(|(f, _)| *f < frame_ref.frame);
        &file_frames[at].1
    };

    let all_integer = decoded
        .iter()
        .flatten()
        .all(|(_, f)| matches!(f, Frame::I16(_)));
    let voxels = if all_integer {
        let mut volume = Array3::<i16>::zeros((nz, ny, nx));
        if let Some(flat) = volume.as_slice_mut() {
            flat.par_chunks_mut(frame_len)
                .zip(layout.slices.par_iter())
                .for_each(|(out, slice)| fill_i16(out, slice, &lookup));
        }
        Voxels::I16(volume)
    } else {
        let mut volume = Array3::<f32>::zeros((nz, ny, nx));
        if let Some(flat) = volume.as_slice_mut() {
            flat.par_chunks_mut(frame_len)
                .zip(layout.slices.par_iter())
                .for_each(|(out, slice)| fill_f32(out, slice, &lookup));
        }
        Voxels::F32(volume)
    };
    Ok(Volume {
        voxels,
        geometry: layout.geometry.clone(),
        info: series.first().info.clone(),
        warnings: layout.warnings.clone(),
        filled_slices: layout.filled.clone(),
        instances: source_instances(series, layout),
    })
}

/// The files whose frames make up the volume, in slice order, each once.
fn source_instances(series: &SeriesFiles, layout: &SeriesLayout) -> Vec<SourceInstance> {
    let mut seen = vec![false; series.files.len()];
    let mut instances = Vec::new();
    for frame_ref in layout.slices.iter().flat_map(frame_refs) {
        if !std::mem::replace(&mut seen[frame_ref.file], true) {
            let file = &series.files[frame_ref.file];
            instances.push(SourceInstance {
                sop_class_uid: file.sop_class_uid.clone(),
                sop_instance_uid: file.sop_instance_uid.clone(),
            });
        }
    }
    instances
}

fn frame_refs(slice: &SliceSource) -> Vec<FrameRef> {
    match *slice {
        SliceSource::Frame(f) => vec![f],
        SliceSource::Blend { below, above, .. } => vec![below, above],
    }
}

fn fill_i16<'a>(out: &mut [i16], slice: &SliceSource, lookup: &impl Fn(FrameRef) -> &'a Frame) {
    match *slice {
        SliceSource::Frame(f) => {
            if let Frame::I16(values) = lookup(f) {
                out.copy_from_slice(values);
            }
        }
        SliceSource::Blend {
            below,
            above,
            weight,
        } => {
            let (lo, hi, w) = (lookup(below), lookup(above), weight as f32);
            for (i, o) in out.iter_mut().enumerate() {
                let (a, b) = (lo.value(i), hi.value(i));
                // Between two i16 values: always in range.
                *o = (a + w * (b - a)).round() as i16;
            }
        }
    }
}

fn fill_f32<'a>(out: &mut [f32], slice: &SliceSource, lookup: &impl Fn(FrameRef) -> &'a Frame) {
    match *slice {
        SliceSource::Frame(f) => match lookup(f) {
            Frame::F32(values) => out.copy_from_slice(values),
            Frame::I16(values) => {
                for (o, v) in out.iter_mut().zip(values) {
                    *o = f32::from(*v);
                }
            }
        },
        SliceSource::Blend {
            below,
            above,
            weight,
        } => {
            let (lo, hi, w) = (lookup(below), lookup(above), weight as f32);
            for (i, o) in out.iter_mut().enumerate() {
                let (a, b) = (lo.value(i), hi.value(i));
                *o = a + w * (b - a);
            }
        }
    }
}

fn decode_file(
    file: &FileHeader,
    frames: &[u32],
    frame_len: usize,
) -> Result<Vec<(u32, Frame)>, DicomError> {
    let path = file.path.as_path();
    let fail = |reason: String| DicomError::Decode {
        path: path.to_path_buf(),
        reason,
    };
    // Only the bytes up to the end of the pixel data, checked against the file's size: no
    // declared length is allocated before it is known to be there, and a tail is never parsed.
    let io_error = |source| DicomError::Io {
        path: path.to_path_buf(),
        source,
    };
    let (mut handle, extent) = super::header::open_checked(path).map_err(|e| match e {
        OpenFailure::Io(source) => io_error(source),
        OpenFailure::Content(reason) => fail(reason),
    })?;
    let parse_error = |e: dicom_object::ReadError| DicomError::Parse {
        path: path.to_path_buf(),
        reason: e.to_string(),
    };
    // Native little-endian pixels are the file's bytes: dicom-rs reads the header, the pixels
    // go from the file to one buffer (no parsed copy, no decoded copy).
    if let Some(pixel_range) = extent.pixel_data.clone()
        && NATIVE_LITTLE_ENDIAN.contains(&extent.transfer_syntax_uid.as_str())
    {
        let header =
            super::header::read_range(&mut handle, 0..extent.header_end).map_err(io_error)?;
        let obj = OpenFileOptions::new()
            .read_preamble(ReadPreamble::Always)
            .read_until(tags::PIXEL_DATA)
            .from_reader(header.as_slice())
            .map_err(parse_error)?;
        if let Some(format) = SampleFormat::of_header(&obj).map_err(&fail)? {
            let bytes = super::header::read_range(&mut handle, pixel_range).map_err(io_error)?;
            let frame_bytes = frame_len * format.bytes_per_sample;
            return convert_frames(file, frames, frame_len, &format, &fail, |frame| {
                let start = frame as usize * frame_bytes;
                Ok(bytes.get(start..).unwrap_or_default())
            });
        }
    }
    let bytes = super::header::read_range(&mut handle, 0..extent.data_end).map_err(io_error)?;
    let obj = OpenFileOptions::new()
        .read_preamble(ReadPreamble::Always)
        .from_reader(bytes.as_slice())
        .map_err(parse_error)?;
    if obj.get(tags::PIXEL_DATA).is_none() {
        return Err(fail("no PixelData (the file may be truncated)".into()));
    }
    let pixels = obj.decode_pixel_data().map_err(|e| fail(e.to_string()))?;
    check_grayscale(
        u32::from(pixels.samples_per_pixel()),
        pixels.photometric_interpretation().as_ref(),
        pixels.photometric_interpretation().is_monochrome(),
    )
    .map_err(&fail)?;
    let format = SampleFormat::of(&pixels).map_err(&fail)?;
    convert_frames(file, frames, frame_len, &format, &fail, |frame| {
        pixels.frame_data(frame).map_err(|e| fail(e.to_string()))
    })
}

/// Transfer syntaxes whose pixel data is stored as is, little endian.
const NATIVE_LITTLE_ENDIAN: [&str; 2] = [
    dicom_dictionary_std::uids::EXPLICIT_VR_LITTLE_ENDIAN,
    dicom_dictionary_std::uids::IMPLICIT_VR_LITTLE_ENDIAN,
];

fn check_grayscale(
    samples_per_pixel: u32,
    photometric: &str,
    monochrome: bool,
) -> Result<(), String> {
    if samples_per_pixel != 1 || !monochrome {
        return Err(format!(
            "not a grayscale image ({samples_per_pixel} samples per pixel, {photometric})"
        ));
    }
    Ok(())
}

/// Each wanted frame of `file` in HU, from its stored bytes (`frame_bytes` gives them).
fn convert_frames<'b>(
    file: &FileHeader,
    frames: &[u32],
    frame_len: usize,
    format: &SampleFormat,
    fail: &impl Fn(String) -> DicomError,
    mut frame_bytes: impl FnMut(u32) -> Result<&'b [u8], DicomError>,
) -> Result<Vec<(u32, Frame)>, DicomError> {
    frames
        .iter()
        .map(|&frame| {
            let (slope, intercept) = file
                .frames
                .iter()
                .find(|f| f.frame == frame)
                .map_or((1.0, 0.0), |f| (f.rescale_slope, f.rescale_intercept));
            let bytes = frame_bytes(frame)?;
            let expected = frame_len * format.bytes_per_sample;
            if bytes.len() < expected {
                return Err(fail(format!(
                    "frame {frame} has {} bytes of pixel data, {expected} expected (truncated?)",
                    bytes.len()
                )));
            }
            let bytes = &bytes[..expected];
            let integer = slope == 1.0 && intercept.fract() == 0.0 && intercept.abs() < 65536.0;
            let values = match integer
                .then(|| format.to_i16(bytes, intercept as i32))
                .flatten()
            {
                Some(values) => Frame::I16(values),
                None => Frame::F32(format.to_f32(bytes, slope, intercept)),
            };
            Ok((frame, values))
        })
        .collect()
}

/// How stored samples are laid out in the decoded bytes (little endian, native).
struct SampleFormat {
    bytes_per_sample: usize,
    bits_stored: u32,
    signed: bool,
}

impl SampleFormat {
    fn of(pixels: &DecodedPixelData<'_>) -> Result<Self, String> {
        Self::new(
            pixels.bits_allocated(),
            pixels.bits_stored(),
            pixels.pixel_representation() == PixelRepresentation::Signed,
        )
    }

    fn new(bits_allocated: u16, bits_stored: u16, signed: bool) -> Result<Self, String> {
        if !matches!(bits_allocated, 8 | 16 | 32) {
            return Err(format!(
                "{bits_allocated} bits allocated per sample is not supported"
            ));
        }
        Ok(Self {
            bytes_per_sample: usize::from(bits_allocated / 8),
            bits_stored: u32::from(bits_stored.clamp(1, bits_allocated)),
            signed,
        })
    }

    /// From a header's image pixel attributes; `None` when one is missing (dicom-rs's full
    /// decoding then says which).
    fn of_header(obj: &dicom_object::DefaultDicomObject) -> Result<Option<Self>, String> {
        let number = |tag| -> Option<u16> { obj.get(tag)?.to_int::<u16>().ok() };
        let (Some(samples), Some(allocated), Some(stored), Some(representation)) = (
            number(tags::SAMPLES_PER_PIXEL),
            number(tags::BITS_ALLOCATED),
            number(tags::BITS_STORED),
            number(tags::PIXEL_REPRESENTATION),
        ) else {
            return Ok(None);
        };
        let photometric = obj
            .get(tags::PHOTOMETRIC_INTERPRETATION)
            .and_then(|e| e.to_str().ok())
            .map(|s| {
                s.trim_matches(|c: char| c.is_whitespace() || c == '\0')
                    .to_string()
            })
            .unwrap_or_default();
        let monochrome = matches!(photometric.as_str(), "MONOCHROME1" | "MONOCHROME2");
        check_grayscale(u32::from(samples), &photometric, monochrome)?;
        Self::new(allocated, stored, representation == 1).map(Some)
    }

    /// Calls `f` with the stored value of each sample: bits stored masked and, if signed, sign
    /// extended (shifting to the top of an i64 and back does both). One loop per sample width,
    /// so that the compiler can vectorise each.
    fn for_each_stored(&self, bytes: &[u8], mut f: impl FnMut(i64)) {
        let shift = 64 - self.bits_stored;
        let extend = |raw: u64| {
            if self.signed {
                ((raw << shift) as i64) >> shift
            } else {
                ((raw << shift) >> shift) as i64
            }
        };
        match self.bytes_per_sample {
            1 => bytes.iter().for_each(|b| f(extend(u64::from(*b)))),
            2 => bytes
                .chunks_exact(2)
                .for_each(|b| f(extend(u64::from(u16::from_le_bytes([b[0], b[1]]))))),
            _ => bytes.chunks_exact(4).for_each(|b| {
                f(extend(u64::from(u32::from_le_bytes([
                    b[0], b[1], b[2], b[3],
                ]))));
            }),
        }
    }

    /// `stored + intercept` as i16, or `None` if a value does not fit.
    fn to_i16(&self, bytes: &[u8], intercept: i32) -> Option<Vec<i16>> {
        let mut out = vec![0i16; bytes.len() / self.bytes_per_sample];
        let (mut lo, mut hi) = (i64::MAX, i64::MIN);
        if self.bytes_per_sample == 2 {
            // The common CT case, in i32 and without branches so that it vectorises.
            let shift = 32 - self.bits_stored;
            let (lo32, hi32) = if self.signed {
                convert_u16(bytes, &mut out, |raw| {
                    ((raw << shift) as i32 >> shift) + intercept
                })
            } else {
                convert_u16(bytes, &mut out, |raw| {
                    ((raw << shift) >> shift) as i32 + intercept
                })
            };
            (lo, hi) = (i64::from(lo32), i64::from(hi32));
        } else {
            let mut values = out.iter_mut();
            self.for_each_stored(bytes, |v| {
                let hu = v + i64::from(intercept);
                (lo, hi) = (lo.min(hu), hi.max(hu));
                if let Some(o) = values.next() {
                    *o = hu as i16;
                }
            });
        }
        (lo >= i64::from(i16::MIN) && hi <= i64::from(i16::MAX)).then_some(out)
    }

    fn to_f32(&self, bytes: &[u8], slope: f64, intercept: f64) -> Vec<f32> {
        let mut values = Vec::with_capacity(bytes.len() / self.bytes_per_sample);
        self.for_each_stored(bytes, |v| {
            values.push((v as f64 * slope + intercept) as f32);
        });
        values
    }
}

/// Converts little-endian u16 samples with `hu`, returning the smallest and largest result.
fn convert_u16(bytes: &[u8], out: &mut [i16], hu: impl Fn(u32) -> i32) -> (i32, i32) {
    let (mut lo, mut hi) = (i32::MAX, i32::MIN);
    for (o, b) in out.iter_mut().zip(bytes.chunks_exact(2)) {
        let v = hu(u32::from(u16::from_le_bytes([b[0], b[1]])));
        lo = lo.min(v);
        hi = hi.max(v);
        *o = v as i16;
    }
    (lo, hi)
}
