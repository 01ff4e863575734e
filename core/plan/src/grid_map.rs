//! Where the model's grid lies in the study: the one mapping between them that exports and
//! every view use.
//!
//! Model voxel coordinates have voxel `i`'s centre at `i`. Study positions come in two forms:
//! voxel coordinates (centre at `i`, as `world_from_voxel` takes them) and, for drawing,
//! continuous positions where voxel `i` covers `[i, i + 1)` (voxel coordinate + 0.5).

use tessera_dicom::geometry::{Affine3, Vec3};
use tessera_dicom::volume::{Geometry, StudyVoxelBox};

/// Far below any voxel, far above the rounding of a world round trip.
const TIE_VOXELS: f64 = 1e-6;

/// The mapping between a study's voxels and the grid the model ran on (the study resampled
/// to the card's spacing, or the study itself), through the patient's world coordinates.
#[derive(Debug, Clone, PartialEq)]
pub struct GridMap {
    model_world_from_voxel: Affine3,
    study_world_from_voxel: Affine3,
    study_voxel_from_world: Option<Affine3>,
    model_voxel_from_world: Option<Affine3>,
    study_size: [usize; 3],
}

impl GridMap {
    pub fn new(model: &Geometry, study: &Geometry) -> Self {
        Self {
            model_world_from_voxel: model.world_from_voxel,
            study_world_from_voxel: study.world_from_voxel,
            study_voxel_from_world: study.world_from_voxel.inverse(),
            model_voxel_from_world: model.world_from_voxel.inverse(),
            study_size: study.size,
        }
    }

    /// The study voxel coordinates of model voxel coordinates `p`.
    pub fn study_from_model(&self, p: Vec3) -> Vec3 {
        let world = self.model_world_from_voxel.apply(p);
        self.study_voxel_from_world.map_or(p, |m| m.apply(world))
    }

    /// The model voxel coordinates of study voxel coordinates `p`.
    pub fn model_from_study(&self, p: Vec3) -> Vec3 {
        let world = self.study_world_from_voxel.apply(p);
        self.model_voxel_from_world.map_or(p, |m| m.apply(world))
    }

    /// The study voxels covering the model-grid box `[lo, hi]` (voxel coordinates): the range
    /// around its eight corners ([`StudyVoxelBox::covering`]); `None` when it misses the study.
    pub fn study_voxels_of_box(&self, lo: Vec3, hi: Vec3) -> Option<StudyVoxelBox> {
        let mut min = [f64::INFINITY; 3];
        let mut max = [f64::NEG_INFINITY; 3];
        for corner in 0..8 {
            let p = std::array::from_fn(|a| if corner >> a & 1 == 0 { lo[a] } else { hi[a] });
            let v = self.study_from_model(p);
            for a in 0..3 {
                min[a] = min[a].min(v[a]);
                max[a] = max[a].max(v[a]);
            }
        }
        StudyVoxelBox::covering(min, max, self.study_size)
    }

    /// Where model voxel boundary `edge` (the start of model voxel `edge`) lies along `axis`,
    /// as a continuous study position. The grids share their axes, so the other axes do not
    /// matter.
    pub fn study_edge(&self, axis: usize, edge: usize) -> f64 {
        let mut p = [0.0; 3];
        p[axis] = edge as f64 - 0.5;
        self.study_from_model(p)[axis] + 0.5
    }

    /// The model voxels `[min, max)` as continuous study positions.
    pub fn study_span(&self, min: [usize; 3], max: [usize; 3]) -> ([f64; 3], [f64; 3]) {
        (
            std::array::from_fn(|a| self.study_edge(a, min[a])),
            std::array::from_fn(|a| self.study_edge(a, max[a])),
        )
    }

    /// The model voxel whose centre is nearest study voxel `study_voxel`'s along `axis`; a tie
    /// goes to the higher one.
    pub fn model_voxel(&self, axis: usize, study_voxel: usize) -> usize {
        let mut p = [0.0; 3];
        p[axis] = study_voxel as f64;
        // The round trip through world coordinates leaves a tie a few ulps either side of it.
        (self.model_from_study(p)[axis] + 0.5 + TIE_VOXELS)
            .floor()
            .max(0.0) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resample::resampled_geometry;

    fn study() -> Geometry {
        Geometry {
            size: [100, 80, 40],
            spacing_mm: [0.7, 0.7, 2.5],
            world_from_voxel: Affine3::from_columns(
                [[0.7, 0.0, 0.0], [0.0, 0.7, 0.0], [0.0, 0.0, 2.5]],
                [-30.0, -20.0, 100.0],
            ),
        }
    }

    #[test]
    fn edges_spans_and_nearest_voxels_agree() {
        let study = study();
        let model = resampled_geometry(&study, [1.4, 1.4, 1.25]);
        let map = GridMap::new(&model, &study);
        // Voxel 0's centre is shared: model edge 0 is half a model voxel before it.
        assert!((map.study_edge(0, 0) - (0.5 - 0.5 * 2.0)).abs() < 1e-9);
        assert!((map.study_edge(2, 4) - (3.5 * 0.5 + 0.5)).abs() < 1e-9);
        let (lo, hi) = map.study_span([2, 0, 0], [4, 1, 2]);
        assert!((lo[0] - 3.5).abs() < 1e-9 && (hi[0] - 7.5).abs() < 1e-9);
        assert!((hi[2] - 1.25).abs() < 1e-9);
        assert_eq!(map.model_voxel(0, 7), 4, "study 7 is model 3.5, rounds up");
        assert_eq!(map.model_voxel(2, 3), 6);
        // A model box of voxels 2..=3 along x covers study voxels 3..8.
        let b = map
            .study_voxels_of_box([1.5, 0.0, 0.0], [3.5, 0.0, 0.0])
            .unwrap();
        assert_eq!((b.min[0], b.max[0]), (3, 8));
        assert_eq!(b.max[1], 1, "at least one voxel deep");
    }

    #[test]
    fn the_same_grid_maps_to_itself() {
        let study = study();
        let map = GridMap::new(&study, &study);
        for v in [0, 5, 39] {
            assert_eq!(map.model_voxel(2, v), v);
            assert!((map.study_edge(2, v) - v as f64).abs() < 1e-9);
        }
    }
}
