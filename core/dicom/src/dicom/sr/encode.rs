//! The content tree and its document attributes to a Part 10 file.

use std::path::Path;

use dicom_core::value::{C, DataSetSequence};
use dicom_core::{DataElement, PrimitiveValue, Tag, VR};
use dicom_dictionary_std::{tags, uids};
use dicom_object::InMemDicomObject;
use dicom_object::meta::FileMetaTableBuilder;

use super::{COMPREHENSIVE_3D_SR, Code, Item, Value};
use crate::dicom::write::{EncodeError, IMPLEMENTATION_CLASS_UID, WriteError, ds};
use crate::volume::{SeriesSource, SourceInstance};

/// One SR document: the study it is filed with, its own identity, and its content.
#[derive(Debug, Clone)]
pub struct SrDocument<'a> {
    /// The study, patient, frame of reference and images the report is about; the images
    /// become the evidence the document cites.
    pub source: &'a SeriesSource,
    pub sop_instance_uid: String,
    pub series_uid: String,
    pub series_number: i64,
    pub instance_number: i64,
    pub series_description: String,
    pub manufacturer: String,
    pub model_name: String,
    pub software_versions: String,
    /// DICOM DA (`YYYYMMDD`) and TM (`HHMMSS`) of the content.
    pub content_date: String,
    pub content_time: String,
    /// Whether the content is complete (COMPLETE) or a review still in progress (PARTIAL).
    pub complete: bool,
    /// Private coding schemes the content uses: designator and name.
    pub private_schemes: Vec<(String, String)>,
    pub root: Item,
}

/// The document as Part 10 bytes (explicit VR little endian, UTF-8 text).
pub fn sr_bytes(doc: &SrDocument<'_>) -> Result<Vec<u8>, EncodeError> {
    let mut obj = InMemDicomObject::new_empty();
    put_document(&mut obj, doc);
    put_item_content(&mut obj, &doc.root);
    let file = obj
        .with_meta(
            FileMetaTableBuilder::new()
                .transfer_syntax(uids::EXPLICIT_VR_LITTLE_ENDIAN)
                .implementation_class_uid(IMPLEMENTATION_CLASS_UID)
                .implementation_version_name("TESSERA_0_1"),
        )
        .map_err(|e| EncodeError::Meta(Box::new(e)))?;
    let mut bytes = Vec::new();
    file.write_all(&mut bytes)
        .map_err(|e| EncodeError::Write(Box::new(e)))?;
    Ok(bytes)
}

/// Writes the document to `path` atomically (a new file; an existing one is replaced only
/// by the rename, never opened).
pub fn write_sr(path: &Path, doc: &SrDocument<'_>) -> Result<(), WriteError> {
    let bytes = sr_bytes(doc).map_err(|source| WriteError::Encode {
        path: path.to_path_buf(),
        source,
    })?;
    crate::io::write_atomic(path, &bytes).map_err(|source| WriteError::Io {
        path: path.to_path_buf(),
        source,
    })
}

fn put_str(obj: &mut InMemDicomObject, tag: Tag, vr: VR, value: &str) {
    obj.put(DataElement::new(tag, vr, PrimitiveValue::from(value)));
}

fn put_seq(obj: &mut InMemDicomObject, tag: Tag, items: Vec<InMemDicomObject>) {
    obj.put(DataElement::new(tag, VR::SQ, DataSetSequence::from(items)));
}

