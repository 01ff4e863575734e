//! SR files: a content tree written and read back as it was; what is not an SR, or is cut
//! short, is refused with the file's name.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::panic)]

use tessera_dicom::dicom::DicomError;
use tessera_dicom::dicom::sr::{
    Code, GraphicType3d, Item, Relationship, SrDocument, Value, read_sr, sr_bytes, write_sr,
};
use tessera_dicom::volume::{SeriesSource, SourceInstance, StudyIdentity};

fn source() -> SeriesSource {
    SeriesSource {
        study_uid: "2.25.1".into(),
        series_uid: "2.25.2".into(),
        frame_of_reference_uid: "2.25.3".into(),
        modality: "CT".into(),
        study_description: "chest".into(),
        identity: StudyIdentity {
            patient_name: "Doe^Jane".into(),
            ..StudyIdentity::default()
        },
        instances: vec![SourceInstance {
            sop_class_uid: "1.2.840.10008.5.1.4.1.1.2".into(),
            sop_instance_uid: "2.25.4".into(),
        }],
        axes_lps: [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
    }
}

fn tree() -> Item {
    let contains = |concept, value| Item::new(Relationship::Contains, concept, value);
    Item::container(Code::new("126000", "DCM", "Imaging Measurement Report"))
        .template("1500")
        .with(
            Item::container(Code::new("125007", "DCM", "Measurement Group"))
                .with(contains(
                    Code::new("121231", "DCM", "Volume Surface"),
                    Value::Scoord3d {
                        graphic_type: GraphicType3d::Point,
                        points_lps_mm: vec![[1.5, -2.25, 300.125]],
                        frame_of_reference_uid: "2.25.3".into(),
                    },
                ))
                .with(contains(
                    Code::new("81827009", "SCT", "Diameter"),
                    Value::Num {
                        value: 12.5,
                        units: Code::new("mm", "UCUM", "millimeter"),
                    },
                ))
                .with(contains(
                    Code::new("121106", "DCM", "Comment"),
                    Value::Text("Knötchen, unscharf".into()),
                )),
        )
        .with(Item::unnamed(
            Relationship::Contains,
            Value::Image(source().instances[0].clone()),
        ))
}

fn document(source: &SeriesSource) -> SrDocument<'_> {
    SrDocument {
        source,
        sop_instance_uid: "2.25.10".into(),
        series_uid: "2.25.11".into(),
        series_number: 7,
        instance_number: 1,
        series_description: "test".into(),
        manufacturer: "Tessera".into(),
        model_name: "test".into(),
        software_versions: "0".into(),
        content_date: "20261204".into(),
        content_time: "120000".into(),
        complete: true,
        private_schemes: Vec::new(),
        root: tree(),
    }
}

#[test]
fn a_tree_reads_back_as_written() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sr.dcm");
    let source = source();
    write_sr(&path, &document(&source)).unwrap();
    let read = read_sr(&path).unwrap();
    assert_eq!(
        read.root,
        tree(),
        "non-ASCII text, points and units survive"
    );
    assert_eq!(read.study_uid, "2.25.1");
    assert_eq!(read.evidence_series_uid.as_deref(), Some("2.25.2"));
    assert!(read.complete);
}

#[test]
fn a_file_that_is_not_a_whole_sr_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let source = source();
    let bytes = sr_bytes(&document(&source)).unwrap();
    let cut = dir.path().join("cut.dcm");
    std::fs::write(&cut, &bytes[..bytes.len() - 40]).unwrap();
    let err = read_sr(&cut).unwrap_err();
    assert!(matches!(err, DicomError::Parse { .. }), "{err:?}");
    assert!(err.to_string().contains("cut.dcm"), "{err}");

    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "not DICOM").unwrap();
    let err = read_sr(&text).unwrap_err();
    assert!(err.to_string().contains("notes.txt"), "{err}");
}

#[test]
fn a_tree_nested_past_the_limit_is_refused_not_recursed() {
    let mut item = Item::new(
        Relationship::Contains,
        Code::new("121106", "DCM", "Comment"),
        Value::Text("deep".into()),
    );
    for _ in 0..40 {
        item = Item::container(Code::new("125007", "DCM", "Measurement Group")).with(item);
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("deep.dcm");
    let source = source();
    write_sr(
        &path,
        &SrDocument {
            root: item,
            ..document(&source)
        },
    )
    .unwrap();
    // The element guard stops it first (sequences past 16 levels); the tree reader's own
    // limit is the second line.
    let err = read_sr(&path).unwrap_err();
    assert!(matches!(err, DicomError::Parse { .. }), "{err:?}");
    assert!(err.to_string().contains("nested deeper"), "{err}");
    assert!(err.to_string().contains("deep.dcm"), "{err}");
}
