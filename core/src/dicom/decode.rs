//! Decodes the pixel data of a laid-out series into a [`Volume`], in parallel over files.
//!
//! Stored values are read from the decoded native bytes (bits stored masked, sign extended) and
//! rescaled to HU with each frame's own slope and intercept. The volume stays `i16` when that is
//! exact (integer rescale, values in range); otherwise it is `f32`.

use std::path::Path;

use dicom_dictionary_std::tags;
use dicom_encoding::TransferSyntaxIndex;
use dicom_object::OpenFileOptions;
use dicom_pixeldata::{DecodedPixelData, PixelDecoder, PixelRepresentation};
use dicom_transfer_syntax_registry::TransferSyntaxRegistry;
use ndarray::Array3;
use rayon::prelude::*;

use super::DicomError;
use super::layout::{FrameRef, SeriesLayout, SliceSource};
use super::scan::SeriesFiles;
use crate::volume::{Volume, Voxels};

/// Checks that every file's transfer syntax can be decoded here, before any decoding starts.
pub fn check_transfer_syntaxes(series: &SeriesFiles) -> Result<(), DicomError> {
    for file in &series.files {
        check_transfer_syntax(&file.transfer_syntax_uid, &file.path)?;
    }
    Ok(())
}

fn check_transfer_syntax(uid: &str, path: &Path) -> Result<(), DicomError> {
    let unsupported = |name: &str| DicomError::UnsupportedTransferSyntax {
        name: name.to_string(),
        uid: uid.to_string(),
        path: path.to_path_buf(),
    };
    match TransferSyntaxRegistry.get(uid) {
        None => Err(unsupported("unknown")),
        Some(ts) if !ts.can_decode_all() => Err(unsupported(ts.name())),
        Some(_) => Ok(()),
    }
}

/// Decodes every frame that `layout` uses and assembles the volume.
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
    let decoded: Vec<Vec<(u32, Vec<f32>)>> = series
        .files
        .par_iter()
        .zip(needed.par_iter_mut())
        .map(|(file, frames)| {
            frames.sort_unstable();
            frames.dedup();
            decode_file(&file.path, frames, frame_len, &series_frame_rescale(file))
        })
        .collect::<Result<_, _>>()?;
    let lookup = |frame_ref: FrameRef| -> &[f32] {
        // Invariant: every frame in `needed` was decoded above, in the same order.
        let file_frames = &decoded[frame_ref.file];
        let at = file_frames.partition_point(|(f, _)| *f < frame_ref.frame);
        &file_frames[at].1
    };

    let integer_rescale = series
        .files
        .iter()
        .flat_map(|f| f.frames.iter())
        .all(|f| f.rescale_slope == 1.0 && f.rescale_intercept.fract() == 0.0);
    let voxels = if integer_rescale {
        let mut volume = Array3::<i16>::zeros((nz, ny, nx));
        let fits = volume
            .as_slice_mut()
            .map(|flat| {
                flat.par_chunks_mut(frame_len)
                    .zip(layout.slices.par_iter())
                    .all(|(out, slice)| fill_i16(out, slice, &lookup))
            })
            .unwrap_or(false);
        if fits {
            Some(Voxels::I16(volume))
        } else {
            None
        }
    } else {
        None
    };
    let voxels = match voxels {
        Some(v) => v,
        None => {
            let mut volume = Array3::<f32>::zeros((nz, ny, nx));
            if let Some(flat) = volume.as_slice_mut() {
                flat.par_chunks_mut(frame_len)
                    .zip(layout.slices.par_iter())
                    .for_each(|(out, slice)| fill_f32(out, slice, &lookup));
            }
            Voxels::F32(volume)
        }
    };
    Ok(Volume {
        voxels,
        geometry: layout.geometry.clone(),
        info: series.first().info.clone(),
        warnings: layout.warnings.clone(),
    })
}

fn frame_refs(slice: &SliceSource) -> Vec<FrameRef> {
    match *slice {
        SliceSource::Frame(f) => vec![f],
        SliceSource::Blend { below, above, .. } => vec![below, above],
    }
}

fn fill_f32<'a>(out: &mut [f32], slice: &SliceSource, lookup: &impl Fn(FrameRef) -> &'a [f32]) {
    match *slice {
        SliceSource::Frame(f) => out.copy_from_slice(lookup(f)),
        SliceSource::Blend {
            below,
            above,
            weight,
        } => {
            let (lo, hi, w) = (lookup(below), lookup(above), weight as f32);
            for ((o, a), b) in out.iter_mut().zip(lo).zip(hi) {
                *o = a + w * (b - a);
            }
        }
    }
}

