//! The viewer driven through egui_kittest (AccessKit queries, no display): opening studies,
//! running the detector, the table and threshold, cancel, refusals, and a snapshot of the
//! three views with boxes and seams rendered on a CPU adapter.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::PathBuf;

use egui_kittest::kittest::{NodeT as _, Queryable as _};
use support::{
    drag, harness, harness_with, phantom_study, reading_harness, run_on_phantom, step_until,
    use_model,
};
use tessera::gui::{Source, TesseraApp};
use tessera_core::phantom::{self, PhantomSpec};
use tessera_tests::runtime_available;

#[test]
fn no_argument_opens_the_demo_study_in_three_views() {
    let mut h = harness(Source::Demo);
    step_until(&mut h, "the demo study", |app| app.study.is_some());
    let study = h.state().study.as_ref().unwrap();
    assert_eq!(study.volume.geometry.size, [512, 512, 160]);
    assert_eq!(study.cursor, [256, 256, 80]);
    // The study card and the plan for the default model are on screen.
    h.get_by_label_contains("512x512x160 voxels");
    h.get_by_label_contains("Plan:");
    // The shipped card's calibration: an upper bound, and what it rests on.
    h.get_by_label_contains("predicted peak ≤");
    h.get_by_label_contains("(calibrated on 7 runs, which peaked 0 to ");
    // The shipped card's optional stages, each with its switch.
    h.get_by_label("Coarse pass for large lesions");
    h.get_by_label("Rescore candidates");
}

#[test]
fn detection_runs_lists_boxes_and_the_threshold_filters_them() {
    if !runtime_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut h = harness(Source::Path(phantom_study(dir.path(), [128, 128, 48])));
    run_on_phantom(&mut h, None);
    let app = h.state();
    let record = app.run_panel.runs.last().unwrap();
    let n = record.report.detections.len();
    assert!(n > 0, "the test model finds peaks on the phantom");
    assert_eq!(
        app.review.rows(record).len(),
        n,
        "all shown at the run's threshold"
    );
    h.get_by_label_contains(&format!("{}: {n} detection(s)", record.label));
    // The test model has no lung field: its switch is there, but cannot be turned on.
    assert!(record.lung_field.is_none());
    assert!(h.get_by_label("Lung field").accesskit_node().is_disabled());
    // Raise the threshold above every score: the table empties and says so.
    let top = record
        .report
        .detections
        .iter()
        .map(|d| d.score)
        .fold(0.0, f32::max);
    h.get_by_role_and_label(egui::accesskit::Role::Slider, "score threshold")
        .set_value_accesskit(f64::from(top) + 1e-3);
    h.step();
    h.step();
    h.get_by_label("Nothing at this threshold.");
    // Between: only the detections at or above it.
    let mid = record_scores_median(h.state());
    h.state_mut().review.threshold = mid;
    h.step();
    let app = h.state();
    let record = app.run_panel.runs.last().unwrap();
    let expected = record
        .report
        .detections
        .iter()
        .filter(|d| d.score >= mid)
        .count();
    assert_eq!(app.review.rows(record).len(), expected);
    assert!(expected < n);
}

fn record_scores_median(app: &TesseraApp) -> f32 {
    let mut s: Vec<f32> = app
        .run_panel
        .runs
        .last()
        .unwrap()
        .report
        .detections
        .iter()
        .map(|d| d.score)
        .collect();
    s.sort_by(f32::total_cmp);
    s[s.len() / 2]
}

#[test]
fn selecting_a_detection_moves_every_view_to_it() {
    if !runtime_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut h = harness(Source::Path(phantom_study(dir.path(), [128, 128, 48])));
    run_on_phantom(&mut h, None);
    let target = {
        let d = &h.state().run_panel.runs[0].report.detections[0];
        std::array::from_fn::<usize, 3, _>(|a| (d.box_voxel.min[a] + d.box_voxel.max[a] - 1) / 2)
    };
    // Row "1" in the table is detection 1 (sorted by score, the best first).
    h.get_by_label("1").click();
    h.step();
    assert_eq!(h.state().review.selected_detection(), Some(0));
    assert_eq!(h.state().study.as_ref().unwrap().cursor, target);
}

