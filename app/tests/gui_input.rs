//! Input a reader can trust: a key typed into a text field never reaches a shortcut, every
//! key press and wheel notch counts once, and a drag measures from where the button went down.
//! Events are queued the way a fast typist or a free-spinning wheel delivers them: several in
//! one frame.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use egui::accesskit::Role;
use egui::{Event, Key, Modifiers, MouseWheelUnit, Pos2, pos2};
use egui_kittest::Harness;
use egui_kittest::kittest::{NodeT as _, Queryable as _};
use support::{drag, harness, key, phantom_study, reading_harness, step_until};
use tessera::gui::study::ViewTransform;
use tessera::gui::{Source, TesseraApp};
use tessera_core::lungrads::Category;
use tessera_core::review::Decision;
use tessera_dicom::view::{Slab, SlabMode, WindowLevel};
use tessera_tests::runtime_available;

/// A point inside the axial view (the top-left cell of the central panel).
const AXIAL: Pos2 = pos2(180.0, 180.0);

/// What a stray key could change: every decision and Lung-RADS category, the window, the
/// slab, the views, the crosshair (where and whether), the corner text and the selected
/// finding.
#[derive(Debug, Clone, PartialEq)]
struct Reader {
    decisions: Vec<Option<Decision>>,
    categories: Vec<Option<Category>>,
    window: WindowLevel,
    /// Whether each view's slab is on, and its projection (its thickness is a field of its own).
    slabs: [Option<SlabMode>; 3],
    shown: (bool, bool),
    views: [ViewTransform; 3],
    cursor: [usize; 3],
    maximised: bool,
    selected: Option<usize>,
}

fn reader(app: &TesseraApp) -> Reader {
    let study = app.study.as_ref().unwrap();
    let count = app.run_panel.runs.last().unwrap().report.detections.len();
    Reader {
        decisions: (0..count).map(|i| app.review.reading.decision(i)).collect(),
        categories: (0..count)
            .map(|i| {
                let review = app.review.reading.review.as_ref()?;
                review.of(i)?.lung_rads
            })
            .collect(),
        window: study.window,
        slabs: study.slabs.map(|s| s.map(|s| s.mode)),
        shown: (study.show_crosshair, study.show_text),
        views: study.views,
        cursor: study.cursor,
        maximised: study.maximised.is_some(),
        selected: app.review.selected_detection(),
    }
}

/// Ctrl+A, then text with every shortcut letter and digit, then Enter, all in one frame: what
/// xdotool's `type` delivers between two frames of a software-rendered window.
fn type_burst(h: &Harness<'_, TesseraApp>) {
    h.event(Event::ModifiersChanged(Modifiers::COMMAND));
    key(h, Key::A, Modifiers::COMMAND);
    h.event(Event::ModifiersChanged(Modifiers::NONE));
    for c in "0.10 arujkchsm123450".chars() {
        let name = match c {
            '.' => "Period".to_string(),
            ' ' => "Space".to_string(),
            c => c.to_ascii_uppercase().to_string(),
        };
        key(h, Key::from_name(&name).unwrap(), Modifiers::NONE);
        h.event(Event::Text(c.to_string()));
    }
    key(h, Key::Enter, Modifiers::NONE);
}

fn button(h: &Harness<'_, TesseraApp>, pos: Pos2, pressed: bool) {
    h.event(Event::PointerButton {
        pos,
        button: egui::PointerButton::Primary,
        pressed,
        modifiers: Modifiers::NONE,
    });
}

/// The text fields and number fields on screen, by role (their labels are beside them).
fn fields(h: &Harness<'_, TesseraApp>) -> Vec<(Role, usize)> {
    let mut out = Vec::new();
    for role in [Role::TextInput, Role::SpinButton] {
        let enabled = h
            .query_all_by_role(role)
            .enumerate()
            .filter(|(_, n)| !n.accesskit_node().is_disabled())
            .map(|(i, _)| (role, i));
        out.extend(enabled);
    }
    out
}

/// Whether a widget has the keyboard (egui's own record: a number field being typed into is
/// not marked focused in the accessibility tree).
fn a_field_is_focused(h: &Harness<'_, TesseraApp>) -> bool {
    h.ctx.memory(|m| m.focused().is_some())
}

