//! DICOM SR export: a run's findings and a reader's review as TID 1500, read back by Tessera,
//! by dcmtk (`dsrdump`, `dsr2xml`) and validated by dicom3tools (`dciodvfy`).

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::process::Command;

use tessera_core::lungrads::Category;
use tessera_core::measure::{AxialAxes, Measurements, Method, NoduleType};
use tessera_core::report::DetectionReport;
use tessera_core::review::{AddedFinding, Decision, Review};
use tessera_core::sr::{self, Selection, SrError, SrOptions};
use tessera_dicom::dicom::sr::read_sr;
use tessera_tests::{runtime_available, tiny_model_report, tool};

/// GraphicData is FL: positions of a few hundred mm keep about 1e-5 mm; sides are
/// differences of two such positions.
const MM_TOLERANCE: f64 = 1e-3;
/// The certainty is written as a decimal string of percent with 6 decimals.
const SCORE_TOLERANCE: f32 = 1e-6;

fn report() -> DetectionReport {
    let report = tiny_model_report();
    assert!(
        report.detections.len() >= 3,
        "the test needs three detections, the run found {}",
        report.detections.len()
    );
    report
}

/// Accept the first, reject the second (with a note), leave the rest; one drawn finding.
fn review(report: &DetectionReport) -> Review {
    let mut review = Review::new(report, "Reader^Test");
    review.decide(0, Some(Decision::Accepted), "20261204120000");
    review.decide(1, Some(Decision::Rejected), "20261204120100");
    review.findings[1].note = "vessel crossing".into();
    review.findings[0].lung_rads = Some(Category::FourA);
    review.findings[0].axes = Some(reader_axes());
    review.added.push(AddedFinding {
        center_lps_mm: [10.0, -20.0, 30.0],
        size_mm: [12.0, 11.0, 10.0],
        note: "missed by the detector".into(),
        added_at: "20261204120200".into(),
        measurements: Some(drawn_measurements()),
        lung_rads: Some(Category::Three),
        decision: None,
    });
    review
}

/// Axes a reader drew over the first detection's.
fn reader_axes() -> AxialAxes {
    AxialAxes::from_ends(
        2,
        [[1.0, 1.0], [11.0, 1.0]],
        [[6.0, -2.0], [6.0, 4.0]],
        [0.8, 0.8],
    )
}

/// What the viewer measures for a drawn finding: every item TID 1411 gets from Tessera.
fn drawn_measurements() -> Measurements {
    Measurements {
        method: Method::Segmented,
        axes: AxialAxes {
            slice: 3,
            long_axis_mm: 12.4,
            short_axis_mm: 10.2,
            long_axis_ends: [[10.0, 10.0], [27.7, 10.0]],
            short_axis_ends: [[19.0, 3.0], [19.0, 17.6]],
        },
        mean_diameter_mm: 11.3,
        volume_mm3: Some(812.0),
        mean_hu: Some(-35.0),
        nodule_type: Some(NoduleType::Solid),
        solid_axes: None,
        solid_mean_diameter_mm: None,
        how: "made up for the test".into(),
    }
}

fn options(selection: Selection) -> SrOptions {
    SrOptions {
        selection,
        sop_instance_uid: "2.25.1001".into(),
        series_uid: "2.25.1002".into(),
        content_date: "20261204".into(),
        content_time: "120300".into(),
    }
}

