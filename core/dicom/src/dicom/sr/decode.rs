//! A Part 10 SR file back to its content tree.

use std::io::{Read, Seek};
use std::path::Path;

use dicom_core::Tag;
use dicom_dictionary_std::tags;
use dicom_object::file::ReadPreamble;
use dicom_object::{InMemDicomObject, OpenFileOptions};

use super::{COMPREHENSIVE_3D_SR, Code, GraphicType3d, Item, Relationship, Value};
use crate::dicom::DicomError;
use crate::dicom::header::text;
use crate::volume::SourceInstance;

/// Deeper trees than this are refused: reports nest a handful of levels, and a crafted file
/// must not recurse without bound.
const MAX_DEPTH: usize = 32;

/// What an SR file says: its identity, the study it is filed with, and its content.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadSr {
    pub sop_instance_uid: String,
    pub study_uid: String,
    /// The series the evidence cites (the images the report is about), when it cites one.
    pub evidence_series_uid: Option<String>,
    pub complete: bool,
    pub root: Item,
}

/// Reads an SR file (any SR SOP class with a content tree; the value types [`Value`] has).
pub fn read_sr(path: &Path) -> Result<ReadSr, DicomError> {
    let fail = |reason: String| DicomError::Parse {
        path: path.to_path_buf(),
        reason,
    };
    let io = |source| DicomError::Io {
        path: path.to_path_buf(),
        source,
    };
    let (mut file, file_bytes) = crate::io::open_regular(path).map_err(io)?;
    // Element lengths are checked against the file's size before dicom-rs allocates.
    let extent = crate::dicom::guard::check(&mut file, file_bytes).map_err(fail)?;
    let mut bytes = Vec::new();
    file.rewind().map_err(io)?;
    file.take(extent.data_end)
        .read_to_end(&mut bytes)
        .map_err(io)?;
    let obj = OpenFileOptions::new()
        .read_preamble(ReadPreamble::Always)
        .from_reader(bytes.as_slice())
        .map_err(|e| fail(e.to_string()))?;
    let class = text(&obj, tags::SOP_CLASS_UID);
    if !class.starts_with("1.2.840.10008.5.1.4.1.1.88.") {
        return Err(fail(format!(
            "SOP class {class} is not a structured report (expected {COMPREHENSIVE_3D_SR})"
        )));
    }
    let root = read_item(&obj, Relationship::Contains, 0).map_err(|e| fail(e.reason()))?;
    let evidence_series_uid = first_item(&obj, tags::CURRENT_REQUESTED_PROCEDURE_EVIDENCE_SEQUENCE)
        .and_then(|study| first_item(study, tags::REFERENCED_SERIES_SEQUENCE))
        .map(|series| text(series, tags::SERIES_INSTANCE_UID));
    Ok(ReadSr {
        sop_instance_uid: text(&obj, tags::SOP_INSTANCE_UID),
        study_uid: text(&obj, tags::STUDY_INSTANCE_UID),
        evidence_series_uid,
        complete: text(&obj, tags::COMPLETION_FLAG) == "COMPLETE",
        root,
    })
}

/// Why one content item could not be read, and where in the tree.
struct ItemError {
    at: Vec<usize>,
    reason: String,
}

impl ItemError {
    fn new(reason: impl Into<String>) -> Self {
        Self {
            at: Vec::new(),
            reason: reason.into(),
        }
    }

    fn reason(&self) -> String {
        let at: Vec<String> = self.at.iter().rev().map(|i| (i + 1).to_string()).collect();
        if at.is_empty() {
            format!("root content item: {}", self.reason)
        } else {
            format!("content item {}: {}", at.join("."), self.reason)
        }
    }
}

fn read_item(
    obj: &InMemDicomObject,
    relationship: Relationship,
    depth: usize,
) -> Result<Item, ItemError> {
    if depth > MAX_DEPTH {
        return Err(ItemError::new(format!(
            "nested deeper than {MAX_DEPTH} levels"
        )));
    }
    let concept = first_item(obj, tags::CONCEPT_NAME_CODE_SEQUENCE).map(code);
    let value = read_value(obj)?;
    let template = first_item(obj, tags::CONTENT_TEMPLATE_SEQUENCE)
        .map(|t| text(t, tags::TEMPLATE_IDENTIFIER));
    let mut children = Vec::new();
    for (index, child) in items(obj, tags::CONTENT_SEQUENCE).iter().enumerate() {
        let kind = text(child, tags::RELATIONSHIP_TYPE);
        let relationship = Relationship::ALL
            .into_iter()
            .find(|r| r.as_str() == kind)
            .ok_or_else(|| ItemError::new(format!("unknown relationship type '{kind}'")));
        let item = relationship.and_then(|r| read_item(child, r, depth + 1));
        children.push(item.map_err(|mut e| {
            e.at.push(index);
            e
        })?);
    }
    Ok(Item {
        relationship,
        concept,
        value,
        template,
        children,
    })
}