#[test]
fn typing_into_any_text_field_changes_no_decision_window_or_view() {
    if !runtime_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut h = reading_harness(dir.path());
    // A rejected finding selected (its note field shown), a window and views of the reader's
    // own, the PACS window and the memory budget open: every field the viewer has.
    key(&h, Key::J, Modifiers::NONE);
    key(&h, Key::R, Modifiers::NONE);
    h.step();
    {
        let app = h.state_mut();
        let study = app.study.as_mut().unwrap();
        study.window = WindowLevel {
            center_hu: -321.0,
            width_hu: 987.0,
        };
        study.views[0].zoom = 1.5;
        // A slab on (its thickness field shown), at the last step: S would turn it off.
        study.slabs = [Some(Slab {
            thickness_mm: 20.0,
            mode: SlabMode::Mip,
        }); 3];
        app.pacs.open = true;
        app.run_panel.budget_gib = Some(16.0);
    }
    h.step();
    h.step();
    let before = reader(h.state());
    assert_eq!(before.decisions[0], Some(Decision::Rejected));
    let fields = fields(&h);
    let text_fields = fields.iter().filter(|(r, _)| *r == Role::TextInput).count();
    // Reader name, note, DICOMweb URL, patient; patch x/y/z, budget, threshold, slab.
    assert!(text_fields >= 4, "{text_fields} text fields");
    assert!(fields.len() >= 10, "{} fields", fields.len());
    for (role, i) in fields {
        let node = h.query_all_by_role(role).nth(i).unwrap();
        let label = format!("{role:?} {i} ({:?})", node.accesskit_node().value());
        // A fast typist on a slow frame: the button goes down in one frame, and its release
        // and every key arrive together in the next, before the field shows its text cursor
        // (how xdotool's `click 1 key ctrl+a type 0.10` reached the viewer under Xvfb).
        let at = node.rect().center();
        h.event(Event::PointerMoved(at));
        button(&h, at, true);
        h.step();
        button(&h, at, false);
        type_burst(&h);
        for _ in 0..3 {
            h.step();
        }
        assert_eq!(
            reader(h.state()),
            before,
            "typing with the click into {label}"
        );
        if a_field_is_focused(&h) {
            key(&h, Key::Enter, Modifiers::NONE);
            h.step();
            h.step();
        }
        // Then as one types after the cursor shows.
        let node = h.query_all_by_role(role).nth(i).unwrap();
        node.click();
        h.step();
        h.step();
        assert!(
            a_field_is_focused(&h),
            "{label}: a click gives the field the keyboard"
        );
        type_burst(&h);
        for _ in 0..3 {
            h.step();
        }
        assert_eq!(reader(h.state()), before, "after typing into {label}");
        assert!(
            !a_field_is_focused(&h),
            "{label}: Enter gives the keyboard back"
        );
    }
    // The same keys with no field focused are the reader's: the decision changes.
    key(&h, Key::A, Modifiers::NONE);
    h.step();
    assert_eq!(
        h.state().review.reading.decision(before.selected.unwrap()),
        Some(Decision::Accepted)
    );
    // Ctrl+A is never A.
    key(&h, Key::R, Modifiers::NONE);
    h.step();
    key(&h, Key::A, Modifiers::COMMAND);
    h.step();
    assert_eq!(
        h.state().review.reading.decision(before.selected.unwrap()),
        Some(Decision::Rejected)
    );
}

fn slice(h: &Harness<'_, TesseraApp>) -> usize {
    h.state().study.as_ref().unwrap().cursor[2]
}

fn wheel(h: &Harness<'_, TesseraApp>, unit: MouseWheelUnit, y: f32) {
    h.event(Event::MouseWheel {
        unit,
        delta: egui::vec2(0.0, y),
        phase: egui::TouchPhase::Move,
        source: egui::MouseWheelSource::Wheel,
        modifiers: Modifiers::NONE,
    });
}

