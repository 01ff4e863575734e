//! What a model imposes on windows: its stride, its receptive field and whether a window's
//! outputs depend on all of it. The rules that follow from them (a window's halo, the padding
//! to the stride, the smallest useful side) have their one home here.

/// What the model imposes on windows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelGrid {
    /// Windows start on multiples of it and the volume is padded to it, `[x, y, z]`.
    pub stride: [usize; 3],
    pub receptive_radius: usize,
    /// A window's outputs depend on all of it (normalisation over the window): no halo makes
    /// a tile exact, so halo mode is refused, and blended windows need no core.
    pub window_dependent: bool,
}

impl ModelGrid {
    /// The stride along `axis`, at least 1.
    pub fn stride_along(&self, axis: usize) -> usize {
        self.stride[axis].max(1)
    }

    /// `voxels` rounded up to the stride along `axis`.
    pub fn up_to_stride(&self, axis: usize, voxels: usize) -> usize {
        let s = self.stride_along(axis);
        voxels.div_ceil(s) * s
    }

    /// `voxels` rounded down to the stride along `axis` (0 below one stride).
    pub fn down_to_stride(&self, axis: usize, voxels: usize) -> usize {
        let s = self.stride_along(axis);
        voxels / s * s
    }

    /// The context a window keeps on each side of its core along `axis`: the receptive-field
    /// radius rounded up to the stride. None for a window-dependent model, whose windows keep
    /// no core (halo mode is refused for it, and blended windows need none).
    pub fn halo_along(&self, axis: usize) -> usize {
        if self.window_dependent {
            0
        } else {
            self.up_to_stride(axis, self.receptive_radius)
        }
    }

    /// The smallest side along `axis` that leaves a window a core: twice the halo and two
    /// strides.
    pub fn smallest_side(&self, axis: usize) -> usize {
        2 * self.halo_along(axis) + 2 * self.stride_along(axis)
    }

    /// `size` rounded up to the stride on every axis: the grid the windows cover.
    pub fn padded(&self, size: [usize; 3]) -> [usize; 3] {
        std::array::from_fn(|a| self.up_to_stride(a, size[a]))
    }
}
