//! The PACS round trip against a real Orthanc with its DICOMweb plugin: upload a phantom
//! study, list it, pull it, run detect, store the SR, query it back, and check that Orthanc
//! holds it; and the errors a reader meets (credentials, server down, a study that is not CT,
//! a retrieval cancelled half-way) leave nothing half-written.

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};

use tessera_core::phantom::{self, PhantomSpec};
use tessera_core::pipeline;
use tessera_core::report::DetectionReport;
use tessera_core::sr::{self, Selection, SrOptions};
use tessera_dicom::dicom::{self, LoadOptions};
use tessera_pacs::{PacsError, Server, StudyQuery};
use tessera_plan::device::CancelToken;
use tessera_plan::model::{Model, shipped_models_dir};
use tessera_plan::request::DetectConfig;
use tessera_tests::orthanc::{Orthanc, free_port};
use tessera_tests::runtime_available;

fn spec(seed: u64) -> PhantomSpec {
    PhantomSpec {
        seed,
        size: [120, 104, 44],
        spacing_mm: [2.4, 2.6, 5.0],
        nodules: 3,
        noise_hu: 18.0,
        masses: 0,
    }
}

/// Writes the phantom of `seed` (with `modality`) and returns its folder and file paths.
fn study(dir: &Path, seed: u64, modality: &str) -> (phantom::Phantom, Vec<PathBuf>) {
    let mut phantom = phantom::generate(&spec(seed)).unwrap();
    phantom.volume.info.modality = modality.into();
    let folder = dir.join(format!("study-{seed}"));
    phantom::write_series(&phantom, &folder).unwrap();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&folder)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "dcm"))
        .collect();
    files.sort();
    (phantom, files)
}

fn no_cancel() -> bool {
    false
}

#[test]
fn a_study_goes_to_the_pacs_and_its_sr_comes_back() {
    if !runtime_available() {
        return;
    }
    let Some(orthanc) = Orthanc::start() else {
        return;
    };
    let server = orthanc.server();
    let dir = tempfile::tempdir().unwrap();
    let (phantom, files) = study(dir.path(), 9, "CT");
    let stored = server.store_files(&files).unwrap();
    assert_eq!((stored.sent, stored.stored.len()), (44, 44));

    let studies = server.search_studies(&StudyQuery::default()).unwrap();
    assert_eq!(studies.len(), 1);
    let study_uid = &phantom.volume.info.study_uid;
    assert_eq!(&studies[0].study_uid, study_uid);
    assert_eq!(studies[0].modalities, ["CT"]);
    assert_eq!(studies[0].patient_id, "PHANTOM-9");

    let pulled = dir.path().join("pulled");
    let mut updates = 0;
    let retrieved = server
        .retrieve_ct(study_uid, None, &pulled, &no_cancel, &mut |_| updates += 1)
        .unwrap();
    assert_eq!(retrieved.files, 44);
    assert!(updates > 0, "progress was reported");
    let (volume, _) = dicom::open(&pulled, None, LoadOptions::default()).unwrap();
    assert_eq!(
        volume.voxels, phantom.volume.voxels,
        "pixels survive the round trip"
    );
    assert_eq!(volume.instances, phantom.volume.instances);

    let model = Model::load(&shipped_models_dir().join("tessera-test-tiny")).unwrap();
    let mut config = DetectConfig::new([64, 64, 32]);
    config.score_threshold = Some(0.2);
    let result =
        pipeline::detect(&volume, &model, &config, &CancelToken::new(), &mut |_| {}).unwrap();
    let report = DetectionReport::from_result(&result);
    let options = SrOptions::now(Selection::All);
    let (doc, count) = sr::document(&report, None, &options).unwrap();
    assert_eq!(count, report.detections.len());
    let bytes = dicom::sr::sr_bytes(&doc).unwrap();
    let stored = server.store(&[bytes]).unwrap();
    assert_eq!(
        stored.stored,
        std::slice::from_ref(&options.sop_instance_uid)
    );

    let studies = server.search_studies(&StudyQuery::default()).unwrap();
    let mut modalities = studies[0].modalities.clone();
    modalities.sort();
    assert_eq!(modalities, ["CT", "SR"]);
    let series = server.search_series(study_uid).unwrap();
    let sr_series: Vec<_> = series.iter().filter(|s| s.modality == "SR").collect();
    assert_eq!(sr_series.len(), 1);
    assert_eq!(sr_series[0].series_uid, options.series_uid);

    // Orthanc's own API: it holds the SR as an instance of the study.
    let (status, body) = orthanc.rest("POST", "/tools/lookup", &options.sop_instance_uid);
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"Type\" : \"Instance\""), "{body}");
}

