//! A run's findings and a reader's review as a TID 1500 content tree.

use super::codes as c;
use super::{Selection, SrError};
use crate::lungrads::{self, Category};
use crate::measure::{AxialAxes, Measurements};
use crate::report::DetectionReport;
use crate::review::{Decision, Review};
use tessera_dicom::dicom::sr::{GraphicType3d, Item, Relationship, Value};
use tessera_dicom::geometry::{Vec3, cross, norm};
use tessera_dicom::volume::SeriesSource;

/// One finding as the report states it.
struct Finding<'a> {
    tracking_id: String,
    center_lps_mm: Vec3,
    size_mm: Vec3,
    /// Its size: the mean of its axial axes (or of its box's axial sides).
    mean_diameter_mm: f64,
    measurements: Option<&'a Measurements>,
    /// The reader's own axes, over the measured ones.
    reader_axes: Option<&'a AxialAxes>,
    /// The reader's category, or the suggestion and its rule.
    lung_rads: Option<(Category, Option<String>)>,
    /// The detector's score (absent for a finding the reader drew).
    score: Option<f32>,
    decision: Option<Decision>,
    note: &'a str,
}

/// The root container, and whether the review is complete (every finding decided).
pub(super) fn tree(
    report: &DetectionReport,
    review: Option<&Review>,
    selection: Selection,
) -> Result<(Item, bool), SrError> {
    let source = report.source.as_ref().ok_or(SrError::NoSource)?;
    if source.frame_of_reference_uid.is_empty() {
        return Err(SrError::NoFrameOfReference {
            series: source.series_uid.clone(),
        });
    }
    if selection == Selection::AcceptedOnly && review.is_none() {
        return Err(SrError::AcceptedOnlyWithoutReview);
    }
    let findings = findings(report, review, selection);
    let mut root = Item::container(c::imaging_measurement_report())
        .template("1500")
        .with(Item::new(
            Relationship::HasConceptMod,
            c::language(),
            Value::Code(c::english()),
        ));
    root.children.extend(device_observer(report));
    // A person observer needs a name (PS3.16 TID 1003); an unnamed reader is not invented.
    if let Some(review) = review.filter(|r| !r.reader.trim().is_empty()) {
        root.children.extend(person_observer(&review.reader));
    }
    let mut measurements = Item::container(c::imaging_measurements());
    for finding in &findings {
        measurements
            .children
            .push(measurement_group(finding, source, report));
    }
    let root = root
        .with(Item::new(
            Relationship::HasConceptMod,
            c::procedure_reported(),
            Value::Code(c::ct_chest()),
        ))
        .with(image_library(source))
        .with(measurements);
    let root = match study_lung_rads(&findings) {
        Some(item) => root.with(Item::container(c::qualitative_evaluations()).with(item)),
        None => root,
    };
    let complete = review.is_none_or(|r| r.is_complete(report.detections.len()));
    Ok((root, complete))
}

fn findings<'a>(
    report: &'a DetectionReport,
    review: Option<&'a Review>,
    selection: Selection,
) -> Vec<Finding<'a>> {
    let detected = report.detections.iter().enumerate().map(|(i, d)| {
        let reviewed = review.and_then(|r| r.of(i));
        let reader_axes = reviewed.and_then(|f| f.axes.as_ref());
        let suggested = d
            .lung_rads_with(reader_axes)
            .map(|s| (s.category, Some(s.rule)));
        Finding {
            tracking_id: format!("Tessera detection {}", i + 1),
            center_lps_mm: d.center_lps_mm,
            size_mm: d.size_mm,
            mean_diameter_mm: d.reader_mean_diameter_mm(reader_axes),
            measurements: d.measurements.as_ref(),
            reader_axes,
            lung_rads: reviewed
                .and_then(|f| f.lung_rads)
                .map(|c| (c, None))
                .or(suggested),
            score: Some(d.score),
            decision: reviewed.and_then(|f| f.decision),
            note: reviewed.map_or("", |f| f.note.as_str()),
        }
    });
    let added = review.into_iter().flat_map(|r| {
        r.added.iter().enumerate().map(|(i, a)| Finding {
            tracking_id: format!("Reader finding {}", i + 1),
            center_lps_mm: a.center_lps_mm,
            size_mm: a.size_mm,
            mean_diameter_mm: a.mean_diameter_mm(),
            measurements: a.measurements.as_ref(),
            reader_axes: None,
            lung_rads: a.lung_rads_in(report),
            score: None,
            // Drawing it accepted it, until the reader decided otherwise.
            decision: Some(a.decision()),
            note: a.note.as_str(),
        })
    });
    detected
        .chain(added)
        .filter(|f| selection == Selection::All || f.decision == Some(Decision::Accepted))
        .collect()
}

