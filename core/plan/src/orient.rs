//! The study in the voxel order a model was trained on (its card's axis codes, e.g. MONAI's
//! `RAS`): axes reversed where the study's run the other way. A network that is not invariant
//! to flips sees the array its trainer saw; boxes map back through `world_from_voxel`, which
//! the flip changes with the voxels.
//!
//! Only flips: a study whose axes are not along the codes' axes (a sagittal or coronal
//! acquisition) is refused, not permuted.

use tessera_dicom::volume::{Geometry, Volume};

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

/// `geometry` with the axes in `flips` reversed ([`Geometry::flipped`]).
pub fn flipped_geometry(geometry: &Geometry, flips: [bool; 3]) -> Geometry {
    geometry.flipped(flips)
}

/// `volume` with the axes in `flips` reversed ([`Volume::flipped`]), `None` when none is.
pub fn flipped(volume: &Volume, flips: [bool; 3]) -> Option<Volume> {
    volume.flipped(flips)
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
    fn a_sagittal_study_and_bad_codes_are_refused() {
        let mut g = Geometry::axis_aligned([4, 3, 2], [1.0; 3], [0.0; 3]);
        g.world_from_voxel = tessera_dicom::geometry::Affine3::from_columns(
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
