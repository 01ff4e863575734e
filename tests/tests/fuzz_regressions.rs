//! Replays every input under `tests/fuzz-regressions/<target>/` through its fuzz target's body
//! (`tessera_tests::fuzz`): inputs that once crashed, hung or exhausted memory, plus a few
//! hand-made hostile ones. Runs on stable, in CI; the fuzzer itself runs by hand
//! (`scripts/fuzz.sh`).

// Test code: a failed unwrap is a failed test.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

#[test]
fn every_regression_input_is_handled_without_a_panic() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz-regressions");
    let mut replayed = 0;
    for (target, body) in tessera_tests::fuzz::TARGETS {
        let dir = root.join(target);
        let mut inputs: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_file() && p.file_name().is_none_or(|n| n != "README.md"))
            .collect();
        inputs.sort();
        assert!(!inputs.is_empty(), "no inputs in {}", dir.display());
        for input in inputs {
            let data = std::fs::read(&input).unwrap();
            // A panic here fails the test and names nothing, so say which input runs.
            eprintln!("{target}: {}", input.display());
            body(&data);
            replayed += 1;
        }
        for (name, data) in tessera_tests::fuzz::generated_seeds(target) {
            eprintln!("{target}: generated {name}");
            body(&data);
            replayed += 1;
        }
    }
    eprintln!("replayed {replayed} input(s)");
}

#[test]
fn the_generated_sr_seed_is_a_readable_report() {
    let seeds = tessera_tests::fuzz::generated_seeds("sr_file");
    let (_, valid) = seeds.first().expect("an SR seed");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seed.dcm");
    std::fs::write(&path, valid).unwrap();
    let read = tessera_dicom::dicom::sr::read_sr(&path).unwrap();
    let findings = tessera_core::sr::findings(&read, &path).unwrap();
    assert_eq!(findings.len(), 1);
    assert_eq!(findings[0].size_mm, Some([10.0, 10.0, 10.0]));
}