/// SOP Common, Patient, General Study, SR Document Series, General and Enhanced General
/// Equipment, SR Document General.
fn put_document(obj: &mut InMemDicomObject, doc: &SrDocument<'_>) {
    let source = doc.source;
    let who = &source.identity;
    let text = [
        (tags::SOP_CLASS_UID, VR::UI, COMPREHENSIVE_3D_SR),
        (tags::SOP_INSTANCE_UID, VR::UI, &doc.sop_instance_uid),
        (tags::STUDY_DATE, VR::DA, &who.study_date),
        (tags::CONTENT_DATE, VR::DA, &doc.content_date),
        (tags::STUDY_TIME, VR::TM, &who.study_time),
        (tags::CONTENT_TIME, VR::TM, &doc.content_time),
        (tags::ACCESSION_NUMBER, VR::SH, &who.accession_number),
        (tags::MODALITY, VR::CS, "SR"),
        (tags::MANUFACTURER, VR::LO, &doc.manufacturer),
        (
            tags::REFERRING_PHYSICIAN_NAME,
            VR::PN,
            &who.referring_physician_name,
        ),
        (tags::STUDY_DESCRIPTION, VR::LO, &source.study_description),
        (tags::SERIES_DESCRIPTION, VR::LO, &doc.series_description),
        (tags::MANUFACTURER_MODEL_NAME, VR::LO, &doc.model_name),
        (tags::PATIENT_NAME, VR::PN, &who.patient_name),
        (tags::PATIENT_ID, VR::LO, &who.patient_id),
        (tags::PATIENT_BIRTH_DATE, VR::DA, &who.patient_birth_date),
        (tags::PATIENT_SEX, VR::CS, &who.patient_sex),
        (tags::SOFTWARE_VERSIONS, VR::LO, &doc.software_versions),
        (tags::STUDY_INSTANCE_UID, VR::UI, &source.study_uid),
        (tags::SERIES_INSTANCE_UID, VR::UI, &doc.series_uid),
        (tags::STUDY_ID, VR::SH, &who.study_id),
        (tags::SERIES_NUMBER, VR::IS, &doc.series_number.to_string()),
        (
            tags::INSTANCE_NUMBER,
            VR::IS,
            &doc.instance_number.to_string(),
        ),
        (
            tags::COMPLETION_FLAG,
            VR::CS,
            if doc.complete { "COMPLETE" } else { "PARTIAL" },
        ),
        (tags::VERIFICATION_FLAG, VR::CS, "UNVERIFIED"),
    ];
    let ascii = text.iter().all(|(_, _, v)| v.is_ascii()) && is_ascii(&doc.root);
    if !ascii {
        // UTF-8 only when needed: plain ASCII is the default repertoire, and some validators
        // (dicom3tools) cannot check text under ISO_IR 192.
        put_str(obj, tags::SPECIFIC_CHARACTER_SET, VR::CS, "ISO_IR 192");
    }
    for (tag, vr, value) in text {
        put_str(obj, tag, vr, value);
    }
    put_seq(
        obj,
        tags::REFERENCED_PERFORMED_PROCEDURE_STEP_SEQUENCE,
        Vec::new(),
    );
    put_seq(obj, tags::PERFORMED_PROCEDURE_CODE_SEQUENCE, Vec::new());
    put_seq(
        obj,
        tags::CURRENT_REQUESTED_PROCEDURE_EVIDENCE_SEQUENCE,
        vec![evidence(source)],
    );
}

/// Whether every text of the tree (values, code meanings) is ASCII.
fn is_ascii(item: &Item) -> bool {
    let code_ascii = |c: &Code| c.value.is_ascii() && c.scheme.is_ascii() && c.meaning.is_ascii();
    let value_ascii = match &item.value {
        Value::Text(t) | Value::PName(t) | Value::UidRef(t) | Value::DateTime(t) => t.is_ascii(),
        Value::Code(code) | Value::Num { units: code, .. } => code_ascii(code),
        Value::Container | Value::Image(_) | Value::Scoord3d { .. } => true,
    };
    value_ascii
        && item.concept.as_ref().is_none_or(code_ascii)
        && item.children.iter().all(is_ascii)
}

/// The study, its series and every instance the report was made from.
fn evidence(source: &SeriesSource) -> InMemDicomObject {
    let mut series = InMemDicomObject::new_empty();
    put_str(
        &mut series,
        tags::SERIES_INSTANCE_UID,
        VR::UI,
        &source.series_uid,
    );
    put_seq(
        &mut series,
        tags::REFERENCED_SOP_SEQUENCE,
        source.instances.iter().map(sop_reference).collect(),
    );
    let mut study = InMemDicomObject::new_empty();
    put_str(
        &mut study,
        tags::STUDY_INSTANCE_UID,
        VR::UI,
        &source.study_uid,
    );
    put_seq(&mut study, tags::REFERENCED_SERIES_SEQUENCE, vec![series]);
    study
}