#[test]
fn failures_say_why_and_leave_nothing_behind() {
    let Some(orthanc) = Orthanc::start() else {
        return;
    };
    let server = orthanc.server();
    let dir = tempfile::tempdir().unwrap();
    let (mr, files) = study(dir.path(), 5, "MR");
    server.store_files(&files).unwrap();
    let out = dir.path().join("out");

    // Without credentials.
    let anonymous = Server::new(&orthanc.dicomweb_url(), None).unwrap();
    let err = anonymous
        .search_studies(&StudyQuery::default())
        .unwrap_err();
    assert!(
        matches!(err, PacsError::Status { status: 401, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("credentials"), "{err}");

    // The server refuses what is not DICOM (Orthanc: 400): an error with its answer, nothing
    // claimed stored.
    let err = server.store(&[b"not a DICOM file".to_vec()]).unwrap_err();
    assert!(
        matches!(
            err,
            PacsError::Status { .. } | PacsError::StoreRefused { stored: 0, .. }
        ),
        "{err:?}"
    );

    // Nothing listens.
    let down = Server::new(&format!("http://127.0.0.1:{}/dicom-web", free_port()), None).unwrap();
    let err = down.search_studies(&StudyQuery::default()).unwrap_err();
    assert!(matches!(err, PacsError::Unreachable { .. }), "{err:?}");

    // A study that is not CT, and one the server does not hold.
    let uid = &mr.volume.info.study_uid;
    let err = server
        .retrieve_ct(uid, None, &out, &no_cancel, &mut |_| {})
        .unwrap_err();
    assert!(matches!(err, PacsError::NotCt { .. }), "{err:?}");
    assert!(err.to_string().contains("MR"), "{err}");
    let err = server
        .retrieve_ct("2.25.404", None, &out, &no_cancel, &mut |_| {})
        .unwrap_err();
    assert!(matches!(err, PacsError::NoSuchStudy { .. }), "{err:?}");

    // Cancelled once the first bytes arrived: no folder, no partial folder.
    let (ct, files) = study(dir.path(), 6, "CT");
    server.store_files(&files).unwrap();
    let cancel = std::cell::Cell::new(false);
    let err = server
        .retrieve_ct(
            &ct.volume.info.study_uid,
            None,
            &out,
            &|| cancel.get(),
            &mut |_| cancel.set(true),
        )
        .unwrap_err();
    assert!(matches!(err, PacsError::Cancelled), "{err:?}");
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with("study-"))
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");

    // A folder with files in it is not a target.
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("mine.txt"), "keep").unwrap();
    let err = server
        .retrieve_ct(
            &ct.volume.info.study_uid,
            None,
            &out,
            &no_cancel,
            &mut |_| {},
        )
        .unwrap_err();
    assert!(matches!(err, PacsError::Target { .. }), "{err:?}");
    assert_eq!(
        std::fs::read_to_string(out.join("mine.txt")).unwrap(),
        "keep"
    );
}

#[test]
fn https_refuses_a_certificate_the_system_does_not_trust() {
    let Some(server) = tessera_tests::tls::UntrustedHttps::start() else {
        return;
    };
    let client = Server::new(
        &format!("https://127.0.0.1:{}/dicom-web", server.port),
        None,
    )
    .unwrap();
    let err = client.search_studies(&StudyQuery::default()).unwrap_err();
    assert!(matches!(err, PacsError::Unreachable { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("UnknownIssuer"), "{text}");
    assert!(
        text.contains("not trusted by this system's roots"),
        "{text}"
    );
}
