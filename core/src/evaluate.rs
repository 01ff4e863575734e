//! How good a detector is: FROC and the competition performance metric (CPM) over scans, as
//! LUNA16 computes them.
//!
//! A detection hits a target when its centre lies within the target's radius. Each target counts
//! once (further hits on it are neither true nor false positives); detections on findings to
//! ignore (e.g. LIDC marks under 3 mm or seen by fewer readers) are dropped; every other
//! detection is a false positive. Sensitivity is read at 1/8, 1/4, 1/2, 1, 2, 4 and 8 false
//! positives per scan; the CPM is their mean.

use serde::{Deserialize, Serialize};

use tessera_dicom::geometry::{Vec3, norm, sub};

/// The false-positive rates of the LUNA16 FROC.
pub const FP_RATES: [f64; 7] = [0.125, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0];

/// A finding to detect (or to ignore), in LPS mm.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Target {
    pub center_lps_mm: Vec3,
    pub diameter_mm: f64,
}

impl From<&crate::phantom::NoduleTruth> for Target {
    fn from(n: &crate::phantom::NoduleTruth) -> Self {
        Self {
            center_lps_mm: n.center_lps_mm,
            diameter_mm: n.diameter_mm,
        }
    }
}

impl Target {
    /// Whether a detection centred at `p` hits it.
    pub fn contains(&self, p: Vec3) -> bool {
        // Even a tiny target accepts a centre within 1.5 mm: a voxel or two of localisation.
        norm(sub(p, self.center_lps_mm)) <= (self.diameter_mm / 2.0).max(1.5)
    }
}

/// One scan: what to find, what to ignore, what the detector said.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Scan {
    pub name: String,
    pub targets: Vec<Target>,
    pub ignore: Vec<Target>,
    /// `(score, centre LPS mm)`.
    pub detections: Vec<(f32, Vec3)>,
}

/// The result over a set of scans.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Froc {
    pub scans: usize,
    pub targets: usize,
    /// Sensitivity at each of [`FP_RATES`].
    pub sensitivity: [f64; 7],
    pub cpm: f64,
    /// Per target: the score of the best detection that hit it (`None`: missed at any score).
    pub hits: Vec<(String, Target, Option<f32>)>,
}

/// FROC over `scans`.
pub fn froc(scans: &[Scan]) -> Froc {
    // Classify every detection, then walk them from the highest score down.
    let mut events: Vec<(f32, Event)> = Vec::new();
    let mut hits = Vec::new();
    for scan in scans {
        let mut best: Vec<Option<f32>> = vec![None; scan.targets.len()];
        let mut sorted = scan.detections.clone();
        sorted.sort_by(|a, b| b.0.total_cmp(&a.0));
        for (score, p) in sorted {
            if let Some(t) = scan.targets.iter().position(|t| t.contains(p)) {
                if best[t].is_none() {
                    best[t] = Some(score);
                    events.push((score, Event::Hit));
                }
            } else if !scan.ignore.iter().any(|t| t.contains(p)) {
                events.push((score, Event::FalsePositive));
            }
        }
        for (t, score) in scan.targets.iter().zip(best) {
            hits.push((scan.name.clone(), *t, score));
        }
    }
    events.sort_by(|a, b| b.0.total_cmp(&a.0));
    let total_targets: usize = scans.iter().map(|s| s.targets.len()).sum();
    let n = scans.len().max(1) as f64;
    // The curve: after each detection (lowering the threshold), (FP per scan, sensitivity).
    let mut curve = vec![(0.0, 0.0)];
    let (mut tp, mut fp) = (0usize, 0usize);
    for (_, event) in &events {
        match event {
            Event::Hit => tp += 1,
            Event::FalsePositive => fp += 1,
        }
        let sensitivity = if total_targets == 0 {
            0.0
        } else {
            tp as f64 / total_targets as f64
        };
        curve.push((fp as f64 / n, sensitivity));
    }
    let sensitivity: [f64; 7] = std::array::from_fn(|i| {
        curve
            .iter()
            .filter(|(rate, _)| *rate <= FP_RATES[i])
            .map(|(_, s)| *s)
            .fold(0.0, f64::max)
    });
    let cpm = sensitivity.iter().sum::<f64>() / sensitivity.len() as f64;
    Froc {
        scans: scans.len(),
        targets: total_targets,
        sensitivity,
        cpm,
        hits,
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Event {
    Hit,
    FalsePositive,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(x: f64) -> Target {
        Target {
            center_lps_mm: [x, 0.0, 0.0],
            diameter_mm: 10.0,
        }
    }

    #[test]
    fn froc_counts_hits_once_ignores_what_it_should_and_reads_sensitivity_per_rate() {
        let scans = vec![
            Scan {
                name: "a".into(),
                targets: vec![target(0.0), target(100.0)],
                ignore: vec![target(50.0)],
                // 0.9 hits target 0; 0.8 hits it again (not counted); 0.7 is ignored; 0.6 is a
                // false positive; 0.5 hits target 100.
                detections: vec![
                    (0.9, [1.0, 0.0, 0.0]),
                    (0.8, [-2.0, 0.0, 0.0]),
                    (0.7, [50.0, 0.0, 0.0]),
                    (0.6, [200.0, 0.0, 0.0]),
                    (0.5, [100.0, 3.0, 0.0]),
                ],
            },
            Scan {
                name: "b".into(),
                targets: vec![target(0.0)],
                ignore: vec![],
                detections: vec![(0.95, [300.0, 0.0, 0.0])],
            },
        ];
        let f = froc(&scans);
        assert_eq!(f.targets, 3);
        // Order: 0.95 FP (0.5 FP/scan, 0), 0.9 hit (1/3), 0.6 FP (1.0, 1/3), 0.5 hit (1.0, 2/3).
        let third = 1.0 / 3.0;
        assert_eq!(
            f.sensitivity,
            [
                0.0,
                0.0,
                third,
                2.0 * third,
                2.0 * third,
                2.0 * third,
                2.0 * third
            ]
        );
        assert!((f.cpm - (third + 4.0 * 2.0 * third) / 7.0).abs() < 1e-12);
        let missed: Vec<&str> = f
            .hits
            .iter()
            .filter(|h| h.2.is_none())
            .map(|h| h.0.as_str())
            .collect();
        assert_eq!(missed, vec!["b"]);
    }

    #[test]
    fn perfect_detections_score_one() {
        let scans = vec![Scan {
            name: "p".into(),
            targets: vec![target(0.0)],
            ignore: vec![],
            detections: vec![(0.9, [0.0; 3])],
        }];
        assert_eq!(froc(&scans).cpm, 1.0);
    }
}
