//! The reading room in the viewer (egui_kittest): the model's display window, thick slabs
//! and their keys, hiding the crosshair and the corner text, each finding's measured size,
//! type and Lung-RADS category, which the reader can change; snapshots of a slab.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use egui::{Key, Modifiers};
use egui_kittest::Harness;
use egui_kittest::kittest::{NodeT as _, Queryable as _};
use support::{harness, reading_harness, step_until, use_model};
use tessera::gui::{Source, TesseraApp};
use tessera_core::lungrads::{Category, Suggestion};
use tessera_core::phantom::{self, PhantomSpec};
use tessera_core::review::Decision;
use tessera_core::sr::Selection;
use tessera_dicom::view::{Slab, SlabMode, WindowLevel};
use tessera_tests::runtime_available;

fn press(h: &mut Harness<'_, TesseraApp>, key: Key) {
    support::key(h, key, Modifiers::NONE);
    h.step();
    h.step();
}

/// Draws a finding with "add finding" on the axial view.
fn draw_finding(h: &mut Harness<'_, TesseraApp>) {
    h.get_by_label("add finding").click();
    h.step();
    support::drag(h, egui::pos2(180.0, 180.0), egui::pos2(240.0, 220.0));
}

/// The findings of the SR the viewer exports (all of them, with their decisions), read back.
fn sr_findings(
    h: &Harness<'_, TesseraApp>,
    dir: &std::path::Path,
) -> Vec<tessera_core::sr::SrFinding> {
    let path = dir.join("sr.dcm");
    h.state().export_sr(Selection::All, &path).unwrap();
    let read = tessera_dicom::dicom::sr::read_sr(&path).unwrap();
    tessera_core::sr::findings(&read, &path).unwrap()
}

const SOFT_TISSUE: WindowLevel = WindowLevel {
    center_hu: 40.0,
    width_hu: 400.0,
};

#[test]
fn a_study_opens_in_the_models_reading_window_and_the_files_own_is_one_key_away() {
    let dir = tempfile::tempdir().unwrap();
    // A series whose files suggest a soft-tissue window.
    let mut p = phantom::generate(&PhantomSpec {
        seed: 9,
        size: [96, 96, 32],
        spacing_mm: [2.5, 2.5, 5.0],
        nodules: 2,
        noise_hu: 18.0,
        masses: 0,
    })
    .unwrap();
    p.volume.info.window_hu = Some((40.0, 400.0));
    let study = dir.path().join("study");
    phantom::write_series(&p, &study).unwrap();
    let mut h = harness(Source::Path(study));
    step_until(&mut h, "the study", |app| app.study.is_some());
    h.step();
    let window = |h: &Harness<'_, TesseraApp>| h.state().study.as_ref().unwrap().window;
    // The shipped detector reads its findings in a lung window.
    assert_eq!(window(&h), WindowLevel::LUNG);
    press(&mut h, Key::Num5);
    assert_eq!(window(&h), SOFT_TISSUE, "5: the file's own");
    press(&mut h, Key::Num0);
    assert_eq!(window(&h), WindowLevel::LUNG, "0: back to the model's");
    // A model without a reading window leaves the reader's window; reset gives the file's.
    press(&mut h, Key::Num3);
    use_model(&mut h, "tessera-test-tiny");
    h.step();
    assert_eq!(window(&h), WindowLevel::BONE);
    press(&mut h, Key::Num0);
    assert_eq!(window(&h), SOFT_TISSUE);
}

