//! NIfTI-1 (`.nii`, gzip-compressed or not): the header through the `nifti` crate, the
//! geometry from the sform (or else the qform) as NIfTI defines them, in RAS, turned to LPS.

use std::io::{BufReader, Read};
use std::path::Path;

use super::{Header, ImageFileError, SampleType, lps_from_ras, read_exact_capped};
use crate::geometry::{Affine3, Vec3};
use crate::volume::{SeriesInfo, Volume};

/// The most bytes of extensions between the header and the voxels we skip (`vox_offset`):
/// real files carry a few kilobytes; more is a damaged header.
const MAX_VOX_OFFSET: f32 = 16.0 * 1024.0 * 1024.0;
/// NIfTI-1's header size; `vox_offset` counts from the file's start.
const HEADER_BYTES: u64 = 348;

pub fn read(path: &Path) -> Result<Volume, ImageFileError> {
    let fail = ImageFileError::maker(path, super::Format::Nifti.name());
    let (file, _) = crate::io::open_regular(path).map_err(|e| fail(e.to_string()))?;
    let mut file = BufReader::new(file);
    let mut magic = [0u8; 2];
    file.read_exact(&mut magic)
        .map_err(|e| fail(format!("reading its first bytes: {e}")))?;
    let head = std::io::Cursor::new(magic).chain(file);
    let mut reader: Box<dyn Read> = if magic == [0x1f, 0x8b] {
        Box::new(flate2::read::MultiGzDecoder::new(head))
    } else {
        Box::new(head)
    };
    let nifti = nifti::NiftiHeader::from_reader(&mut reader)
        .map_err(|e| fail(format!("not a NIfTI-1 header ({e})")))?;
    let mut warnings = Vec::new();
    let header = header(&nifti, &mut warnings).map_err(&fail)?;
    let bytes = header.check().map_err(&fail)?;
    let skip = nifti.vox_offset.max(HEADER_BYTES as f32) as u64 - HEADER_BYTES;
    std::io::copy(&mut (&mut reader).take(skip), &mut std::io::sink())
        .map_err(|e| fail(format!("skipping to the voxels: {e}")))?;
    let data = read_exact_capped(&mut reader, bytes).map_err(&fail)?;
    header.volume(&data, info(path), warnings).map_err(&fail)
}

fn header(h: &nifti::NiftiHeader, warnings: &mut Vec<String>) -> Result<Header, String> {
    if &h.magic != b"n+1\0" {
        return Err(format!(
            "its magic is {:?}, not a single-file NIfTI-1 (\"n+1\"); a .hdr/.img pair or NIfTI-2 is not read",
            String::from_utf8_lossy(&h.magic)
        ));
    }
    let dims = usize::from(h.dim[0]);
    if !(3..=7).contains(&dims) {
        return Err(format!("{dims} dimensions, not a 3D volume"));
    }
    if let Some(extra) = h.dim[4..=dims].iter().find(|d| **d > 1) {
        return Err(format!(
            "{dims} dimensions with {extra} entries beyond the third: a series of volumes, not one CT volume"
        ));
    }
    let size = [h.dim[1], h.dim[2], h.dim[3]].map(usize::from);
    if !(h.vox_offset.is_finite() && h.vox_offset <= MAX_VOX_OFFSET) {
        return Err(format!(
            "its voxels start at byte {}, past the {MAX_VOX_OFFSET} a header may take",
            h.vox_offset
        ));
    }
    let samples = match h.datatype {
        2 => SampleType::U8,
        4 => SampleType::I16,
        8 => SampleType::I32,
        16 => SampleType::F32,
        64 => SampleType::F64,
        256 => SampleType::I8,
        512 => SampleType::U16,
        768 => SampleType::U32,
        code => {
            return Err(format!(
                "its datatype {code} is not one value per voxel of a type read here (8 to 64-bit integers or floats)"
            ));
        }
    };
    // NIfTI: a slope of 0 means the values are stored as they are.
    let (slope, intercept) = if h.scl_slope == 0.0 {
        (1.0, 0.0)
    } else {
        (f64::from(h.scl_slope), f64::from(h.scl_inter))
    };
    let mm_per_unit = match h.xyzt_units & 0o7 {
        1 => 1000.0,
        2 => 1.0,
        3 => 0.001,
        _ => {
            warnings.push("its header gives no spatial unit: read as millimetres".into());
            1.0
        }
    };
    let ras_from_voxel = if h.sform_code > 0 {
        let rows = [h.srow_x, h.srow_y, h.srow_z].map(|r| r.map(f64::from));
        Affine3 {
            linear: rows.map(|r| [r[0], r[1], r[2]]),
            translation: rows.map(|r| r[3]),
        }
    } else if h.qform_code > 0 {
        qform(h)?
    } else {
        warnings.push(
            "its header gives no orientation (sform and qform codes 0): axes read as R, A, S with the origin at voxel 0"
                .into(),
        );
        let [sx, sy, sz] = [1, 2, 3].map(|i| f64::from(h.pixdim[i]).abs());
        Affine3::from_columns([[sx, 0.0, 0.0], [0.0, sy, 0.0], [0.0, 0.0, sz]], [0.0; 3])
    };
    let scaled = Affine3 {
        linear: ras_from_voxel.linear.map(|r| r.map(|v| v * mm_per_unit)),
        translation: ras_from_voxel.translation.map(|v| v * mm_per_unit),
    };
    if !(scaled.linear.iter().flatten().all(|v| v.is_finite())) {
        return Err("its orientation holds a value that is not a finite number".into());
    }
    Ok(Header {
        size,
        world_from_voxel: lps_from_ras(scaled),
        samples,
        big_endian: h.endianness == nifti::Endianness::Big,
        slope,
        intercept,
    })
}

/// NIfTI's method 2: a rotation from the quaternion (b, c, d), the voxel sizes, `qfac`.
fn qform(h: &nifti::NiftiHeader) -> Result<Affine3, String> {
    let [b, c, d] = [h.quatern_b, h.quatern_c, h.quatern_d].map(f64::from);
    let a = (1.0 - (b * b + c * c + d * d)).max(0.0).sqrt();
    let rotation = [
        [
            a * a + b * b - c * c - d * d,
            2.0 * (b * c - a * d),
            2.0 * (b * d + a * c),
        ],
        [
            2.0 * (b * c + a * d),
            a * a + c * c - b * b - d * d,
            2.0 * (c * d - a * b),
        ],
        [
            2.0 * (b * d - a * c),
            2.0 * (c * d + a * b),
            a * a + d * d - c * c - b * b,
        ],
    ];
    let qfac = if h.pixdim[0] < 0.0 { -1.0 } else { 1.0 };
    let scale: Vec3 = [
        f64::from(h.pixdim[1]),
        f64::from(h.pixdim[2]),
        f64::from(h.pixdim[3]) * qfac,
    ];
    if scale.iter().any(|s| !s.is_finite()) {
        return Err("its voxel sizes are not finite numbers".into());
    }
    Ok(Affine3 {
        linear: rotation.map(|row| [0, 1, 2].map(|col| row[col] * scale[col])),
        translation: [h.quatern_x, h.quatern_y, h.quatern_z].map(f64::from),
    })
}

fn info(path: &Path) -> SeriesInfo {
    SeriesInfo {
        series_description: path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        ..SeriesInfo::default()
    }
}
