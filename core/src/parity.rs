//! Parity between two detection runs: the same findings, scores and boxes, detection by
//! detection (averages hide individual drift).
//!
//! Detections are matched one to one, greedily: pairs by IoU (highest first), then the leftovers
//! by centre distance (closest first, within `max_centre_distance_voxels`). Boxes compare on the
//! model's grid, face by face, in voxels and millimetres.

use serde::{Deserialize, Serialize};

use crate::pipeline::Detection;
use crate::report::DetectionReport;

/// What "the same" means.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Tolerances {
    pub score: f32,
    pub box_voxels: f64,
}

impl Default for Tolerances {
    fn default() -> Self {
        Self {
            score: 1e-4,
            box_voxels: 0.5,
        }
    }
}

/// Leftovers farther apart than this (voxels) are different findings.
pub const MAX_CENTRE_DISTANCE_VOXELS: f64 = 4.0;

/// One matched pair.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pair {
    pub a: usize,
    pub b: usize,
    pub iou: f64,
    pub score_a: f32,
    pub score_b: f32,
    pub score_difference: f32,
    /// `|b - a|` for the faces min x, max x, min y, max y, min z, max z, in model voxels.
    pub face_difference_voxels: [f64; 6],
    pub face_difference_mm: [f64; 6],
    pub center_lps_mm: [f64; 3],
}

impl Pair {
    pub fn worst_face_voxels(&self) -> f64 {
        self.face_difference_voxels
            .iter()
            .copied()
            .fold(0.0, f64::max)
    }
}

/// The comparison of run A against run B.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ParityReport {
    pub tolerances: Tolerances,
    pub count_a: usize,
    pub count_b: usize,
    pub pairs: Vec<Pair>,
    /// Indices into A's detections with no partner in B.
    pub only_a: Vec<usize>,
    pub only_b: Vec<usize>,
    /// Of `only_a`, those scoring within the score tolerance of B's threshold: threshold
    /// crossings (the partner in B may score just under it), not failures.
    #[serde(default)]
    pub crossing_a: Vec<usize>,
    #[serde(default)]
    pub crossing_b: Vec<usize>,
    pub max_score_difference: f32,
    pub mean_score_difference: f32,
    pub max_face_difference_voxels: f64,
    pub max_face_difference_mm: f64,
    pub within_tolerance: bool,
}

/// Compares run `a` with run `b`. A detection only one run reports is a failure unless its
/// score is within the score tolerance of the other run's threshold (a threshold crossing).
pub fn compare(a: &DetectionReport, b: &DetectionReport, tolerances: Tolerances) -> ParityReport {
    let mut report = compare_detections(
        &a.detections,
        &b.detections,
        a.plan.model_spacing_mm,
        tolerances,
    );
    let crossing = |only: &[usize], own: &DetectionReport, other: &DetectionReport| {
        only.iter()
            .copied()
            .filter(|&i| own.detections[i].score < other.config.score_threshold + tolerances.score)
            .collect::<Vec<usize>>()
    };
    report.crossing_a = crossing(&report.only_a, a, b);
    report.crossing_b = crossing(&report.only_b, b, a);
    report.within_tolerance = report.only_a.len() == report.crossing_a.len()
        && report.only_b.len() == report.crossing_b.len()
        && report.scores_and_boxes_within();
    report
}

/// Matched detections `x` (index `ab[0]` of a) and `y` (`ab[1]` of b): their differences.
fn pair(ab: [usize; 2], iou: f64, x: &Detection, y: &Detection, spacing: [f64; 3]) -> Pair {
    let faces = |d: &Detection| -> [f64; 6] {
        let (c, s) = (d.model_box.center, d.model_box.size);
        std::array::from_fn(|k| {
            let axis = k / 2;
            let sign = if k % 2 == 0 { -0.5 } else { 0.5 };
            c[axis] + sign * s[axis]
        })
    };
    let (fa, fb) = (faces(x), faces(y));
    let face_difference_voxels: [f64; 6] = std::array::from_fn(|k| (fb[k] - fa[k]).abs());
    Pair {
        a: ab[0],
        b: ab[1],
        iou,
        score_a: x.score,
        score_b: y.score,
        score_difference: (y.score - x.score).abs(),
        face_difference_voxels,
        face_difference_mm: std::array::from_fn(|k| face_difference_voxels[k] * spacing[k / 2]),
        center_lps_mm: x.center_lps_mm,
    }
}

