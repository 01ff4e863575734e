//! From measured runs to a calibration: each pass's own peak above what the run held gives a
//! point of the line, and the steps after the passes give their bound. `tessera sweep` runs
//! the processes and calls [`fit`].

use super::line::MemoryModel;
use super::measured::MeasuredRun;

/// A calibration and the points it was fitted on.
#[derive(Debug, Clone, PartialEq)]
pub struct Calibration {
    pub model: MemoryModel,
    /// `(largest window voxels, peak bytes above what the process and the pass held)` per
    /// pass of each run (the main windows; the coarse pass when it ran).
    pub points: Vec<(usize, u64)>,
}

/// The points a run gives the line, one per pass: its largest window and its own memory,
/// above what the process held before the run (the study, the resampled copy) and what the
/// pass holds (the main maps; the coarse pass's grid and maps on top).
pub fn points(measured: &MeasuredRun) -> Vec<(usize, u64)> {
    let run = &measured.run;
    let base = run.baseline_memory_bytes + run.held_memory_bytes;
    let main = (
        run.windows_largest_voxels,
        run.windows_peak_memory_bytes.saturating_sub(base),
    );
    let coarse = measured.coarse.map(|c| {
        (
            c.largest_window_voxels,
            c.peak_memory_bytes
                .saturating_sub(base + c.held_memory_bytes),
        )
    });
    std::iter::once(main).chain(coarse).collect()
}

/// What a run's steps after the passes needed beside what they held (the main maps, the lung
/// field): independent of the window.
pub fn later_steps_bytes(measured: &MeasuredRun) -> u64 {
    let run = &measured.run;
    run.later_steps_peak_memory_bytes.saturating_sub(
        run.baseline_memory_bytes + run.held_memory_bytes + run.later_steps_held_memory_bytes,
    )
}

/// The memory model fitted to every pass of `runs` (counted as runs), with what the steps
/// after the passes need: the most any run needed, plus the spread between runs or 1 % of it,
/// whichever is more (the same steps each time, so the spread is noise that a new run adds
/// again, and another study its own: LIDC-IDRI-0001 needed 0.5 % more than the demo study's
/// most). `None` with fewer than two distinct window sizes.
pub fn fit(runs: &[MeasuredRun]) -> Option<Calibration> {
    let points: Vec<(usize, u64)> = runs.iter().flat_map(points).collect();
    let stages = runs.iter().map(later_steps_bytes);
    let (least, most) = (stages.clone().min()?, stages.max()?);
    let later_steps_bytes = most + (most - least).max(most / 100);
    let model = MemoryModel::fit(&points).map(|fitted| MemoryModel {
        calibration_runs: runs.len(),
        later_steps_bytes: later_steps_bytes as f64,
        ..fitted
    })?;
    Some(Calibration { model, points })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::forecast::{CoarseMemory, HeldMemory, MemoryForecast};
    use crate::memory::measured::{PassMemory, RunMemory};

    /// A run that needed exactly what `forecast` predicts, phase by phase.
    fn run_of(forecast: &MemoryForecast, window_voxels: usize) -> MeasuredRun {
        let base = forecast.baseline_bytes + forecast.held.maps_bytes;
        let line = &forecast.model;
        let mut run = RunMemory::started(forecast.baseline_bytes, &forecast.held, window_voxels);
        run.windows_peak_memory_bytes = base + line.predict_bytes(window_voxels);
        run.later_steps_peak_memory_bytes =
            base + forecast.held.lung_field_bytes + line.later_steps_bytes as u64;
        let coarse = forecast.held.coarse.map(|c| {
            let voxels = window_voxels.min(c.window_voxels);
            PassMemory {
                held_memory_bytes: c.held_bytes,
                largest_window_voxels: voxels,
                peak_memory_bytes: base + c.held_bytes + line.predict_bytes(voxels),
            }
        });
        run.peak_memory_bytes = forecast.peak_bytes(window_voxels);
        MeasuredRun { run, coarse }
    }

    #[test]
    fn fitting_a_forecasts_own_points_gives_the_forecast_back() {
        let line = MemoryModel {
            fixed_bytes: 150_000_000.0,
            bytes_per_voxel: 60.0,
            calibration_runs: 0,
            worst_error: 0.0,
            later_steps_bytes: 90_000_000.0,
            largest_window_voxels: None,
        };
        // Studies of three sizes, with and without the coarse pass and the lung field.
        let held = |scale: u64, coarse: bool| HeldMemory {
            maps_bytes: 4_000_000 * scale,
            lung_field_bytes: 1_000_000 * scale,
            coarse: coarse.then_some(CoarseMemory {
                held_bytes: 700_000 * scale,
                window_voxels: 200_000 * scale as usize,
            }),
        };
        let runs: Vec<MeasuredRun> = [
            (1, true, 1_400_000),
            (1, true, 700_000),
            (2, false, 2_900_000),
            (3, true, 350_000),
            (3, false, 5_000_000),
        ]
        .into_iter()
        .map(|(scale, coarse, voxels)| {
            let forecast = MemoryForecast {
                model: line,
                baseline_bytes: 300_000_000 + 1_000_000 * scale,
                held: held(scale, coarse),
            };
            run_of(&forecast, voxels)
        })
        .collect();

        let fitted = fit(&runs).unwrap();
        assert_eq!(fitted.model.fixed_bytes, line.fixed_bytes);
        assert_eq!(fitted.model.bytes_per_voxel, line.bytes_per_voxel);
        assert_eq!(fitted.model.worst_error, 0.0);
        assert_eq!(fitted.model.calibration_runs, runs.len());
        // Every run needed the same: the bound adds its 1 %, never less.
        let stages = fitted.model.later_steps_bytes;
        assert!(stages >= line.later_steps_bytes && stages <= line.later_steps_bytes * 1.01);
        // Three coarse passes and five main passes.
        assert_eq!(fitted.points.len(), 8);
        for run in &runs {
            let predicted = run.predicted_bytes(fitted.model);
            let measured = run.run.peak_memory_bytes;
            assert!(predicted >= measured, "{predicted} < {measured}");
            assert!(predicted as f64 <= measured as f64 * 1.01);
        }
    }

    #[test]
    fn one_window_size_is_no_calibration() {
        let line = MemoryModel {
            fixed_bytes: 1e6,
            bytes_per_voxel: 2.0,
            calibration_runs: 0,
            worst_error: 0.0,
            later_steps_bytes: 0.0,
            largest_window_voxels: None,
        };
        let forecast = MemoryForecast {
            model: line,
            baseline_bytes: 0,
            held: HeldMemory::default(),
        };
        let same = run_of(&forecast, 1000);
        assert_eq!(fit(&[same, same]), None);
        assert_eq!(fit(&[]), None);
    }
}
