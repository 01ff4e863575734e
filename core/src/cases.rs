//! One real case, finding by finding: every reader-marked nodule (how many readers, its size,
//! the best detection on it with its score and rank, hit or miss at the threshold) and every
//! detection at the threshold that no reader marked (a false positive), with whether it lies
//! inside the lung field. What a reader trusts more than a CPM.

use serde::{Deserialize, Serialize};

use crate::evaluate::Target;
use crate::report::DetectionReport;
use tessera_dicom::geometry::Vec3;

/// A nodule the readers marked.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Marked {
    pub target: Target,
    /// Readers who marked it (of 4).
    pub readers: usize,
}

/// One marked nodule and what the detector made of it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct NoduleRow {
    pub marked: Marked,
    /// The best detection on it: its score and rank (1 = the run's top score).
    pub best: Option<(f32, usize)>,
    /// That detection's box sides, mm (what a reader compares with the nodule's size).
    #[serde(default)]
    pub best_size_mm: Option<Vec3>,
    /// Found at the threshold.
    pub hit: bool,
}

/// A detection at the threshold that no reader marked.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct FalsePositive {
    pub score: f32,
    pub rank: usize,
    pub center_lps_mm: Vec3,
    pub size_mm: Vec3,
    /// Its centre is outside the lung field (kept only with `--keep-outside-lungs`).
    pub outside_lungs: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CaseTable {
    pub threshold: f32,
    pub nodules: Vec<NoduleRow>,
    pub false_positives: Vec<FalsePositive>,
}

/// The table of `report` against `marked`, at `threshold`. Ranks count every detection in the
/// file, so run the detector with a low threshold to rank the misses too.
pub fn case_table(report: &DetectionReport, marked: &[Marked], threshold: f32) -> CaseTable {
    let mut order: Vec<usize> = (0..report.detections.len()).collect();
    order.sort_by(|&a, &b| {
        report.detections[b]
            .score
            .total_cmp(&report.detections[a].score)
    });
    let nodules = marked
        .iter()
        .map(|m| {
            let best = order
                .iter()
                .enumerate()
                .find(|&(_, &i)| m.target.contains(report.detections[i].center_lps_mm))
                .map(|(rank, &i)| (&report.detections[i], rank + 1));
            NoduleRow {
                marked: *m,
                best: best.map(|(d, rank)| (d.score, rank)),
                best_size_mm: best.map(|(d, _)| d.size_mm),
                hit: best.is_some_and(|(d, _)| d.score >= threshold),
            }
        })
        .collect();
    let false_positives = order
        .iter()
        .enumerate()
        .map(|(rank, &i)| (rank + 1, &report.detections[i]))
        .filter(|(_, d)| d.score >= threshold)
        .filter(|(_, d)| !marked.iter().any(|m| m.target.contains(d.center_lps_mm)))
        .map(|(rank, d)| FalsePositive {
            score: d.score,
            rank,
            center_lps_mm: d.center_lps_mm,
            size_mm: d.size_mm,
            outside_lungs: d.outside_lungs,
        })
        .collect();
    CaseTable {
        threshold,
        nodules,
        false_positives,
    }
}

impl CaseTable {
    /// Markdown: the nodules (largest first), then the false positives.
    pub fn to_markdown(&self, name: &str) -> String {
        let mut rows: Vec<&NoduleRow> = self.nodules.iter().collect();
        rows.sort_by(|a, b| {
            b.marked
                .target
                .diameter_mm
                .total_cmp(&a.marked.target.diameter_mm)
        });
        let mut out = format!(
            "{name}, threshold {}\n\n| readers | size mm | position LPS mm | best score | rank | its box mm | at threshold |\n|---:|---:|---|---:|---:|---|---|\n",
            self.threshold
        );
        for r in rows {
            let [x, y, z] = r.marked.target.center_lps_mm;
            let (score, rank) = r.best.map_or(("-".into(), "-".into()), |(s, k)| {
                (format!("{s:.3}"), k.to_string())
            });
            let boxed = r
                .best_size_mm
                .map_or("-".into(), |[a, b, c]| format!("{a:.0} x {b:.0} x {c:.0}"));
            let size = match r.marked.target.diameter_mm {
                // LIDC readers mark nodules under 3 mm with a point, not an outline.
                d if d > 0.0 => format!("{d:.1}"),
                _ => "< 3 (point)".into(),
            };
            out.push_str(&format!(
                "| {} | {size} | {x:.1}, {y:.1}, {z:.1} | {score} | {rank} | {boxed} | {} |\n",
                r.marked.readers,
                if r.hit { "hit" } else { "miss" }
            ));
        }
        out.push_str(&format!(
            "\n{} false positive(s) at the threshold\n",
            self.false_positives.len()
        ));
        if !self.false_positives.is_empty() {
            out.push_str("\n| score | rank | position LPS mm | size mm | lungs |\n|---:|---:|---|---:|---|\n");
        }
        for f in &self.false_positives {
            let [x, y, z] = f.center_lps_mm;
            out.push_str(&format!(
                "| {:.3} | {} | {x:.1}, {y:.1}, {z:.1} | {:.1} | {} |\n",
                f.score,
                f.rank,
                f.size_mm.iter().copied().fold(0.0, f64::max),
                if f.outside_lungs { "outside" } else { "inside" }
            ));
        }
        out
    }
}
