//! A finding's measurements in the viewer: its size and type in the table, its axial axes
//! drawn on the axial view, and its Lung-RADS category (the suggestion, or the reader's).

use egui::{Color32, Pos2, Stroke, Ui};
use tessera_core::lungrads::{self, Category};
use tessera_core::measure::{AxialAxes, Measurements, Method, measure};
use tessera_core::pipeline::Detection;
use tessera_core::report::DetectionReport;
use tessera_core::review::{AddedFinding, Review};

use super::study::Study;

/// A drawn finding measured on the study's voxels (no lung field: the reader drew it).
pub fn of_added(finding: &AddedFinding, study: &Study) -> Option<Measurements> {
    let geometry = &study.volume.geometry;
    let b = super::tools::study_box(finding.center_lps_mm, finding.size_mm, geometry)?;
    Some(measure(&study.volume.voxels, geometry, &b, None))
}

/// The axes the reader drew for finding `index`, if any.
pub fn reader_axes(review: Option<&Review>, index: usize) -> Option<&AxialAxes> {
    review?.axes_of(index)
}

/// The table's size cell: the mean diameter, `~` when it is the box's (not segmented), `(r)`
/// when the reader drew the axes.
pub fn size_text(d: &Detection, review: Option<&Review>, index: usize) -> String {
    let axes = reader_axes(review, index);
    let size = d.reader_mean_diameter_mm(axes);
    let measured = d
        .measurements
        .as_ref()
        .is_some_and(|m| m.method != Method::Box);
    match (axes, measured) {
        (Some(_), _) => format!("{size:.1} (r)"),
        (None, true) => format!("{size:.1}"),
        (None, false) => format!("~{size:.1}"),
    }
}

/// What the size cell says on hover.
pub fn size_hover(d: &Detection) -> String {
    let Some(m) = &d.measurements else {
        return "the mean of the box's axial sides (this run was not measured)".into();
    };
    let mut lines = vec![format!(
        "mean diameter {:.1} mm: long axis {:.1} mm, short axis {:.1} mm (axial slice {})",
        m.mean_diameter_mm,
        m.axes.long_axis_mm,
        m.axes.short_axis_mm,
        m.axes.slice + 1
    )];
    if let (Some(v), Some(hu)) = (m.volume_mm3, m.mean_hu) {
        lines.push(format!("volume {v:.0} mm³, mean {hu:.0} HU"));
    }
    if let Some(solid) = m.solid_mean_diameter_mm {
        lines.push(format!("solid component {solid:.1} mm"));
    }
    lines.push(m.how.clone());
    lines.join("\n")
}

/// A reader's finding's size cell and its hover text.
pub fn added_size(a: &AddedFinding) -> (String, String) {
    let size = a.mean_diameter_mm();
    match &a.measurements {
        Some(m) if m.method != Method::Box => (
            format!("{size:.1}"),
            format!(
                "long axis {:.1} mm, short axis {:.1} mm\n{}",
                m.axes.long_axis_mm, m.axes.short_axis_mm, m.how
            ),
        ),
        Some(m) => (format!("~{size:.1}"), m.how.clone()),
        None => (
            format!("~{size:.1}"),
            "the mean of the drawn box's axial sides".into(),
        ),
    }
}

/// A reader's finding's Lung-RADS cell: the reader's category, else (in a run of lung
/// nodules) the one its measurements suggest, marked `?`.
pub fn added_lung_rads(a: &AddedFinding, report: &DetectionReport) -> Option<String> {
    a.lung_rads_in(report)
        .map(|(c, rule)| lung_rads_text(c, rule.is_some()))
}

/// The finding's category: the reader's, else the suggestion; with whether it is suggested
/// and the rule that gave it.
pub fn lung_rads(
    d: &Detection,
    review: Option<&Review>,
    index: usize,
) -> Option<(Category, bool, String)> {
    let reader = review.and_then(|r| r.of(index)).and_then(|f| f.lung_rads);
    match (reader, d.lung_rads_with(reader_axes(review, index))) {
        (Some(c), _) => Some((c, false, "set by the reader".into())),
        (None, Some(s)) => Some((s.category, true, s.rule)),
        (None, None) => None,
    }
}

/// The table's Lung-RADS cell: `4A?` for a suggestion, `4A` once the reader set it.
pub fn lung_rads_text(category: Category, suggested: bool) -> String {
    let mark = if suggested { "?" } else { "" };
    format!("{}{mark}", category.label())
}