#[test]
fn findings_and_decisions_survive_the_round_trip() {
    if !runtime_available() {
        return;
    }
    let report = report();
    let review = review(&report);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sr.dcm");
    let count = sr::write(&path, &report, Some(&review), &options(Selection::All)).unwrap();
    assert_eq!(count, report.detections.len() + 1);

    let read = read_sr(&path).unwrap();
    let source = report.source.as_ref().unwrap();
    assert_eq!(read.sop_instance_uid, "2.25.1001");
    assert_eq!(read.study_uid, source.study_uid);
    assert_eq!(
        read.evidence_series_uid.as_deref(),
        Some(source.series_uid.as_str())
    );
    assert!(!read.complete, "only two of the detections were decided");
    let findings = sr::findings(&read, &path).unwrap();
    assert_eq!(findings.len(), count);
    for (i, (found, detection)) in findings.iter().zip(&report.detections).enumerate() {
        assert_eq!(found.tracking_id, format!("Tessera detection {}", i + 1));
        assert_eq!(found.frame_of_reference_uid, source.frame_of_reference_uid);
        for k in 0..3 {
            assert!((found.center_lps_mm[k] - detection.center_lps_mm[k]).abs() < MM_TOLERANCE);
            let side = found.size_mm.unwrap()[k];
            assert!(
                (side - detection.size_mm[k]).abs() < MM_TOLERANCE,
                "{side} {detection:?}"
            );
        }
        let score = found.score.unwrap();
        assert!(
            (score - detection.score).abs() < SCORE_TOLERANCE,
            "{score} {}",
            detection.score
        );
        // One size, the same as det.json's, with the measurements it came from.
        let m = detection
            .measurements
            .as_ref()
            .expect("every detection is measured");
        let read = &found.measured;
        // The reader's axes where drawn (the first), else the measured ones.
        let (axes, mean) = match i {
            0 => (reader_axes(), reader_axes().mean_diameter_mm()),
            _ => (m.axes, detection.mean_diameter_mm()),
        };
        assert_eq!(read.mean_diameter_mm, Some(mean));
        assert_eq!(read.long_axis_mm, Some(axes.long_axis_mm));
        assert_eq!(read.short_axis_mm, Some(axes.short_axis_mm));
        assert_eq!(read.volume_mm3, m.volume_mm3);
        assert_eq!(read.mean_hu, m.mean_hu);
        assert_eq!(found.nodule_type, m.nodule_type);
    }
    // The reader's category over none suggested (the test model is not a chest model).
    assert_eq!(findings[0].lung_rads, Some((Category::FourA, false)));
    assert_eq!(findings[1].lung_rads, None);
    assert_eq!(findings[0].decision, Some(Decision::Accepted));
    assert_eq!(findings[1].decision, Some(Decision::Rejected));
    assert_eq!(findings[1].note, "vessel crossing");
    assert_eq!(findings[2].decision, None);
    let drawn = findings.last().unwrap();
    assert_eq!(drawn.tracking_id, "Reader finding 1");
    assert_eq!(
        (drawn.score, drawn.decision),
        (None, Some(Decision::Accepted))
    );
    assert_eq!(drawn.center_lps_mm, [10.0, -20.0, 30.0]);
    let measured = &drawn.measured;
    assert_eq!(
        (
            measured.mean_diameter_mm,
            measured.long_axis_mm,
            measured.short_axis_mm
        ),
        (Some(11.3), Some(12.4), Some(10.2))
    );
    assert_eq!(
        (measured.volume_mm3, measured.mean_hu),
        (Some(812.0), Some(-35.0))
    );
    assert_eq!(drawn.nodule_type, Some(NoduleType::Solid));
    assert_eq!(drawn.lung_rads, Some((Category::Three, false)));

    let accepted = dir.path().join("accepted.dcm");
    let count = sr::write(
        &accepted,
        &report,
        Some(&review),
        &options(Selection::AcceptedOnly),
    );
    assert_eq!(
        count.unwrap(),
        2,
        "the accepted detection and the drawn finding"
    );
}

#[test]
fn what_cannot_be_reported_is_refused_before_writing() {
    if !runtime_available() {
        return;
    }
    let mut report = report();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sr.dcm");
    let accepted = sr::write(&path, &report, None, &options(Selection::AcceptedOnly));
    assert!(
        matches!(accepted, Err(SrError::AcceptedOnlyWithoutReview)),
        "{accepted:?}"
    );
    report
        .source
        .as_mut()
        .unwrap()
        .frame_of_reference_uid
        .clear();
    let no_frame = sr::write(&path, &report, None, &options(Selection::All));
    assert!(
        matches!(no_frame, Err(SrError::NoFrameOfReference { .. })),
        "{no_frame:?}"
    );
    report.source = None;
    let old = sr::write(&path, &report, None, &options(Selection::All));
    assert!(matches!(old, Err(SrError::NoSource)), "{old:?}");
    assert!(!path.exists(), "a refused SR left a file behind");

    // A review of another run is refused: its indices would name other findings.
    let other = review(&self::report());
    let review_path = dir.path().join("review.json");
    other.write(&review_path).unwrap();
    report.detections.pop();
    let err = Review::read_for(&review_path, &report).unwrap_err();
    assert!(err.to_string().contains("not this one"), "{err}");
}

/// Runs `program` with `args`, returning stdout; fails the test on a non-zero exit.
fn run(program: &Path, args: &[&Path]) -> String {
    let out = Command::new(program).args(args).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let errors = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "{} failed: {text}{errors}",
        program.display()
    );
    text + &errors
}