/// Compares two lists of detections on a model grid of `spacing` mm.
pub fn compare_detections(
    da: &[Detection],
    db: &[Detection],
    spacing: [f64; 3],
    tolerances: Tolerances,
) -> ParityReport {
    let mut candidates: Vec<(usize, usize, f64)> = Vec::new();
    for (i, x) in da.iter().enumerate() {
        for (j, y) in db.iter().enumerate() {
            let iou = iou(x, y);
            if iou > 0.0 {
                candidates.push((i, j, iou));
            }
        }
    }
    candidates.sort_by(|p, q| q.2.total_cmp(&p.2).then(p.0.cmp(&q.0)).then(p.1.cmp(&q.1)));
    let (mut used_a, mut used_b) = (vec![false; da.len()], vec![false; db.len()]);
    let mut matched: Vec<(usize, usize, f64)> = Vec::new();
    let mut take =
        |i: usize, j: usize, iou: f64, used_a: &mut Vec<bool>, used_b: &mut Vec<bool>| {
            if !used_a[i] && !used_b[j] {
                used_a[i] = true;
                used_b[j] = true;
                matched.push((i, j, iou));
            }
        };
    for (i, j, v) in candidates {
        take(i, j, v, &mut used_a, &mut used_b);
    }
    let mut by_distance: Vec<(usize, usize, f64)> = Vec::new();
    for (i, x) in da.iter().enumerate().filter(|(i, _)| !used_a[*i]) {
        for (j, y) in db.iter().enumerate().filter(|(j, _)| !used_b[*j]) {
            let d = distance(x.model_box.center, y.model_box.center);
            if d <= MAX_CENTRE_DISTANCE_VOXELS {
                by_distance.push((i, j, d));
            }
        }
    }
    by_distance.sort_by(|p, q| p.2.total_cmp(&q.2).then(p.0.cmp(&q.0)).then(p.1.cmp(&q.1)));
    for (i, j, _) in by_distance {
        take(i, j, 0.0, &mut used_a, &mut used_b);
    }
    matched.sort_unstable_by_key(|m| m.0);
    let pairs: Vec<Pair> = matched
        .into_iter()
        .map(|(i, j, iou)| pair([i, j], iou, &da[i], &db[j], spacing))
        .collect();
    let only_a: Vec<usize> = (0..da.len()).filter(|i| !used_a[*i]).collect();
    let only_b: Vec<usize> = (0..db.len()).filter(|j| !used_b[*j]).collect();
    let max_score_difference = pairs.iter().map(|p| p.score_difference).fold(0.0, f32::max);
    let mean_score_difference = if pairs.is_empty() {
        0.0
    } else {
        pairs.iter().map(|p| p.score_difference).sum::<f32>() / pairs.len() as f32
    };
    let max_face_difference_voxels = pairs
        .iter()
        .map(Pair::worst_face_voxels)
        .fold(0.0, f64::max);
    let max_face_difference_mm = pairs
        .iter()
        .flat_map(|p| p.face_difference_mm)
        .fold(0.0, f64::max);
    let within_tolerance = only_a.is_empty()
        && only_b.is_empty()
        && max_score_difference <= tolerances.score
        && max_face_difference_voxels <= tolerances.box_voxels;
    ParityReport {
        crossing_a: Vec::new(),
        crossing_b: Vec::new(),
        tolerances,
        count_a: da.len(),
        count_b: db.len(),
        pairs,
        only_a,
        only_b,
        max_score_difference,
        mean_score_difference,
        max_face_difference_voxels,
        max_face_difference_mm,
        within_tolerance,
    }
}