#[test]
fn slab_keys_step_thickness_and_projection_and_c_h_hide_the_overlays() {
    let mut h = harness(Source::Demo);
    step_until(&mut h, "the demo study", |app| app.study.is_some());
    // With the pointer on no view, S and M act on all three.
    let slabs = |h: &Harness<'_, TesseraApp>| h.state().study.as_ref().unwrap().slabs;
    assert_eq!(slabs(&h), [None; 3]);
    press(&mut h, Key::S);
    let mip_5 = Slab {
        thickness_mm: 5.0,
        mode: SlabMode::Mip,
    };
    assert_eq!(slabs(&h), [Some(mip_5); 3]);
    press(&mut h, Key::S);
    press(&mut h, Key::M);
    let min_ip_10 = Slab {
        thickness_mm: 10.0,
        mode: SlabMode::MinIp,
    };
    assert_eq!(slabs(&h), [Some(min_ip_10); 3]);
    press(&mut h, Key::S);
    press(&mut h, Key::S);
    assert_eq!(slabs(&h), [None; 3], "after 20 mm: slices again");
    let shown = |h: &Harness<'_, TesseraApp>| {
        let s = h.state().study.as_ref().unwrap();
        (s.show_crosshair, s.show_text)
    };
    assert_eq!(shown(&h), (true, true));
    press(&mut h, Key::C);
    press(&mut h, Key::H);
    assert_eq!(shown(&h), (false, false));
    assert!(
        h.query_by_label_contains("slice 80 / 160").is_none(),
        "the corner text is hidden"
    );
}

#[test]
fn the_slab_keys_act_on_the_view_under_the_pointer_and_the_card_sets_each_view() {
    let mut h = harness(Source::Demo);
    step_until(&mut h, "the demo study", |app| app.study.is_some());
    h.step();
    let slabs = |h: &Harness<'_, TesseraApp>| h.state().study.as_ref().unwrap().slabs;
    let coronal = h.state().study.as_ref().unwrap().view_images[1].unwrap();
    h.event(egui::Event::PointerMoved(coronal.center()));
    h.step();
    press(&mut h, Key::S);
    press(&mut h, Key::M);
    let min_ip_5 = Slab {
        thickness_mm: 5.0,
        mode: SlabMode::MinIp,
    };
    assert_eq!(slabs(&h), [None, Some(min_ip_5), None]);
    // The study card: the sagittal row's 20 sets that view alone.
    h.query_all_by_label("20").nth(2).unwrap().click();
    h.step();
    let mip_20 = Slab {
        thickness_mm: 20.0,
        mode: SlabMode::Mip,
    };
    assert_eq!(slabs(&h), [None, Some(min_ip_5), Some(mip_20)]);
}

#[test]
fn each_finding_shows_its_measured_size_and_the_reader_sets_its_category() {
    if !runtime_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut h = reading_harness(dir.path());
    // The test model is not a chest model: give its first finding the suggestion a chest
    // model's run carries.
    {
        let record = h.state_mut().run_panel.runs.last_mut().unwrap();
        record.report.detections[0].lung_rads = Some(Suggestion {
            category: Category::Three,
            rule: "solid nodule >= 6 to < 8 mm at baseline: 7.0 mm".into(),
        });
    }
    let record = h.state().run_panel.runs.last().unwrap();
    let first = &record.report.detections[0];
    assert!(first.measurements.is_some(), "every detection is measured");
    h.step();
    h.get_by_label("3?");
    h.get_by_label_contains("Study Lung-RADS 3 (suggestion)");
    press(&mut h, Key::J);
    assert_eq!(h.state().review.selected_detection(), Some(0));
    // The category's chooser shows the suggestion until the reader picks one.
    let chooser = h.get_by_label("Lung-RADS category");
    assert_eq!(
        chooser.accesskit_node().value().as_deref(),
        Some("3 (suggested)")
    );
    chooser.click();
    h.run();
    h.get_by_label("4B").click();
    h.step();
    h.step();
    let review = h.state().review.reading.review.as_ref().unwrap();
    assert_eq!(review.of(0).unwrap().lung_rads, Some(Category::FourB));
    h.get_by_label_contains("Study Lung-RADS 4B");
    // Rejected, it no longer sets the study's category.
    press(&mut h, Key::R);
    h.get_by_label_contains("no lung nodule among the findings kept");
}

#[test]
fn a_ten_millimetre_mip_over_the_views_matches_the_snapshot() {
    if !runtime_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut h = support::snapshot_harness(dir.path());
    h.get_by_label("1").click();
    h.step();
    h.state_mut().study.as_mut().unwrap().slabs = [Some(Slab {
        thickness_mm: 10.0,
        mode: SlabMode::Mip,
    }); 3];
    support::snapshot_without_timings(&mut h, "slab_mip_10mm");
}

