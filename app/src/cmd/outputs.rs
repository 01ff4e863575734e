//! Output paths a subcommand writes: checked against its inputs before any work starts, so
//! nothing a user owns is modified (see [`tessera_dicom::io::check_output`]).

use std::path::{Path, PathBuf};

use tessera_dicom::dicom::ScanReport;

/// A refusal: the command writes nothing, and exits with code 2 like any other refusal.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct Refused(#[from] pub tessera_dicom::io::OutputError);

/// Every file and folder a scan read: the path given and each file found under it.
pub fn inputs_of(path: &Path, report: &ScanReport) -> Vec<PathBuf> {
    tessera_dicom::study::input_files(path, report)
}

/// Checks each output against `inputs`; the first refusal is the error.
pub fn check(outputs: &[&Path], inputs: &[PathBuf], force: bool) -> Result<(), Refused> {
    for output in outputs {
        tessera_dicom::io::check_output(output, inputs, force)?;
    }
    Ok(())
}

/// Refuses an output that is one of the files read (for outputs that belong beside their
/// inputs, such as an SR or a review beside det.json).
pub fn refuse_same(out: &Path, inputs: &[&Path]) -> Result<(), Refused> {
    let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    match inputs.iter().find(|input| same(out, input)) {
        Some(input) => Err(Refused(tessera_dicom::io::OutputError::IsInput {
            path: input.to_path_buf(),
        })),
        None => Ok(()),
    }
}