fn iou(a: &Detection, b: &Detection) -> f64 {
    a.model_box.iou(&b.model_box)
}

fn distance(a: [f64; 3], b: [f64; 3]) -> f64 {
    ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2) + (a[2] - b[2]).powi(2)).sqrt()
}

impl ParityReport {
    fn scores_and_boxes_within(&self) -> bool {
        self.max_score_difference <= self.tolerances.score
            && self.max_face_difference_voxels <= self.tolerances.box_voxels
    }

    /// The report as Markdown, for a terminal or a file.
    pub fn to_markdown(
        &self,
        a: &DetectionReport,
        b: &DetectionReport,
        label_a: &str,
        label_b: &str,
    ) -> String {
        let mut s = String::new();
        let verdict = if self.within_tolerance {
            "PASS"
        } else {
            "FAIL"
        };
        s.push_str(&format!("# Parity: {verdict}\n\n"));
        s.push_str(&format!(
            "- A: `{label_a}` ({} detections)\n- B: `{label_b}` ({} detections)\n",
            self.count_a, self.count_b
        ));
        s.push_str(&format!(
            "- tolerances: score {:e}, box faces {} voxels\n\n",
            self.tolerances.score, self.tolerances.box_voxels
        ));
        s.push_str("| measure | value |\n|---|---|\n");
        s.push_str(&format!("| matched | {} |\n", self.pairs.len()));
        s.push_str(&format!("| only in A | {} |\n", self.only_a.len()));
        s.push_str(&format!("| only in B | {} |\n", self.only_b.len()));
        s.push_str(&format!(
            "| of which threshold crossings (A, B) | {}, {} |\n",
            self.crossing_a.len(),
            self.crossing_b.len()
        ));
        s.push_str(&format!(
            "| max score difference | {:.3e} |\n",
            self.max_score_difference
        ));
        s.push_str(&format!(
            "| mean score difference | {:.3e} |\n",
            self.mean_score_difference
        ));
        s.push_str(&format!(
            "| max box face difference | {:.3} voxels, {:.3} mm |\n\n",
            self.max_face_difference_voxels, self.max_face_difference_mm
        ));
        let mut worst: Vec<&Pair> = self.pairs.iter().collect();
        worst.sort_by(|p, q| {
            q.score_difference
                .total_cmp(&p.score_difference)
                .then(q.worst_face_voxels().total_cmp(&p.worst_face_voxels()))
        });
        if !worst.is_empty() {
            s.push_str("Worst five matched detections:\n\n| A | B | score A | score B | difference | worst face (voxels) | centre LPS mm |\n|---|---|---|---|---|---|---|\n");
            for p in worst.iter().take(5) {
                s.push_str(&format!(
                    "| {} | {} | {:.6} | {:.6} | {:.3e} | {:.3} | {:.1}, {:.1}, {:.1} |\n",
                    p.a,
                    p.b,
                    p.score_a,
                    p.score_b,
                    p.score_difference,
                    p.worst_face_voxels(),
                    p.center_lps_mm[0],
                    p.center_lps_mm[1],
                    p.center_lps_mm[2]
                ));
            }
        }
        for (name, report, indices) in [("A", a, &self.only_a), ("B", b, &self.only_b)] {
            if indices.is_empty() {
                continue;
            }
            s.push_str(&format!("\nOnly in {name} (threshold {}):\n\n| # | score | centre LPS mm | size mm |\n|---|---|---|---|\n", report.config.score_threshold));
            for &i in indices.iter() {
                let d = &report.detections[i];
                s.push_str(&format!(
                    "| {i} | {:.6} | {:.1}, {:.1}, {:.1} | {:.1}, {:.1}, {:.1} |\n",
                    d.score,
                    d.center_lps_mm[0],
                    d.center_lps_mm[1],
                    d.center_lps_mm[2],
                    d.size_mm[0],
                    d.size_mm[1],
                    d.size_mm[2]
                ));
            }
        }
        s
    }
}