#[test]
fn cancel_stops_the_run_within_a_window() {
    if !runtime_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut h = harness(Source::Path(phantom_study(dir.path(), [160, 160, 64])));
    step_until(&mut h, "the phantom", |app| app.study.is_some());
    use_model(&mut h, "tessera-test-tiny");
    h.state_mut().run_panel.patch = [32, 32, 16];
    h.step();
    let total = match h.state().run_panel.plan() {
        Some(Ok(plan)) => plan.windows.len(),
        other => panic!("{other:?}"),
    };
    assert!(total > 50);
    h.get_by_label("Run").click();
    step_until(&mut h, "the first window", |app| {
        app.run_panel
            .job
            .as_ref()
            .is_some_and(|j| !j.finished.is_empty())
    });
    h.get_by_label("Cancel").click();
    step_until(&mut h, "the cancel", |app| !app.run_panel.is_running());
    let app = h.state();
    assert!(
        app.run_panel.runs.is_empty(),
        "a cancelled run leaves no result"
    );
    assert!(
        app.messages.iter().any(|m| m.text == "run cancelled"),
        "{:?}",
        app.messages
    );
}

#[test]
fn a_refused_plan_shows_its_error_and_cannot_start() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = harness(Source::Path(phantom_study(dir.path(), [96, 96, 24])));
    step_until(&mut h, "the phantom", |app| app.study.is_some());
    use_model(&mut h, "tessera-test-tiny");
    h.state_mut().run_panel.patch = [96, 96, 24];
    h.step();
    h.get_by_label_contains("Plan refused: patch 96x96x24 covers the whole volume");
    assert!(h.get_by_label("Run").accesskit_node().is_disabled());
    // Over a memory budget: refused at plan time as well, with the figures.
    h.state_mut().run_panel.patch = [48, 48, 24];
    h.state_mut().run_panel.budget_gib = Some(0.001);
    h.step();
    let app = h.state();
    match app.run_panel.plan() {
        // The test model's card has no memory coefficients: no prediction, so no refusal.
        Some(Ok(plan)) => assert!(plan.predicted_peak_bytes.is_none()),
        other => panic!("{other:?}"),
    }
    // Choosing a patch for the budget then says why it cannot, instead of doing nothing.
    h.get_by_label("Choose patch").click();
    h.step();
    h.get_by_label_contains("no memory model for tessera-test-tiny on cpu");
    assert_eq!(h.state().run_panel.patch, [48, 48, 24]);
}

#[test]
fn a_folder_without_dicom_shows_the_reason_in_the_window() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "not an image").unwrap();
    let mut h = harness(Source::Path(dir.path().to_path_buf()));
    step_until(&mut h, "the failure", |app| app.load.is_none());
    assert!(h.state().study.is_none());
    h.get_by_label_contains("no DICOM image series in");
    h.get_by_label_contains("notes.txt");
}

#[test]
fn a_folder_with_several_series_shows_a_picker() {
    let Some(dir) = tessera_tests::shared_data("dcm_qa_ct") else {
        return;
    };
    // The GE series has uneven gaps: openable only with gaps allowed, and it comes first.
    let mut h = harness_with(Source::Path(dir), true);
    step_until(&mut h, "the picker", |app| {
        app.picker.is_some() || app.study.is_some()
    });
    let rows = h.state().picker.as_ref().map_or(0, |p| p.rows.len());
    assert!(rows >= 2, "{rows}");
    h.get_by_label_contains("choose one");
    h.get_all_by_label("Open").next().unwrap().click();
    step_until(&mut h, "the chosen series", |app| {
        app.study.is_some() || !app.messages.is_empty()
    });
}

#[test]
fn three_views_with_boxes_and_seams_match_the_snapshot() {
    if !runtime_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut h = support::snapshot_harness(dir.path());
    h.state_mut().review.show_seams = true;
    h.get_by_label("1").click();
    h.step();
    support::snapshot_without_timings(&mut h, "three_views_boxes_seams");
}

#[test]
fn a_tilted_series_opens_and_every_view_draws() {
    let Some(dir) = tessera_tests::shared_data("dcm_qa_ct/GE") else {
        return;
    };
    let mut h = harness_with(Source::Path(dir), true);
    step_until(&mut h, "the GE series", |app| {
        app.study.is_some() || app.picker.is_some() || !app.messages.is_empty()
    });
    if h.state().picker.is_some() {
        h.get_all_by_label("Open").next().unwrap().click();
        step_until(&mut h, "the chosen series", |app| {
            app.study.is_some() || !app.messages.is_empty()
        });
    }
    assert!(h.state().study.is_some(), "{:?}", h.state().messages);
    h.get_by_label_contains("mm, gantry tilt");
    // Its interpolated slices are said, not hidden.
    h.get_by_label_contains("slice(s) of this series are interpolated, not read from a file");
    // Scroll to both ends of every axis: nothing panics at the edges.
    for plane in tessera::gui::study::PLANES {
        h.state_mut().study.as_mut().unwrap().scroll(plane, -10_000);
        h.step();
        h.state_mut().study.as_mut().unwrap().scroll(plane, 10_000);
        h.step();
    }
}

