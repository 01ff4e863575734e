//! NumPy `.npy` (format 1.0) for int16 and float32 volumes: how `training/` and the MONAI
//! scripts read what the pipeline sees.

use ndarray::Array3;

/// The bytes of a C-order `<i2` array of shape `[z, y, x]`.
pub fn encode_i16(voxels: &Array3<i16>) -> Vec<u8> {
    encode(voxels, "<i2", |v, out| {
        out.extend_from_slice(&v.to_le_bytes());
    })
}

/// The bytes of a C-order `<f4` array of shape `[z, y, x]`.
pub fn encode_f32(voxels: &Array3<f32>) -> Vec<u8> {
    encode(voxels, "<f4", |v, out| {
        out.extend_from_slice(&v.to_le_bytes());
    })
}

fn encode<T>(voxels: &Array3<T>, descr: &str, put: impl Fn(&T, &mut Vec<u8>)) -> Vec<u8> {
    let (z, y, x) = voxels.dim();
    let mut header =
        format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': ({z}, {y}, {x}), }}");
    // Magic (6) + version (2) + length (2) + header + '\n' is a multiple of 64.
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = Vec::with_capacity(10 + header.len() + voxels.len() * size_of::<T>());
    bytes.extend_from_slice(b"\x93NUMPY\x01\x00");
    // The header is a few dozen bytes: it always fits the format's u16 length.
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    for v in voxels.iter() {
        put(v, &mut bytes);
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_is_aligned_and_data_is_c_order_little_endian() {
        let a = Array3::from_shape_fn((2, 1, 3), |(z, _, x)| (100 * z + x) as i16 - 1);
        let bytes = encode_i16(&a);
        let header_len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
        assert_eq!((10 + header_len) % 64, 0);
        let header = std::str::from_utf8(&bytes[10..10 + header_len]).unwrap(); // ok: test code
        assert!(header.contains("'shape': (2, 1, 3)"), "{header}");
        let data: Vec<i16> = bytes[10 + header_len..]
            .chunks(2)
            .map(|c| i16::from_le_bytes([c[0], c[1]]))
            .collect();
        assert_eq!(data, vec![-1, 0, 1, 99, 100, 101]);
        let f = encode_f32(&a.mapv(|v| f32::from(v) + 0.5));
        let header_len = u16::from_le_bytes([f[8], f[9]]) as usize;
        assert!(
            std::str::from_utf8(&f[10..10 + header_len])
                .unwrap()
                .contains("'<f4'")
        ); // ok: test code
        let first = f32::from_le_bytes([
            f[10 + header_len],
            f[11 + header_len],
            f[12 + header_len],
            f[13 + header_len],
        ]);
        assert_eq!(first, -0.5);
        assert_eq!(f.len(), 10 + header_len + 6 * 4);
    }
}