/// Steps until nothing moves any more, and returns the slice then.
fn settled(h: &mut Harness<'_, TesseraApp>) -> usize {
    for _ in 0..30 {
        h.step();
    }
    slice(h)
}

#[test]
fn every_key_press_and_wheel_notch_moves_exactly_one_slice() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = harness(Source::Path(phantom_study(dir.path(), [64, 64, 96])));
    step_until(&mut h, "the phantom", |app| app.study.is_some());
    h.hover_at(AXIAL);
    h.step();
    let start = slice(&h);
    assert_eq!(start, 48);

    // Five presses of Down in one frame, then three of Up in three frames.
    for _ in 0..5 {
        key(&h, Key::ArrowDown, Modifiers::NONE);
    }
    assert_eq!(settled(&mut h), start - 5);
    for _ in 0..3 {
        key(&h, Key::ArrowUp, Modifiers::NONE);
        h.step();
    }
    assert_eq!(settled(&mut h), start - 2);
    // Page Down: ten slices.
    key(&h, Key::PageDown, Modifiers::NONE);
    assert_eq!(settled(&mut h), start - 12);

    // One notch, one slice, however many frames follow.
    wheel(&h, MouseWheelUnit::Line, 1.0);
    assert_eq!(settled(&mut h), start - 11);
    // Ten quick notches in one frame: ten slices.
    for _ in 0..10 {
        wheel(&h, MouseWheelUnit::Line, 1.0);
    }
    assert_eq!(settled(&mut h), start - 1);
    // Ten notches the other way, one a frame.
    for _ in 0..10 {
        wheel(&h, MouseWheelUnit::Line, -1.0);
        h.step();
    }
    assert_eq!(settled(&mut h), start - 11);
    // A touchpad's pixels add up to whole lines: three lines' worth in seven pieces.
    let line = h.state().ctx.options(|o| o.input_options.line_scroll_speed);
    for _ in 0..7 {
        wheel(&h, MouseWheelUnit::Point, 3.0 * line / 7.0);
        h.step();
    }
    assert_eq!(settled(&mut h), start - 8);
    // Over no view, the wheel moves nothing.
    h.hover_at(pos2(1390.0, 890.0));
    h.step();
    wheel(&h, MouseWheelUnit::Line, 1.0);
    assert_eq!(settled(&mut h), start - 8);
}

#[test]
fn a_drag_measures_from_where_the_button_went_down() {
    use tessera::gui::tools::{Tool, length_mm};

    let dir = tempfile::tempdir().unwrap();
    let mut h = harness(Source::Path(phantom_study(dir.path(), [96, 96, 48])));
    step_until(&mut h, "the phantom", |app| app.study.is_some());

    // Window/level: every pixel of the drag counts, the first few included.
    let window = h.state().study.as_ref().unwrap().window;
    drag(&mut h, AXIAL, AXIAL + egui::vec2(30.0, 20.0));
    let dragged = h.state().study.as_ref().unwrap().window;
    assert_eq!(dragged.width_hu, (window.width_hu + 4.0 * 30.0).max(1.0));
    assert_eq!(dragged.center_hu, window.center_hu - 2.0 * 20.0);

    // A ruler twice as long measures twice the length: both start at the press.
    h.get_by_label("ruler").click();
    h.step();
    assert_eq!(h.state().study.as_ref().unwrap().tools.tool, Tool::Ruler);
    let step = egui::vec2(24.0, 18.0);
    let mut lengths = Vec::new();
    for to in [AXIAL + step, AXIAL + 2.0 * step] {
        drag(&mut h, AXIAL, to);
        let study = h.state().study.as_ref().unwrap();
        let ruler = *study.tools.rulers.last().expect("the drag left a ruler");
        lengths.push(length_mm(&ruler, &study.volume.geometry));
    }
    assert!(lengths[0] > 1.0, "{lengths:?}");
    // Both rulers stay.
    assert_eq!(h.state().study.as_ref().unwrap().tools.rulers.len(), 2);
    // Pointer positions are exact in f32; the mapping to millimetres goes through f32 once.
    assert!(
        (lengths[1] / lengths[0] - 2.0).abs() < 1e-5,
        "{lengths:?} mm: the second is not twice the first"
    );
}