#[test]
fn two_runs_compare_through_parity() {
    if !runtime_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut h = harness(Source::Path(phantom_study(dir.path(), [128, 128, 48])));
    run_on_phantom(&mut h, Some([64, 64, 32]));
    // The same study at another patch: halo tiling gives the same detections.
    h.state_mut().run_panel.patch = [128, 64, 24];
    h.step();
    h.get_by_label("Run").click();
    step_until(&mut h, "the second run", |app| {
        app.run_panel.runs.len() == 2
    });
    h.get_by_label("Compare with previous run").click();
    h.step();
    let n = h.state().run_panel.runs[1].report.detections.len();
    h.get_by_label_contains(&format!(
        "Parity with the previous run: {n} matched, 0 only before (magenta), 0 only now"
    ));
    h.get_by_label_contains("within tolerance");
}

#[test]
fn damaged_real_slices_show_the_file_and_the_reason_in_the_message_bar() {
    use tessera_tests::bad_input::{self, VICTIM, copy_study, slice_path};
    let Some(sources) = bad_input::source_series() else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    for kind in bad_input::dicom_kinds() {
        let work = tempfile::tempdir_in(root.path()).unwrap();
        let study = copy_study(&sources, work.path());
        (kind.damage)(&study);
        let mut h = harness(Source::Path(study.clone()));
        step_until(&mut h, kind.name, |app| app.load.is_none());
        assert!(h.state().study.is_none(), "{}: opened", kind.name);
        h.get_by_label_contains(kind.reason);
        if kind.names_file {
            let victim = slice_path(&study, VICTIM);
            h.get_by_label_contains(&victim.display().to_string());
        }
    }
}

#[test]
fn with_gaps_allowed_a_damaged_slice_is_filled_and_said() {
    use tessera_tests::bad_input::{self, copy_study};
    let Some(sources) = bad_input::source_series() else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let study = copy_study(&sources, root.path());
    let kinds = bad_input::dicom_kinds();
    let kind = kinds.iter().find(|k| k.name == "RescaleSlope NaN").unwrap();
    (kind.damage)(&study);
    let mut h = harness_with(Source::Path(study), true);
    step_until(&mut h, "the study", |app| app.load.is_none());
    assert!(h.state().study.is_some(), "{:?}", h.state().messages);
    h.get_by_label_contains("1 slice(s) of this series are interpolated");
    assert!(
        h.get_all_by_label_contains("in place of unreadable")
            .next()
            .is_some()
    );
}

#[test]
fn a_reader_decides_with_keys_and_gets_the_review_back_on_the_same_run() {
    if !runtime_available() {
        return;
    }
    use tessera::common::settings::Places;
    use tessera_core::review::{Decision, run_id};
    use tessera_core::sr::Selection;

    let dir = tempfile::tempdir().unwrap();
    let mut h = reading_harness(dir.path());
    h.state_mut().profile.settings.reader = "Reader^Test".into();
    let rows = {
        let app = h.state();
        app.review.rows(app.run_panel.runs.last().unwrap())
    };
    assert!(rows.len() >= 2, "the test needs two findings");

    // J selects the first row, A accepts it; J moves on, R rejects; K goes back.
    for key in [
        egui::Key::J,
        egui::Key::A,
        egui::Key::J,
        egui::Key::R,
        egui::Key::K,
    ] {
        h.key_press(key);
        h.step();
    }
    let app = h.state();
    assert_eq!(app.review.selected_detection(), Some(rows[0]));
    assert_eq!(
        app.review.reading.decision(rows[0]),
        Some(Decision::Accepted)
    );
    assert_eq!(
        app.review.reading.decision(rows[1]),
        Some(Decision::Rejected)
    );
    h.get_by_label("accepted");
    h.get_by_label("rejected");
    h.get_by_label_contains("Reviewed 2 of");

    // Saved at once, beside nothing of the study's.
    let report = app.run_panel.runs.last().unwrap().report.clone();
    let stored = Places::under(&dir.path().join("user"))
        .review_path(&run_id(&report))
        .unwrap();
    assert!(stored.is_file(), "{} was not written", stored.display());

    // The SR carries the decisions and the reader.
    let sr_path = dir.path().join("sr.dcm");
    let count = h
        .state()
        .export_sr(Selection::AcceptedOnly, &sr_path)
        .unwrap();
    assert_eq!(count, 1);
    let read = tessera_dicom::dicom::sr::read_sr(&sr_path).unwrap();
    let findings = tessera_core::sr::findings(&read, &sr_path).unwrap();
    assert_eq!(findings[0].decision, Some(Decision::Accepted));
    let refused = h
        .state()
        .export_sr(Selection::All, &dir.path().join("study").join("sr.dcm"));
    assert!(
        refused.is_err(),
        "an SR is never written into the study's folder"
    );

    // det.json exported with its review beside it, which `tessera sr --review` takes.
    let det = dir.path().join("det.json");
    let app = h.state();
    tessera::gui::review::export(
        app.run_panel.runs.last().unwrap(),
        tessera::gui::review::ExportKind::Json,
        &det,
        &[],
        app.review.reading.review.as_ref(),
    )
    .unwrap();
    let exported = tessera_core::report::DetectionReport::read_json(&det).unwrap();
    let review_path = tessera::gui::review::review_beside(&det);
    let review = tessera_core::review::Review::read_for(&review_path, &exported).unwrap();
    assert_eq!(review.reader, "Reader^Test");

    // The same run again: the same detections, so the review comes back.
    h.get_by_label("Run").click();
    step_until(&mut h, "the second run", |app| {
        !app.run_panel.is_running() && app.run_panel.runs.len() == 2
    });
    let app = h.state();
    assert_eq!(
        app.review.reading.decision(rows[0]),
        Some(Decision::Accepted)
    );
    assert_eq!(
        app.review.reading.decision(rows[1]),
        Some(Decision::Rejected)
    );
    assert!(
        app.messages.iter().any(|m| m
            .text
            .starts_with("restored the review of this run (2 decision(s))")),
        "{:?}",
        app.messages
    );
}