#[test]
fn where_no_file_dialog_can_open_a_typed_path_does_the_job() {
    if !runtime_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut h = reading_harness(dir.path());
    // As on a desktop without an xdg-desktop-portal service.
    h.state_mut().file_dialogs = false;
    h.get_by_label("File").click();
    h.run();
    h.get_by_label("Export detections JSON…").click();
    h.step();
    h.step();
    let path = dir.path().join("typed.json");
    let prompt = h
        .state_mut()
        .path_prompt
        .as_mut()
        .expect("a path field instead");
    prompt.text = path.display().to_string();
    h.step();
    h.get_by_label("OK").click();
    h.step();
    h.step();
    assert!(path.is_file(), "messages: {:?}", h.state().messages);
    assert!(h.state().path_prompt.is_none());
}

#[test]
fn the_gallery_shows_every_finding_and_a_click_goes_there() {
    if !runtime_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut h = support::snapshot_harness(dir.path());
    h.get_by_label("Gallery").click();
    h.run();
    let record = h.state().run_panel.runs.last().unwrap();
    let rows = h.state().review.rows(record);
    assert!(rows.len() >= 2, "the test needs two findings");
    for i in &rows {
        h.get_by_label(&format!("finding {} thumbnail", i + 1));
    }
    h.get_by_label(&format!("finding {} thumbnail", rows[1] + 1))
        .click();
    h.run();
    assert_eq!(h.state().review.selected_detection(), Some(rows[1]));
    // The views went there.
    let study = h.state().study.as_ref().unwrap();
    let b = &h.state().run_panel.runs[0].report.detections[rows[1]].box_voxel;
    assert!((b.min[2]..b.max[2]).contains(&study.cursor[2]));
    support::snapshot_without_timings(&mut h, "gallery");
}

#[test]
fn the_reader_drags_an_axis_end_and_the_review_keeps_the_new_axes() {
    if !runtime_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut h = reading_harness(dir.path());
    press(&mut h, Key::J);
    h.run();
    let study = h.state().study.as_ref().unwrap();
    let (finding, axes) = study
        .axes_edit
        .offered
        .expect("the selected finding's axes");
    assert_eq!(
        (finding, study.cursor[2]),
        (0, axes.slice),
        "on its measured slice"
    );
    let window = study.window;
    // The long axis' second end on screen, dragged 40 pixels to the right.
    let image = study.view_images[0].unwrap();
    let [nx, ny, _] = study.volume.geometry.size;
    let end = axes.long_axis_ends[1];
    let at = image.min
        + egui::vec2(
            (end[0] as f32 + 0.5) / nx as f32 * image.width(),
            (end[1] as f32 + 0.5) / ny as f32 * image.height(),
        );
    support::drag(&mut h, at, at + egui::vec2(40.0, 0.0));
    let review = h.state().review.reading.review.as_ref().unwrap();
    let drawn = review
        .of(0)
        .and_then(|f| f.axes)
        .expect("the reader's axes kept");
    assert_ne!(drawn.long_axis_ends[1], end);
    assert_eq!(drawn.long_axis_ends[0], axes.long_axis_ends[0]);
    assert!(
        drawn.long_axis_mm > axes.long_axis_mm,
        "{drawn:?} from {axes:?}"
    );
    // The drag moved the axis, not the window.
    assert_eq!(h.state().study.as_ref().unwrap().window, window);
    h.get_by_label(&format!("{:.1} (r)", drawn.mean_diameter_mm()));
}

