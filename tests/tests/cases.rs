//! The per-case table: every marked nodule with its best detection's score and rank, and
//! every unmarked detection at the threshold as a false positive.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use tessera_core::cases::{Marked, case_table};
use tessera_core::evaluate::Target;
use tessera_tests::{runtime_available, tiny_model_report};

#[test]
fn marks_get_their_best_detection_and_the_rest_are_false_positives() {
    if !runtime_available() {
        return;
    }
    let report = tiny_model_report();
    let d = &report.detections;
    assert!(
        d.len() >= 4,
        "the test needs four detections, got {}",
        d.len()
    );
    let mut by_score: Vec<usize> = (0..d.len()).collect();
    by_score.sort_by(|&a, &b| d[b].score.total_cmp(&d[a].score));
    let mark = |i: usize| Marked {
        target: Target {
            center_lps_mm: d[i].center_lps_mm,
            diameter_mm: 2.0,
        },
        readers: 4,
    };
    let far = Marked {
        target: Target {
            center_lps_mm: [9999.0, 0.0, 0.0],
            diameter_mm: 10.0,
        },
        readers: 1,
    };
    // The second and the fourth by score are marked; the threshold sits at the third.
    let threshold = d[by_score[2]].score;
    let table = case_table(
        &report,
        &[mark(by_score[1]), mark(by_score[3]), far],
        threshold,
    );
    assert_eq!(table.nodules[0].best.map(|(_, rank)| rank), Some(2));
    assert!(table.nodules[0].hit);
    assert_eq!(table.nodules[1].best.map(|(_, rank)| rank), Some(4));
    assert!(!table.nodules[1].hit, "ranked below the threshold");
    assert_eq!(table.nodules[1].best_size_mm, Some(d[by_score[3]].size_mm));
    assert_eq!(table.nodules[2].best, None);
    assert_eq!(table.nodules[2].best_size_mm, None);
    let ranks: Vec<usize> = table.false_positives.iter().map(|f| f.rank).collect();
    assert_eq!(ranks, [1, 3], "the unmarked detections at the threshold");
    let text = table.to_markdown("phantom");
    assert!(
        text.contains("2 false positive(s) at the threshold"),
        "{text}"
    );
    let [a, b, c] = d[by_score[1]].size_mm;
    assert!(
        text.contains(&format!("| 2 | {a:.0} x {b:.0} x {c:.0} | hit |")),
        "{text}"
    );
}
