//! Stored samples to Hounsfield units: the element types NIfTI and MetaImage share.

use ndarray::Array3;

use crate::volume::Voxels;

/// How one voxel is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SampleType {
    U8,
    I8,
    U16,
    I16,
    U32,
    I32,
    F32,
    F64,
}

impl SampleType {
    pub fn bytes(self) -> usize {
        match self {
            Self::U8 | Self::I8 => 1,
            Self::U16 | Self::I16 => 2,
            Self::U32 | Self::I32 | Self::F32 => 4,
            Self::F64 => 8,
        }
    }

    /// The stored value of the sample starting at `b` (at least [`SampleType::bytes`] long).
    fn value(self, b: &[u8], big_endian: bool) -> f64 {
        macro_rules! decode {
            ($t:ty, $n:literal) => {{
                let mut raw = [0u8; $n];
                raw.copy_from_slice(&b[..$n]);
                f64::from(if big_endian {
                    <$t>::from_be_bytes(raw)
                } else {
                    <$t>::from_le_bytes(raw)
                })
            }};
        }
        match self {
            Self::U8 => f64::from(b[0]),
            Self::I8 => f64::from(b[0] as i8),
            Self::U16 => decode!(u16, 2),
            Self::I16 => decode!(i16, 2),
            Self::U32 => decode!(u32, 4),
            Self::I32 => decode!(i32, 4),
            Self::F32 => decode!(f32, 4),
            Self::F64 => decode!(f64, 8),
        }
    }
}

/// The voxels `[z, y, x]` (x fastest in `bytes`, as both formats store them), as `i16` HU when
/// every value is a whole number in range, as `f32` otherwise. A stored NaN stays NaN.
pub fn to_voxels(
    bytes: &[u8],
    samples: SampleType,
    big_endian: bool,
    (slope, intercept): (f64, f64),
    [x, y, z]: [usize; 3],
) -> Result<Voxels, String> {
    let hu: Vec<f32> = bytes
        .chunks_exact(samples.bytes())
        .map(|b| (slope * samples.value(b, big_endian) + intercept) as f32)
        .collect();
    let whole = hu
        .iter()
        .all(|v| v.fract() == 0.0 && (f32::from(i16::MIN)..=f32::from(i16::MAX)).contains(v));
    let n = hu.len();
    let shape_error = |e: ndarray::ShapeError| format!("{n} samples for {x}x{y}x{z}: {e}");
    if whole {
        let values: Vec<i16> = hu.iter().map(|v| *v as i16).collect();
        Array3::from_shape_vec((z, y, x), values)
            .map(Voxels::I16)
            .map_err(shape_error)
    } else {
        Array3::from_shape_vec((z, y, x), hu)
            .map(Voxels::F32)
            .map_err(shape_error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_values_become_i16_and_fractions_f32() {
        let bytes: Vec<u8> = [1000u16, 25].iter().flat_map(|v| v.to_be_bytes()).collect();
        let v = to_voxels(&bytes, SampleType::U16, true, (1.0, -1024.0), [2, 1, 1]).unwrap();
        assert_eq!(v.hu_at([0, 0, 0]), Some(-24.0));
        assert_eq!(v.hu_at([1, 0, 0]), Some(-999.0));
        assert!(v.is_i16());
        let v = to_voxels(&bytes, SampleType::U16, true, (0.5, 0.0), [2, 1, 1]).unwrap();
        assert!(!v.is_i16());
        assert_eq!(v.hu_at([1, 0, 0]), Some(12.5));
        let v = to_voxels(&[0xff], SampleType::I8, false, (1.0, 0.0), [1, 1, 1]).unwrap();
        assert_eq!(v.hu_at([0, 0, 0]), Some(-1.0));
    }
}