fn read_value(obj: &InMemDicomObject) -> Result<Value, ItemError> {
    let value_type = text(obj, tags::VALUE_TYPE);
    let value = match value_type.as_str() {
        "CONTAINER" => Value::Container,
        "CODE" => Value::Code(
            first_item(obj, tags::CONCEPT_CODE_SEQUENCE)
                .map(code)
                .ok_or_else(|| ItemError::new("CODE without ConceptCodeSequence"))?,
        ),
        "TEXT" => Value::Text(text(obj, tags::TEXT_VALUE)),
        "NUM" => read_num(obj)?,
        "UIDREF" => Value::UidRef(text(obj, tags::UID)),
        "PNAME" => Value::PName(text(obj, tags::PERSON_NAME)),
        "DATETIME" => Value::DateTime(text(obj, tags::DATE_TIME)),
        "IMAGE" => {
            let reference = first_item(obj, tags::REFERENCED_SOP_SEQUENCE)
                .ok_or_else(|| ItemError::new("IMAGE without ReferencedSOPSequence"))?;
            Value::Image(SourceInstance {
                sop_class_uid: text(reference, tags::REFERENCED_SOP_CLASS_UID),
                sop_instance_uid: text(reference, tags::REFERENCED_SOP_INSTANCE_UID),
            })
        }
        "SCOORD3D" => read_scoord3d(obj)?,
        other => {
            return Err(ItemError::new(format!(
                "value type '{other}' is not one Tessera reads"
            )));
        }
    };
    Ok(value)
}

fn read_num(obj: &InMemDicomObject) -> Result<Value, ItemError> {
    let measured = first_item(obj, tags::MEASURED_VALUE_SEQUENCE)
        .ok_or_else(|| ItemError::new("NUM without MeasuredValueSequence"))?;
    let value = measured
        .get(tags::NUMERIC_VALUE)
        .and_then(|e| e.to_float64().ok())
        .filter(|v| v.is_finite())
        .ok_or_else(|| ItemError::new("NUM without a finite NumericValue"))?;
    let units = first_item(measured, tags::MEASUREMENT_UNITS_CODE_SEQUENCE)
        .map(code)
        .ok_or_else(|| ItemError::new("NUM without MeasurementUnitsCodeSequence"))?;
    Ok(Value::Num { value, units })
}

fn read_scoord3d(obj: &InMemDicomObject) -> Result<Value, ItemError> {
    let kind = text(obj, tags::GRAPHIC_TYPE);
    let graphic_type = GraphicType3d::ALL
        .into_iter()
        .find(|g| g.as_str() == kind)
        .ok_or_else(|| ItemError::new(format!("unknown 3D graphic type '{kind}'")))?;
    let data = obj
        .get(tags::GRAPHIC_DATA)
        .and_then(|e| e.to_multi_float64().ok())
        .unwrap_or_default();
    if data.is_empty() || data.len() % 3 != 0 || data.iter().any(|v| !v.is_finite()) {
        return Err(ItemError::new(format!(
            "GraphicData has {} values, not a positive multiple of 3 finite numbers",
            data.len()
        )));
    }
    Ok(Value::Scoord3d {
        graphic_type,
        points_lps_mm: data.chunks_exact(3).map(|p| [p[0], p[1], p[2]]).collect(),
        frame_of_reference_uid: text(obj, tags::REFERENCED_FRAME_OF_REFERENCE_UID),
    })
}

fn code(item: &InMemDicomObject) -> Code {
    Code {
        value: text(item, tags::CODE_VALUE),
        scheme: text(item, tags::CODING_SCHEME_DESIGNATOR),
        meaning: text(item, tags::CODE_MEANING),
    }
}

fn items(obj: &InMemDicomObject, tag: Tag) -> &[InMemDicomObject] {
    obj.get(tag).and_then(|e| e.items()).unwrap_or(&[])
}

fn first_item(obj: &InMemDicomObject, tag: Tag) -> Option<&InMemDicomObject> {
    items(obj, tag).first()
}