/// TID 1004: the algorithm that made the findings.
fn device_observer(report: &DetectionReport) -> Vec<Item> {
    let context = |concept, value| Item::new(Relationship::HasObsContext, concept, value);
    vec![
        context(c::observer_type(), Value::Code(c::device())),
        context(
            c::device_observer_uid(),
            Value::UidRef(super::uid_from_hash(&report.model.sha256)),
        ),
        context(c::device_observer_name(), Value::Text("Tessera".into())),
        context(
            c::device_observer_manufacturer(),
            Value::Text("Tessera".into()),
        ),
        context(
            c::device_observer_model_name(),
            Value::Text(report.model.name.clone()),
        ),
    ]
}

/// TID 1003: the reader whose decisions the report carries.
fn person_observer(reader: &str) -> Vec<Item> {
    vec![
        Item::new(
            Relationship::HasObsContext,
            c::observer_type(),
            Value::Code(c::person()),
        ),
        Item::new(
            Relationship::HasObsContext,
            c::person_observer_name(),
            Value::PName(reader.into()),
        ),
    ]
}

/// TID 1600: the images the findings are on, one group for the series.
fn image_library(source: &SeriesSource) -> Item {
    let mut group = Item::container(c::image_library_group());
    group.children = source
        .instances
        .iter()
        .map(|i| Item::unnamed(Relationship::Contains, Value::Image(i.clone())))
        .collect();
    Item::container(c::image_library()).with(group)
}

/// TID 1411: one finding's region (an ellipsoid in its box), size, score and decision.
fn measurement_group(
    finding: &Finding<'_>,
    source: &SeriesSource,
    report: &DetectionReport,
) -> Item {
    let contains = |concept, value| Item::new(Relationship::Contains, concept, value);
    let mut group = Item::container(c::measurement_group())
        .template("1411")
        .with(contains(
            c::tracking_identifier(),
            Value::Text(finding.tracking_id.clone()),
        ))
        .with(contains(
            c::tracking_uid(),
            Value::UidRef(tessera_dicom::dicom::write::new_uid()),
        ))
        .with(contains(c::finding(), Value::Code(c::nodule())))
        .with(contains(
            c::volume_surface(),
            Value::Scoord3d {
                graphic_type: GraphicType3d::Ellipsoid,
                points_lps_mm: ellipsoid(finding.center_lps_mm, finding.size_mm, source.axes_lps),
                frame_of_reference_uid: source.frame_of_reference_uid.clone(),
            },
        ))
        .with(contains(
            c::source_series_for_segmentation(),
            Value::UidRef(source.series_uid.clone()),
        ));
    group.children.extend(measurement_items(finding));
    if let Some(score) = finding.score {
        group.children.push(certainty(score, report));
    }
    if let Some(decision) = finding.decision {
        group.children.push(contains(
            c::reader_decision(),
            Value::Code(c::decision(decision.label())),
        ));
    }
    if !finding.note.is_empty() {
        group
            .children
            .push(contains(c::comment(), Value::Text(finding.note.into())));
    }
    group
}

/// The detector's score as a certainty in percent, with the algorithm (TID 4019) that gave it.
fn certainty(score: f32, report: &DetectionReport) -> Item {
    let modifier =
        |concept, text: String| Item::new(Relationship::HasConceptMod, concept, Value::Text(text));
    let config = &report.config;
    Item::new(
        Relationship::Contains,
        c::certainty_of_finding(),
        Value::Num {
            value: f64::from(score) * 100.0,
            units: c::percent(),
        },
    )
    .with(modifier(c::algorithm_name(), report.model.name.clone()))
    .with(modifier(
        c::algorithm_version(),
        format!(
            "{} {}; model sha256 {}",
            report.tool.name, report.tool.version, report.model.sha256
        ),
    ))
    .with(modifier(
        c::algorithm_parameters(),
        format!(
            "patch {}, overlap {}, threshold {}",
            tessera_dicom::volume::format_size(config.patch),
            config.overlap,
            config.score_threshold
        ),
    ))
}