#[test]
fn a_study_opens_from_the_pacs_and_the_reviewed_sr_goes_back() {
    if !runtime_available() {
        return;
    }
    let Some(orthanc) = tessera_tests::orthanc::Orthanc::start() else {
        return;
    };
    use tessera::common::settings::Places;
    use tessera_core::review::Decision;

    let dir = tempfile::tempdir().unwrap();
    // The PACS holds the phantom the other tests run on; the viewer starts with nothing open.
    let spec = PhantomSpec {
        seed: 9,
        size: [128, 128, 48],
        spacing_mm: [2.5, 2.5, 5.0],
        nodules: 3,
        noise_hu: 18.0,
        masses: 0,
    };
    let remote = phantom::generate(&spec).unwrap();
    let remote_dir = dir.path().join("remote");
    phantom::write_series(&remote, &remote_dir).unwrap();
    let files: Vec<PathBuf> = std::fs::read_dir(&remote_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "dcm"))
        .collect();
    orthanc.server().store_files(&files).unwrap();

    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let mut h = harness(Source::Path(empty));
    step_until(&mut h, "the empty folder's refusal", |app| {
        app.load.is_none()
    });
    let places = Places::under(&dir.path().join("user"));
    h.state_mut().use_places(places.clone());
    {
        let settings = &mut h.state_mut().profile.settings;
        settings.pacs_url = orthanc.dicomweb_url();
        settings.pacs_user = tessera_tests::orthanc::USER.into();
        settings.pacs_password = tessera_tests::orthanc::PASSWORD.into();
    }
    h.state_mut().pacs.open = true;
    // A new window measures itself in its first frame and shows in the next.
    h.step();
    h.step();
    h.get_by_label("Search").click();
    step_until(&mut h, "the study list", |app| !app.pacs.studies.is_empty());
    h.get_by_label_contains("PHANTOM SEED9");
    h.get_by_label("Open CT").click();
    let uid = remote.volume.info.series_uid.clone();
    step_until(&mut h, "the retrieved study", |app| {
        app.study
            .as_ref()
            .is_some_and(|s| s.volume.info.series_uid == uid)
    });
    let study = h.state().study.as_ref().unwrap();
    assert_eq!(study.volume.voxels, remote.volume.voxels);
    assert!(
        study.source.starts_with(&places.retrieved),
        "{}",
        study.source.display()
    );

    // Run, accept the best finding, send the SR.
    use_model(&mut h, "tessera-test-tiny");
    h.step();
    h.get_by_label("Run").click();
    step_until(&mut h, "the run", |app| {
        !app.run_panel.is_running() && !app.run_panel.runs.is_empty()
    });
    h.key_press(egui::Key::J);
    h.step();
    h.key_press(egui::Key::A);
    h.step();
    let best = h.state().review.selected_detection().unwrap();
    assert_eq!(
        h.state().review.reading.decision(best),
        Some(Decision::Accepted)
    );
    h.state_mut().send_sr();
    step_until(&mut h, "the SR upload", |app| !app.pacs.is_busy());
    assert!(
        h.state()
            .messages
            .iter()
            .any(|m| !m.error && m.text.starts_with("the PACS stored the SR (1 instance(s))")),
        "{:?}",
        h.state().messages
    );
    let series = orthanc
        .server()
        .search_series(&remote.volume.info.study_uid)
        .unwrap();
    assert_eq!(series.iter().filter(|s| s.modality == "SR").count(), 1);
}

