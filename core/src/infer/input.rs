//! Cuts one window out of a volume and normalises it as the model card says.

use ndarray::{Array5, s};

use crate::model::InputSpec;
use crate::plan::Window;
use crate::volume::Voxels;

/// `[1, 1, z, y, x]`: HU clipped to the card's window and mapped to `[0, 1]`. Voxels beyond the
/// volume (the stride padding) are 0, i.e. the window's low end (air).
pub fn window_input(voxels: &Voxels, window: &Window, spec: &InputSpec) -> Array5<f32> {
    let [lo, hi] = spec.hu_window;
    let scale = 1.0 / (hi - lo);
    let size = window.size();
    let mut out = Array5::<f32>::zeros((1, 1, size[2], size[1], size[0]));
    let volume_size = voxels.size();
    // The part of the window inside the volume.
    let end: [usize; 3] = std::array::from_fn(|a| window.max[a].min(volume_size[a]));
    if (0..3).any(|a| end[a] <= window.min[a]) {
        return out;
    }
    let extent: [usize; 3] = std::array::from_fn(|a| end[a] - window.min[a]);
    let mut target = out.slice_mut(s![0, 0, ..extent[2], ..extent[1], ..extent[0]]);
    let region = s![
        window.min[2]..end[2],
        window.min[1]..end[1],
        window.min[0]..end[0]
    ];
    let normalise = move |hu: f32| (hu.clamp(lo, hi) - lo) * scale;
    match voxels {
        Voxels::I16(a) => {
            target.zip_mut_with(&a.slice(region), |o, v| *o = normalise(f32::from(*v)));
        }
        Voxels::F32(a) => target.zip_mut_with(&a.slice(region), |o, v| *o = normalise(*v)),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::Array3;

    #[test]
    fn windows_are_normalised_and_padded_with_air() {
        let mut a = Array3::<i16>::from_elem((3, 4, 5), -1000);
        a[[2, 3, 4]] = 400;
        a[[0, 0, 0]] = -300;
        let spec = InputSpec {
            name: "ct".into(),
            layout: "NCDHW".into(),
            hu_window: [-1000.0, 400.0],
            normalisation: String::new(),
        };
        let window = Window {
            index: 0,
            min: [2, 2, 0],
            max: [6, 6, 4],
            core_min: [2, 2, 0],
            core_max: [6, 6, 4],
        };
        let x = window_input(&Voxels::I16(a), &window, &spec);
        assert_eq!(x.dim(), (1, 1, 4, 4, 4));
        assert_eq!(x[[0, 0, 2, 1, 2]], 1.0); // voxel (4, 3, 2) at 400 HU
        assert_eq!(x[[0, 0, 3, 0, 0]], 0.0); // z = 3 is beyond the volume: padding
        assert_eq!(x[[0, 0, 0, 0, 3]], 0.0); // x = 5 is beyond the volume
        let whole = Window {
            index: 0,
            min: [0, 0, 0],
            max: [5, 4, 3],
            core_min: [0; 3],
            core_max: [5, 4, 3],
        };
        let a = Array3::<i16>::from_elem((3, 4, 5), -300);
        assert_eq!(
            window_input(&Voxels::I16(a), &whole, &spec)[[0, 0, 0, 0, 0]],
            0.5
        );
    }
}