fn concept_meaning<'a>(node: roxmltree::Node<'a, 'a>) -> Option<&'a str> {
    node.children()
        .find(|c| c.has_tag_name("concept"))?
        .children()
        .find(|c| c.has_tag_name("meaning"))?
        .text()
}

#[test]
fn dcmtk_reads_the_tree_and_dicom3tools_finds_no_error() {
    if !runtime_available() {
        return;
    }
    let (Some(dsrdump), Some(dsr2xml), Some(dciodvfy)) = (
        tool("dsrdump", "dcmtk"),
        tool("dsr2xml", "dcmtk"),
        tool("dciodvfy", "dicom3tools"),
    ) else {
        return;
    };
    let report = report();
    let review = review(&report);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sr.dcm");
    sr::write(&path, &report, Some(&review), &options(Selection::All)).unwrap();

    let dump = run(&dsrdump, &[&path]);
    assert!(dump.contains("Comprehensive 3D SR Document"), "{dump}");
    assert!(dump.contains("Imaging Measurement Report"), "{dump}");
    for item in [
        "Long Axis",
        "Short Axis",
        "Attenuation Coefficient",
        "Lung-RADS category",
    ] {
        assert!(dump.contains(item), "{item}: {dump}");
    }

    let verdict = run(&dciodvfy, &[&path]);
    // dicom3tools knows the standard's coding schemes only: Tessera's private one (declared in
    // the Coding Scheme Identification Sequence, as PS3.16 8.2 asks) is its one warning.
    let private = format!(
        "Warning - Unrecognized defined term <{}> for value 1 of attribute <Coding Scheme Designator>",
        sr::codes::TESSERA_SCHEME
    );
    let problems: Vec<&str> = verdict
        .lines()
        .filter(|l| l.starts_with("Error") || l.starts_with("Warning"))
        .filter(|l| *l != private)
        .collect();
    assert!(problems.is_empty(), "dciodvfy: {problems:#?}");

    let xml = run(&dsr2xml, &[&path]);
    let doc = roxmltree::Document::parse(&xml).unwrap();
    let source = report.source.as_ref().unwrap();
    let groups: Vec<_> = doc
        .descendants()
        .filter(|n| n.has_tag_name("container") && concept_meaning(*n) == Some("Measurement Group"))
        .collect();
    assert_eq!(groups.len(), report.detections.len() + 1);
    for group in &groups {
        let region = group
            .children()
            .find(|c| c.has_tag_name("scoord3d"))
            .expect("each group has a 3D region");
        assert_eq!(region.attribute("type"), Some("ELLIPSOID"));
        let data = region.children().find(|c| c.has_tag_name("data")).unwrap();
        assert_eq!(
            data.attribute("uid"),
            Some(source.frame_of_reference_uid.as_str())
        );
        assert_eq!(
            data.text().unwrap().trim().split(',').count(),
            6,
            "six points"
        );
    }
    let decisions: Vec<&str> = groups
        .iter()
        .map(|g| {
            g.children()
                .find(|c| c.has_tag_name("code") && concept_meaning(*c) == Some("Reader decision"))
                .and_then(|c| c.children().find(|v| v.has_tag_name("value")))
                .and_then(|v| v.text())
                .unwrap_or("-")
        })
        .collect();
    assert_eq!(&decisions[..2], ["accepted", "rejected"]);
    assert!(decisions[2..decisions.len() - 1].iter().all(|d| *d == "-"));
    assert_eq!(decisions.last(), Some(&"accepted"));
    let cited = doc
        .descendants()
        .filter(|n| n.has_tag_name("evidence"))
        .flat_map(|e| e.descendants().filter(|n| n.has_tag_name("instance")))
        .count();
    assert_eq!(cited, source.instances.len());
}

#[test]
fn an_unnamed_reader_is_not_invented() {
    if !runtime_available() {
        return;
    }
    use tessera_dicom::dicom::sr::Value;
    let report = report();
    let mut review = review(&report);
    let dir = tempfile::tempdir().unwrap();
    let observers = |review: &Review, name: &str| {
        let path = dir.path().join(name);
        sr::write(&path, &report, Some(review), &options(Selection::All)).unwrap();
        read_sr(&path)
            .unwrap()
            .root
            .children
            .iter()
            .filter(|c| matches!(c.value, Value::PName(_)))
            .count()
    };
    assert_eq!(observers(&review, "named.dcm"), 1);
    review.reader.clear();
    assert_eq!(observers(&review, "unnamed.dcm"), 0);
}