#[test]
fn the_reader_measures_with_a_ruler_and_adds_a_missed_finding() {
    if !runtime_available() {
        return;
    }
    use tessera::gui::tools::Tool;

    let dir = tempfile::tempdir().unwrap();
    let mut h = reading_harness(dir.path());

    // The axial view is the top-left cell of the central panel.
    let (from, to) = (egui::pos2(180.0, 180.0), egui::pos2(240.0, 220.0));
    h.get_by_label("ruler").click();
    h.step();
    assert_eq!(h.state().study.as_ref().unwrap().tools.tool, Tool::Ruler);
    drag(&mut h, from, to);
    let study = h.state().study.as_ref().unwrap();
    let ruler = *study.tools.rulers.last().expect("the drag left a ruler");
    let mm = tessera::gui::tools::length_mm(&ruler, &study.volume.geometry);
    assert!(mm > 5.0, "{mm} mm for a 72-pixel line");
    assert!(h.query_by_label_contains("Reader finding").is_none());
    h.get_by_label("add finding").click();
    h.step();
    drag(&mut h, from, to);
    let added = &h.state().review.reading.review.as_ref().unwrap().added;
    assert_eq!(added.len(), 1, "{:?}", h.state().messages);
    assert!(added[0].size_mm.iter().all(|s| *s > 0.0), "{:?}", added[0]);
    // It is a row of the table: selected, it can be removed.
    h.get_by_label("R1").click();
    h.run();
    h.get_by_label_contains("Reader finding 1:");
    h.get_by_label("Remove").click();
    h.step();
    assert!(
        h.state()
            .review
            .reading
            .review
            .as_ref()
            .unwrap()
            .added
            .is_empty()
    );
}

/// File > Open batch results: the batch's studies listed, a failed one not openable, and a
/// done one opened with its run's detections (from its det.json) in the table.
#[test]
fn batch_results_open_a_study_with_its_runs_detections() {
    if !runtime_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let study = phantom_study(dir.path(), [128, 128, 48]);
    std::fs::create_dir_all(dir.path().join("broken")).unwrap();
    std::fs::write(dir.path().join("broken/x.dcm"), b"not DICOM").unwrap();
    let manifest = dir.path().join("m.csv");
    std::fs::write(&manifest, "study,id\nstudy,a\nbroken,bad\n").unwrap();
    let out = dir.path().join("out");
    let tiny = tessera_plan::model::shipped_models_dir().join("tessera-test-tiny");
    let ran = std::process::Command::new(env!("CARGO_BIN_EXE_tessera"))
        .arg("batch")
        .arg(&manifest)
        .arg("--out")
        .arg(&out)
        .arg("--model")
        .arg(&tiny)
        .args(["--", "--patch", "64x64x32"])
        .output()
        .unwrap();
    assert_eq!(
        ran.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    let det = tessera_core::report::DetectionReport::read_json(&out.join("a/det.json")).unwrap();

    let mut h = harness(Source::Demo);
    h.state_mut().batch.load(out.clone()).unwrap();
    // A new window sizes itself over its first frames.
    for _ in 0..3 {
        h.step();
    }
    h.get_by_label_contains("2 studies: 1 done, 1 failed");
    let buttons = h.get_all_by_label("Open").collect::<Vec<_>>();
    assert_eq!(buttons.len(), 2, "one Open per row");
    assert!(
        buttons[1].accesskit_node().is_disabled(),
        "the failed study"
    );
    buttons[0].click();
    step_until(&mut h, "the batch study and its run", |app| {
        app.study.as_ref().is_some_and(|s| s.source == study) && !app.run_panel.runs.is_empty()
    });
    let app = h.state();
    let record = app.run_panel.runs.last().unwrap();
    assert_eq!(record.label, "batch 64x64x32 halo");
    assert_eq!(record.report.detections, det.detections);
    assert!(!app.batch.open, "the window closes on opening a row");
    let shown = format!("{}: {} detection(s)", record.label, det.detections.len());
    // The detections panel's heading, and the message saying where the run came from.
    assert_eq!(h.get_all_by_label_contains(&shown).count(), 2);
    h.get_by_label_contains("detection(s) from ");
}