fn sop_reference(instance: &SourceInstance) -> InMemDicomObject {
    let mut item = InMemDicomObject::new_empty();
    put_str(
        &mut item,
        tags::REFERENCED_SOP_CLASS_UID,
        VR::UI,
        &instance.sop_class_uid,
    );
    put_str(
        &mut item,
        tags::REFERENCED_SOP_INSTANCE_UID,
        VR::UI,
        &instance.sop_instance_uid,
    );
    item
}

fn code_item(code: &Code) -> InMemDicomObject {
    let mut item = InMemDicomObject::new_empty();
    put_str(&mut item, tags::CODE_VALUE, VR::SH, &code.value);
    put_str(
        &mut item,
        tags::CODING_SCHEME_DESIGNATOR,
        VR::SH,
        &code.scheme,
    );
    put_str(&mut item, tags::CODE_MEANING, VR::LO, &code.meaning);
    item
}

/// A child content item: its relationship, then what the root has too.
fn content_item(item: &Item) -> InMemDicomObject {
    let mut obj = InMemDicomObject::new_empty();
    put_str(
        &mut obj,
        tags::RELATIONSHIP_TYPE,
        VR::CS,
        item.relationship.as_str(),
    );
    put_item_content(&mut obj, item);
    obj
}

/// Value type, concept name, value and children of `item` into `obj`.
fn put_item_content(obj: &mut InMemDicomObject, item: &Item) {
    put_str(obj, tags::VALUE_TYPE, VR::CS, item.value.value_type());
    if let Some(concept) = &item.concept {
        put_seq(
            obj,
            tags::CONCEPT_NAME_CODE_SEQUENCE,
            vec![code_item(concept)],
        );
    }
    put_value(obj, &item.value);
    if let Some(tid) = &item.template {
        let mut template = InMemDicomObject::new_empty();
        put_str(&mut template, tags::MAPPING_RESOURCE, VR::CS, "DCMR");
        put_str(&mut template, tags::TEMPLATE_IDENTIFIER, VR::CS, tid);
        put_seq(obj, tags::CONTENT_TEMPLATE_SEQUENCE, vec![template]);
    }
    if !item.children.is_empty() {
        put_seq(
            obj,
            tags::CONTENT_SEQUENCE,
            item.children.iter().map(content_item).collect(),
        );
    }
}

fn put_value(obj: &mut InMemDicomObject, value: &Value) {
    match value {
        Value::Container => put_str(obj, tags::CONTINUITY_OF_CONTENT, VR::CS, "SEPARATE"),
        Value::Code(code) => put_seq(obj, tags::CONCEPT_CODE_SEQUENCE, vec![code_item(code)]),
        Value::Text(text) => put_str(obj, tags::TEXT_VALUE, VR::UT, text),
        Value::Num { value, units } => {
            let mut measured = InMemDicomObject::new_empty();
            put_str(&mut measured, tags::NUMERIC_VALUE, VR::DS, &ds(*value));
            put_seq(
                &mut measured,
                tags::MEASUREMENT_UNITS_CODE_SEQUENCE,
                vec![code_item(units)],
            );
            put_seq(obj, tags::MEASURED_VALUE_SEQUENCE, vec![measured]);
        }
        Value::UidRef(uid) => put_str(obj, tags::UID, VR::UI, uid),
        Value::PName(name) => put_str(obj, tags::PERSON_NAME, VR::PN, name),
        Value::DateTime(dt) => put_str(obj, tags::DATE_TIME, VR::DT, dt),
        Value::Image(instance) => {
            put_seq(
                obj,
                tags::REFERENCED_SOP_SEQUENCE,
                vec![sop_reference(instance)],
            );
        }
        Value::Scoord3d {
            graphic_type,
            points_lps_mm,
            frame_of_reference_uid,
        } => {
            put_str(
                obj,
                tags::REFERENCED_FRAME_OF_REFERENCE_UID,
                VR::UI,
                frame_of_reference_uid,
            );
            put_str(obj, tags::GRAPHIC_TYPE, VR::CS, graphic_type.as_str());
            // FL is what the standard gives GraphicData: coordinates keep ~0.01 mm at 1 m.
            let data: C<f32> = points_lps_mm.iter().flatten().map(|v| *v as f32).collect();
            obj.put(DataElement::new(
                tags::GRAPHIC_DATA,
                VR::FL,
                PrimitiveValue::F32(data),
            ));
        }
    }
}
