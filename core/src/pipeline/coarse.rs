//! The card's coarse pass ([`CoarsePass`]): the same network once more on the study
//! resampled to a coarser grid, where a lesion wider than the receptive field at the card's
//! spacing fits in it. Its large findings join the main pass's candidates on the main grid,
//! so the lung field, the rescoring stage and the measured boxes treat them alike.

use std::time::Instant;

use serde::{Deserialize, Serialize};

use super::{Event, Pass, PipelineError, Runner, decode};
use tessera_dicom::volume::Volume;
use tessera_infer::Engine;
use tessera_maps::decode::{Candidate, ModelGridBox};
use tessera_plan::blend::BlendMode;
use tessera_plan::grid_map::GridMap;
use tessera_plan::memory::measured::PassMemory;
use tessera_plan::model::CoarsePass;
use tessera_plan::plan::{TilePlan, TileSpec};
use tessera_plan::resample::resample;

/// What the coarse pass did in a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CoarseStats {
    pub spacing_mm: [f64; 3],
    /// The coarse grid's size, voxels `[x, y, z]`.
    pub size: [usize; 3],
    pub windows: usize,
    pub seconds: f64,
    /// Its findings of the card's `min_size_mm` or more, added to the main pass's candidates.
    pub candidates: usize,
    /// What it held, its largest window and its peak (flattened: the keys stay in
    /// `coarse`).
    #[serde(flatten)]
    pub memory: PassMemory,
}

impl Runner<'_> {
    /// The coarse pass's findings of `spec.min_size_mm` or more, as candidates on the grid of
    /// `input` (the main pass's). Exact (halo) tiling with the run's patch, so the result does
    /// not depend on the patch; one window is allowed on purpose (the coarse grid is 8 times
    /// smaller, and each of its windows is no larger than the main plan's largest).
    pub(super) fn coarse(
        &mut self,
        spec: &CoarsePass,
        volume: &Volume,
        input: &Volume,
        engine: &mut Engine,
        decode_threshold: f32,
        observer: &mut dyn FnMut(&Event),
    ) -> Result<Vec<Candidate>, PipelineError> {
        let started = Instant::now();
        let resampled = resample(volume, spec.spacing_mm)?;
        // Since the main windows: their decoding and this grid's resampling.
        let resampled_peak_bytes = self.note_peak().peak_bytes;
        let coarse = resampled.as_ref().unwrap_or(volume);
        let tile = TileSpec {
            blend: BlendMode::Halo,
            allow_single_pass: true,
            memory_budget_bytes: None,
            ..self.config.tile.clone()
        };
        let plan = TilePlan::new(coarse.geometry.size, self.model.card.grid(), &tile, None)?;
        observer(&Event::CoarseStarted {
            windows: plan.windows.len(),
            spacing_mm: spec.spacing_mm,
        });
        let (maps, windows_peak_bytes) = self.windows(&plan, coarse, engine, Pass::Coarse)?;
        let (peaks, _) = decode(
            &self.model.card,
            &maps,
            decode_threshold,
            coarse.geometry.size,
        )?;
        let to_main = GridMap::new(&coarse.geometry, &input.geometry);
        let (from, to) = (coarse.geometry.spacing_mm, input.geometry.spacing_mm);
        let large: Vec<Candidate> = peaks
            .into_iter()
            .filter(|c| c.bbox.mean_side_mm(from) >= spec.min_size_mm)
            .map(|c| Candidate {
                bbox: ModelGridBox {
                    center: to_main.study_from_model(c.bbox.center),
                    size: std::array::from_fn(|a| c.bbox.size[a] * from[a] / to[a]),
                },
                ..c
            })
            .collect();
        let elapsed_s = started.elapsed().as_secs_f64();
        let memory = self.note_peak();
        self.stats.coarse = Some(CoarseStats {
            spacing_mm: spec.spacing_mm,
            size: coarse.geometry.size,
            windows: plan.windows.len(),
            seconds: elapsed_s,
            candidates: large.len(),
            memory: PassMemory {
                held_memory_bytes: self.held.coarse.map_or(0, |c| c.held_bytes),
                largest_window_voxels: plan.largest_window_voxels(),
                peak_memory_bytes: windows_peak_bytes
                    .max(memory.peak_bytes)
                    .max(resampled_peak_bytes),
            },
        });
        observer(&Event::CoarseFinished {
            candidates: large.len(),
            elapsed_s,
            memory,
        });
        Ok(large)
    }
}