#[test]
fn a_drawn_finding_is_a_row_the_reader_reaches_with_j_and_decides() {
    if !runtime_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut h = reading_harness(dir.path());
    let record = h.state().run_panel.runs.last().unwrap();
    let detections = h.state().review.rows(record).len();
    draw_finding(&mut h);
    let added = |h: &Harness<'_, TesseraApp>| {
        h.state()
            .review
            .reading
            .review
            .as_ref()
            .unwrap()
            .added
            .clone()
    };
    assert_eq!(added(&h).len(), 1, "{:?}", h.state().messages);
    let m = added(&h)[0]
        .measurements
        .clone()
        .expect("a drawn finding is measured");
    // Its one size in the table (the SR's too), `~` when it is the box's.
    let mark = if m.method == tessera_core::measure::Method::Box {
        "~"
    } else {
        ""
    };
    h.get_by_label(&format!("{mark}{:.1}", m.mean_diameter_mm));
    assert_eq!(
        added(&h)[0].decision,
        Some(Decision::Accepted),
        "drawing it accepts it"
    );
    h.get_by_label("R1");
    // J past the detector's findings reaches the reader's.
    for _ in 0..=detections {
        press(&mut h, Key::J);
    }
    assert_eq!(
        (
            h.state().review.selected_detection(),
            h.state().review.selected_added()
        ),
        (None, Some(0))
    );
    h.get_by_label_contains("Reader finding 1:");
    // The reader sets its category (the test model's findings are not lung nodules: Tessera
    // suggests none).
    let chooser = h.get_by_label("Lung-RADS category");
    assert_eq!(chooser.accesskit_node().value().as_deref(), Some("none"));
    chooser.click();
    h.run();
    h.get_by_label("4A").click();
    h.run();
    assert_eq!(added(&h)[0].lung_rads, Some(Category::FourA));
    press(&mut h, Key::R);
    assert_eq!(added(&h)[0].decision, Some(Decision::Rejected));
    // K goes back to the last detection.
    press(&mut h, Key::K);
    assert_eq!(
        h.state().review.selected_detection(),
        Some(
            h.state()
                .review
                .rows(h.state().run_panel.runs.last().unwrap())[detections - 1]
        )
    );
    // The SR says what the reader decided.
    let findings = sr_findings(&h, dir.path());
    let drawn = findings.last().unwrap();
    assert_eq!(drawn.tracking_id, "Reader finding 1");
    assert_eq!(drawn.decision, Some(Decision::Rejected));
    assert_eq!(drawn.lung_rads, Some((Category::FourA, false)));
}

#[test]
fn in_a_run_of_lung_nodules_a_drawn_finding_gets_a_suggestion_and_a_thumbnail() {
    if !runtime_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut h = reading_harness(dir.path());
    // The test model is no lung nodule detector: its run says what a chest model's says.
    h.state_mut()
        .run_panel
        .runs
        .last_mut()
        .unwrap()
        .report
        .model
        .lung_rads = true;
    draw_finding(&mut h);
    let drawn = h.state().review.reading.review.as_ref().unwrap().added[0].clone();
    let suggested = drawn
        .lung_rads_suggestion()
        .expect("a measured finding has a suggestion");
    let category = suggested.category.label();
    h.get_by_label(&format!("{category}?"));
    h.get_by_label_contains(&format!("Study Lung-RADS {category} (suggestion)"));
    h.get_by_label("Gallery").click();
    h.run();
    // The study card names the views too: hovering adds the crop's caption.
    let coronal = |h: &Harness<'_, TesseraApp>| h.query_all_by_label("Coronal").count();
    let before = coronal(&h);
    h.get_by_label("reader finding R1 thumbnail").hover();
    h.run();
    assert_eq!(
        coronal(&h),
        before + 1,
        "hovering a thumbnail shows its coronal crop"
    );
    h.get_by_label("reader finding R1 thumbnail").click();
    h.run();
    assert_eq!(h.state().review.selected_added(), Some(0));
    let chooser = h.get_by_label("Lung-RADS category");
    assert_eq!(
        chooser.accesskit_node().value(),
        Some(format!("{category} (suggested)"))
    );
    // The SR carries it as a suggestion, with its rule.
    let findings = sr_findings(&h, dir.path());
    let last = findings.last().unwrap();
    assert_eq!(last.tracking_id, "Reader finding 1");
    assert_eq!(last.lung_rads, Some((suggested.category, true)));
}