/// The study's category from its findings at the threshold and the reader's own (rejected
/// ones left out), in a run of lung nodules.
pub fn study_lung_rads(
    report: &DetectionReport,
    rows: &[usize],
    review: Option<&Review>,
) -> Option<lungrads::Suggestion> {
    if !report.suggests_lung_rads() {
        return None;
    }
    let rejected = Some(tessera_core::review::Decision::Rejected);
    let detected = rows.iter().filter_map(|&i| {
        let category = lung_rads(report.detections.get(i)?, review, i).map(|(c, _, _)| c);
        let decision = review.and_then(|r| r.of(i)).and_then(|f| f.decision);
        Some(((i + 1).to_string(), category, decision == rejected))
    });
    let added = review.into_iter().flat_map(|r| {
        r.added.iter().enumerate().map(|(k, a)| {
            let category = a.lung_rads_in(report).map(|(c, _)| c);
            (
                format!("R{}", k + 1),
                category,
                Some(a.decision()) == rejected,
            )
        })
    });
    Some(lungrads::study_of_findings(detected.chain(added)))
}

/// The selected finding's category chooser; returns the reader's choice when it changed
/// (`Some(None)`: back to the suggestion).
pub fn lung_rads_ui(
    ui: &mut Ui,
    d: &Detection,
    review: Option<&Review>,
    index: usize,
) -> Option<Option<Category>> {
    let current = lung_rads(d, review, index)?;
    // What "back to the suggestion" gives: the suggestion with the reader's axes, as shown.
    let suggested = d
        .lung_rads_with(reader_axes(review, index))
        .map(|s| s.category);
    category_ui(ui, ("lung-rads", index), Some(&current), suggested)
}

/// A reader's finding's category chooser: the reader's, else (in a run of lung nodules) the
/// suggestion from its measurements.
pub fn added_lung_rads_ui(
    ui: &mut Ui,
    a: &AddedFinding,
    k: usize,
    report: &DetectionReport,
) -> Option<Option<Category>> {
    let current = a.lung_rads_in(report).map(|(c, rule)| match rule {
        Some(rule) => (c, true, rule),
        None => (c, false, "set by the reader".to_string()),
    });
    let suggested = a.suggestion_in(report).map(|s| s.category);
    category_ui(ui, ("lung-rads-added", k), current.as_ref(), suggested)
}

/// The chooser: the current category (suggested or the reader's, or none), the suggestion
/// to go back to, and every category.
fn category_ui(
    ui: &mut Ui,
    id: (&str, usize),
    current: Option<&(Category, bool, String)>,
    suggested: Option<Category>,
) -> Option<Option<Category>> {
    let mut choice = None;
    ui.horizontal(|ui| {
        let text = match current {
            Some((c, true, _)) => format!("{} (suggested)", c.label()),
            Some((c, false, _)) => c.label().to_string(),
            None => "none".to_string(),
        };
        let reader = current.filter(|c| !c.1).map(|c| c.0);
        egui::ComboBox::new(id, "Lung-RADS category")
            .selected_text(text)
            .show_ui(ui, |ui| {
                let back = match suggested {
                    Some(s) => format!("{} (suggested)", s.label()),
                    None => "none".to_string(),
                };
                if ui.selectable_label(reader.is_none(), back).clicked() {
                    choice = Some(None);
                }
                for c in Category::ALL {
                    if ui.selectable_label(reader == Some(c), c.label()).clicked() {
                        choice = Some(Some(c));
                    }
                }
            });
        if let Some((_, _, rule)) = current {
            ui.weak(rule).on_hover_text(lungrads::VERSION);
        }
    });
    choice
}

/// The axes of a finding measured on axial slice `index` (the reader's, when drawn), in
/// `color`; `screen` maps continuous study voxel coordinates `(x, y)` (voxel `j` spans
/// `[j, j + 1)`) to the screen.
pub fn draw_axes(
    painter: &egui::Painter,
    axes: &AxialAxes,
    index: usize,
    color: Color32,
    screen: &dyn Fn(f64, f64) -> Pos2,
) {
    if axes.slice != index {
        return;
    }
    let at = |p: [f64; 2]| screen(p[0] + 0.5, p[1] + 0.5);
    let [a, b] = axes.long_axis_ends.map(at);
    painter.line_segment([a, b], Stroke::new(1.5, color));
    let [c, d] = axes.short_axis_ends.map(at);
    painter.line_segment([c, d], Stroke::new(1.0, color));
}