/// Fills one slice as `i16`; `false` when a value does not fit (the caller falls back to f32).
fn fill_i16<'a>(
    out: &mut [i16],
    slice: &SliceSource,
    lookup: &impl Fn(FrameRef) -> &'a [f32],
) -> bool {
    let convert = |v: f32| -> Option<i16> {
        let r = v.round();
        (r >= f32::from(i16::MIN) && r <= f32::from(i16::MAX)).then_some(r as i16)
    };
    match *slice {
        SliceSource::Frame(f) => {
            for (o, v) in out.iter_mut().zip(lookup(f)) {
                match convert(*v) {
                    Some(x) => *o = x,
                    None => return false,
                }
            }
        }
        SliceSource::Blend {
            below,
            above,
            weight,
        } => {
            // Interpolated slices are synthetic: rounding them to whole HU loses nothing real.
            let (lo, hi, w) = (lookup(below), lookup(above), weight as f32);
            for ((o, a), b) in out.iter_mut().zip(lo).zip(hi) {
                match convert(a + w * (b - a)) {
                    Some(x) => *o = x,
                    None => return false,
                }
            }
        }
    }
    true
}

/// Rescale per frame, as the header read it (enhanced CT may differ frame to frame).
fn series_frame_rescale(file: &super::header::FileHeader) -> Vec<(u32, f64, f64)> {
    file.frames
        .iter()
        .map(|f| (f.frame, f.rescale_slope, f.rescale_intercept))
        .collect()
}

fn decode_file(
    path: &Path,
    frames: &[u32],
    frame_len: usize,
    rescale: &[(u32, f64, f64)],
) -> Result<Vec<(u32, Vec<f32>)>, DicomError> {
    let fail = |reason: String| DicomError::Decode {
        path: path.to_path_buf(),
        reason,
    };
    let obj = OpenFileOptions::new()
        .open_file(path)
        .map_err(|e| DicomError::Parse {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
    if obj.get(tags::PIXEL_DATA).is_none() {
        return Err(fail("no PixelData (the file may be truncated)".into()));
    }
    let pixels = obj.decode_pixel_data().map_err(|e| fail(e.to_string()))?;
    if pixels.samples_per_pixel() != 1 || !pixels.photometric_interpretation().is_monochrome() {
        return Err(fail(format!(
            "not a grayscale image ({} samples per pixel, {})",
            pixels.samples_per_pixel(),
            pixels.photometric_interpretation()
        )));
    }
    frames
        .iter()
        .map(|&frame| {
            let (slope, intercept) = rescale
                .iter()
                .find(|(f, _, _)| *f == frame)
                .map_or((1.0, 0.0), |(_, s, i)| (*s, *i));
            let values = stored_values(&pixels, frame, frame_len).map_err(&fail)?;
            let hu = values
                .into_iter()
                .map(|v| (v * slope + intercept) as f32)
                .collect();
            Ok((frame, hu))
        })
        .collect()
}

/// The stored sample values of one frame, as `f64` (exact for every integer DICOM allows).
fn stored_values(
    pixels: &DecodedPixelData<'_>,
    frame: u32,
    frame_len: usize,
) -> Result<Vec<f64>, String> {
    let bytes = pixels.frame_data(frame).map_err(|e| e.to_string())?;
    let bits_allocated = pixels.bits_allocated();
    let bits_stored = u32::from(pixels.bits_stored().clamp(1, bits_allocated.max(1)));
    let signed = pixels.pixel_representation() == PixelRepresentation::Signed;
    let bytes_per_sample = usize::from(bits_allocated / 8);
    if !matches!(bits_allocated, 8 | 16 | 32) {
        return Err(format!(
            "{bits_allocated} bits allocated per sample is not supported"
        ));
    }
    if bytes.len() < frame_len * bytes_per_sample {
        return Err(format!(
            "frame {frame} has {} bytes of pixel data, {} expected (truncated?)",
            bytes.len(),
            frame_len * bytes_per_sample
        ));
    }
    let mask: u32 = if bits_stored >= 32 {
        u32::MAX
    } else {
        (1u32 << bits_stored) - 1
    };
    let sign_bit: u32 = 1u32 << (bits_stored - 1);
    let value = |raw: u32| -> f64 {
        let v = raw & mask;
        if signed && v & sign_bit != 0 {
            f64::from(v) - f64::from(mask) - 1.0
        } else {
            f64::from(v)
        }
    };
    let samples = bytes[..frame_len * bytes_per_sample].chunks_exact(bytes_per_sample);
    Ok(match bytes_per_sample {
        1 => samples.map(|b| value(u32::from(b[0]))).collect(),
        2 => samples
            .map(|b| value(u32::from(u16::from_le_bytes([b[0], b[1]]))))
            .collect(),
        _ => samples
            .map(|b| value(u32::from_le_bytes([b[0], b[1], b[2], b[3]])))
            .collect(),
    })
}
