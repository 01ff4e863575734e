//! The study in the voxel order a model was trained on (its card's axis codes, e.g. MONAI's
//! `RAS`): axes reversed where the study's run the other way. A network that is not invariant
//! to flips sees the array its trainer saw; boxes map back through `world_from_voxel`, which
//! the flip changes with the voxels.
//!
//! Only flips: a study whose axes are not along the codes' axes (a sagittal or coronal
//! acquisition) is refused, not permuted.

use ndarray::{Array3, Axis};

use tessera_dicom::geometry::{Affine3, scale};
use tessera_dicom::volume::{Geometry, Volume, Voxels};

/// Why a study cannot be put in a card's voxel order.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum OrientError {
    #[error("axis codes '{0}' are not three of R/L, A/P, S/I, one for each direction")]
    BadCodes(String),
    #[error(
        "the model wants its voxels in {codes} order, but this study's {axis} axis runs along {along} (a sagittal or coronal acquisition?): Tessera flips axes but does not permute them"
    )]
    NotAFlip {
        codes: String,
        axis: char,
        along: &'static str,
    },
}

/// The LPS world axis and sign each code points along.
fn code_direction(code: char) -> Option<(usize, f64)> {
    match code.to_ascii_uppercase() {
        'L' => Some((0, 1.0)),
        'R' => Some((0, -1.0)),
        'P' => Some((1, 1.0)),
        'A' => Some((1, -1.0)),
        'S' => Some((2, 1.0)),
        'I' => Some((2, -1.0)),
        _ => None,
    }
}

/// Per voxel axis, whether it must be reversed to point the way `codes` say.
pub fn flips_to(geometry: &Geometry, codes: &str) -> Result<[bool; 3], OrientError> {
    let bad = || OrientError::BadCodes(codes.to_string());
    let wanted: Vec<(usize, f64)> = codes
        .chars()
        .map(code_direction)
        .collect::<Option<_>>()
        .ok_or_else(bad)?;
    if wanted.len() != 3 || (0..3).any(|w| !wanted.iter().any(|(axis, _)| *axis == w)) {
        return Err(bad());
    }
    let mut flips = [false; 3];
    for (a, (world_axis, sign)) in wanted.into_iter().enumerate() {
        let direction = geometry.direction(a);
        let dominant = (0..3)
            .max_by(|i, j| direction[*i].abs().total_cmp(&direction[*j].abs()))
            .unwrap_or(a);
        if dominant != world_axis {
            return Err(OrientError::NotAFlip {
                codes: codes.to_string(),
                axis: ['x', 'y', 'z'][a],
                along: ["left-right", "anterior-posterior", "superior-inferior"][dominant],
            });
        }
        flips[a] = direction[dominant] * sign < 0.0;
    }
    Ok(flips)
}

/// `geometry` with the axes in `flips` reversed: voxel `i` becomes `n - 1 - i`.
pub fn flipped_geometry(geometry: &Geometry, flips: [bool; 3]) -> Geometry {
    let w = &geometry.world_from_voxel;
    let mut translation = w.translation;
    let columns = std::array::from_fn(|a| {
        let column = w.column(a);
        if !flips[a] {
            return column;
        }
        let last = geometry.size[a].saturating_sub(1) as f64;
        for (t, c) in translation.iter_mut().zip(column) {
            *t += c * last;
        }
        scale(column, -1.0)
    });
    Geometry {
        size: geometry.size,
        spacing_mm: geometry.spacing_mm,
        world_from_voxel: Affine3::from_columns(columns, translation),
    }
}

/// `volume` with the axes in `flips` reversed, or `None` when none is.
pub fn flipped(volume: &Volume, flips: [bool; 3]) -> Option<Volume> {
    if !flips.contains(&true) {
        return None;
    }
    let voxels = match &volume.voxels {
        Voxels::I16(v) => Voxels::I16(reversed(v, flips)),
        Voxels::F32(v) => Voxels::F32(reversed(v, flips)),
    };
    Some(Volume {
        voxels,
        geometry: flipped_geometry(&volume.geometry, flips),
        info: volume.info.clone(),
        warnings: volume.warnings.clone(),
        // The source's slice indices do not apply to the new order; the warnings name them.
        filled_slices: Vec::new(),
        instances: volume.instances.clone(),
    })
}

/// `array` (`[z, y, x]`) reversed along the axes in `flips` (`[x, y, z]`), in standard layout.
fn reversed<T: Clone>(array: &Array3<T>, flips: [bool; 3]) -> Array3<T> {
    let mut view = array.view();
    for (a, flip) in flips.iter().enumerate() {
        if *flip {
            view.invert_axis(Axis(2 - a));
        }
    }
    view.as_standard_layout().into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_lps_study_is_flipped_in_x_and_y_for_ras_and_maps_to_the_same_world() {
        let g = Geometry::axis_aligned([4, 3, 2], [0.5, 0.5, 2.0], [10.0, 20.0, 30.0]);
        let flips = flips_to(&g, "RAS").unwrap(); // ok: test code
        assert_eq!(flips, [true, true, false]);
        let f = flipped_geometry(&g, flips);
        // Voxel (3, 2, 1) of the flipped grid is voxel (0, 0, 1) of the study.
        assert_eq!(
            f.world_from_voxel.apply([3.0, 2.0, 1.0]),
            g.world_from_voxel.apply([0.0, 0.0, 1.0])
        );
        assert_eq!(flips_to(&g, "LPS").unwrap(), [false; 3]); // ok: test code
    }

    #[test]
    fn voxels_follow_the_flip() {
        let a = Array3::from_shape_fn((2, 3, 4), |(z, y, x)| (100 * z + 10 * y + x) as i16);
        let r = reversed(&a, [true, false, true]);
        assert_eq!(r[[0, 0, 0]], a[[1, 0, 3]]);
        assert_eq!(r[[1, 2, 3]], a[[0, 2, 0]]);
        assert!(r.is_standard_layout());
    }

    #[test]
    fn a_sagittal_study_and_bad_codes_are_refused() {
        let mut g = Geometry::axis_aligned([4, 3, 2], [1.0; 3], [0.0; 3]);
        g.world_from_voxel = Affine3::from_columns(
            [[0.0, 1.0, 0.0], [0.0, 0.0, -1.0], [1.0, 0.0, 0.0]],
            [0.0; 3],
        );
        assert!(matches!(
            flips_to(&g, "RAS"),
            Err(OrientError::NotAFlip { axis: 'x', .. })
        ));
        assert!(matches!(flips_to(&g, "RAX"), Err(OrientError::BadCodes(_))));
        assert!(matches!(flips_to(&g, "RRS"), Err(OrientError::BadCodes(_))));
    }
}