/// The study's Lung-RADS category (its most suspicious finding's, rejected ones left out),
/// when its findings have categories (a chest model's run).
fn study_lung_rads(findings: &[Finding<'_>]) -> Option<Item> {
    if findings.iter().all(|f| f.lung_rads.is_none()) {
        return None;
    }
    let suggestion = lungrads::study_of_findings(findings.iter().map(|f| {
        (
            f.tracking_id.clone(),
            f.lung_rads.as_ref().map(|(c, _)| *c),
            f.decision == Some(Decision::Rejected),
        )
    }));
    let text = format!("{}: {}", lungrads::VERSION, suggestion.rule);
    Some(
        Item::new(
            Relationship::Contains,
            c::lung_rads(true),
            Value::Code(c::lung_rads_value(suggestion.category.label())),
        )
        .with(Item::new(
            Relationship::HasConceptMod,
            c::lung_rads_rule(),
            Value::Text(text),
        )),
    )
}

/// TID 1411's numeric measurements (the size as the mean of the axial long and short axes,
/// the axes, volume and mean HU) and qualitative evaluations (type, Lung-RADS category).
fn measurement_items(finding: &Finding<'_>) -> Vec<Item> {
    let contains = |concept, value| Item::new(Relationship::Contains, concept, value);
    let num = |concept, value: f64, units| contains(concept, Value::Num { value, units });
    let mean = || {
        Item::new(
            Relationship::HasConceptMod,
            c::derivation(),
            Value::Code(c::mean()),
        )
    };
    let mut items =
        vec![num(c::diameter(), finding.mean_diameter_mm, c::millimetre()).with(mean())];
    let m = finding.measurements;
    if let Some(axes) = finding.reader_axes.or(m.map(|m| &m.axes)) {
        items.push(num(c::long_axis(), axes.long_axis_mm, c::millimetre()));
        items.push(num(c::short_axis(), axes.short_axis_mm, c::millimetre()));
    }
    if let Some(volume) = m.and_then(|m| m.volume_mm3) {
        items.push(num(c::volume(), volume, c::cubic_millimetre()));
    }
    if let Some(hu) = m.and_then(|m| m.mean_hu) {
        items.push(num(c::attenuation_coefficient(), hu, c::hounsfield_unit()).with(mean()));
    }
    if let Some(kind) = m.and_then(|m| m.nodule_type) {
        items.push(contains(
            c::nodule_type(),
            Value::Code(c::nodule_type_value(kind.label())),
        ));
    }
    if let Some((category, rule)) = &finding.lung_rads {
        let value = Value::Code(c::lung_rads_value(category.label()));
        let mut item = contains(c::lung_rads(rule.is_some()), value);
        if let Some(rule) = rule {
            let text = format!("{}: {rule}", lungrads::VERSION);
            item = item.with(Item::new(
                Relationship::HasConceptMod,
                c::lung_rads_rule(),
                Value::Text(text),
            ));
        }
        items.push(item);
    }
    items
}

/// The ellipsoid inscribed in the box: the end points of its three axes, along the volume's
/// x and y axes and their normal (a tilted series' z axis is not orthogonal to them; its
/// extent is taken along the normal).
fn ellipsoid(center: Vec3, size_mm: Vec3, axes: [Vec3; 3]) -> Vec<Vec3> {
    let normal = cross(axes[0], axes[1]);
    let length = norm(normal);
    let third = if length > 0.0 {
        normal.map(|v| v / length)
    } else {
        axes[2]
    };
    let mut points = Vec::with_capacity(6);
    for (axis, side) in [axes[0], axes[1], third].into_iter().zip(size_mm) {
        let half = side / 2.0;
        points.push(std::array::from_fn(|k| center[k] - half * axis[k]));
        points.push(std::array::from_fn(|k| center[k] + half * axis[k]));
    }
    points
}
