//! The rescoring stage (false-positive reduction): the detector's best candidates, each scored
//! again by the card's classifier on a cube of the model's input grid around its centre (wider
//! for a large candidate, when the card says so), and
//! given the score the card's `combine` makes of both.

use ndarray::{Array5, Axis};

use tessera_dicom::volume::Voxels;
use tessera_infer::input::{candidate_patch, scaled_candidate_patch};
use tessera_infer::{InferError, PatchClassifier};
use tessera_maps::decode::Candidate;
use tessera_plan::device::CancelToken;
use tessera_plan::model::{InputSpec, RescoreSpec};

/// Patches per classifier run: small enough for any device, large enough to keep it busy.
pub const BATCH: usize = 32;

/// A candidate after rescoring.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rescored {
    /// The candidate with the final score (the card's `combine` of both).
    pub candidate: Candidate,
    /// What the detector gave it.
    pub detector_score: f32,
    /// Its position in the candidates given to [`rescore`].
    pub index: usize,
}

/// Rescores `candidates` (the detector's best, in its order). Returns them sorted by the new
/// score, ties in the detector's order.
pub fn rescore(
    candidates: &[Candidate],
    voxels: &Voxels,
    input: &InputSpec,
    spec: &RescoreSpec,
    classifier: &mut PatchClassifier,
    cancel: &CancelToken,
) -> Result<Vec<Rescored>, InferError> {
    let edge = spec.patch_voxels;
    let mut rescored = Vec::with_capacity(candidates.len());
    for (chunk_index, chunk) in candidates.chunks(BATCH).enumerate() {
        let mut batch = Array5::<f32>::zeros((chunk.len(), 1, edge, edge, edge));
        for (mut slot, b) in batch.axis_iter_mut(Axis(0)).zip(chunk) {
            let target = slot.index_axis_mut(Axis(0), 0);
            let scale = spec.patch_scale(b.bbox.size);
            if scale > 1.0 {
                scaled_candidate_patch(target, voxels, b.bbox.center, scale, input);
            } else {
                candidate_patch(target, voxels, b.bbox.center, input);
            }
        }
        let scores = classifier.run(batch, cancel)?;
        let first = chunk_index * BATCH;
        rescored.extend(
            chunk
                .iter()
                .zip(scores)
                .enumerate()
                .map(|(i, (b, p))| Rescored {
                    candidate: Candidate {
                        score: spec.combine.score(b.score, p),
                        ..*b
                    },
                    detector_score: b.score,
                    index: first + i,
                }),
        );
    }
    rescored.sort_by(|a, b| b.candidate.score.total_cmp(&a.candidate.score));
    Ok(rescored)
}
