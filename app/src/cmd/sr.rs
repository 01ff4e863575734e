//! `tessera sr det.json [--review review.json] --out sr.dcm`: a run's findings (and a reader's
//! decisions) as a DICOM Comprehensive 3D SR (TID 1500) filed with the study; `--dump SR`
//! lists the findings of an SR.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use tessera_core::report::DetectionReport;
use tessera_core::review::Review;
use tessera_core::sr::{self, Selection, SrOptions};

#[derive(Debug, clap::Args)]
pub struct SrArgs {
    /// The run's det.json (from `tessera detect`).
    #[arg(value_name = "DET.json", required_unless_present = "dump")]
    pub det: Option<PathBuf>,
    /// The reader's review of that run (review.json): decisions, notes, added findings.
    #[arg(long, value_name = "FILE")]
    pub review: Option<PathBuf>,
    /// Only the findings the reader accepted (needs --review); default: all, each with its
    /// decision when it has one.
    #[arg(long, requires = "review")]
    pub accepted_only: bool,
    /// The SR file to write.
    #[arg(long, value_name = "FILE", required_unless_present = "dump")]
    pub out: Option<PathBuf>,
    /// Replace an existing DICOM file at --out.
    #[arg(long)]
    pub force: bool,
    /// Instead: list the findings of this SR file.
    #[arg(long, value_name = "SR", conflicts_with_all = ["det", "out", "review"])]
    pub dump: Option<PathBuf>,
}

pub fn run(args: &SrArgs) -> anyhow::Result<()> {
    if let Some(path) = &args.dump {
        return dump(path);
    }
    let (Some(det), Some(out)) = (&args.det, &args.out) else {
        anyhow::bail!("give DET.json and --out (or --dump SR)");
    };
    let report = DetectionReport::read_json(det)?;
    let review = match &args.review {
        Some(path) => Some(Review::read_for(path, &report)?),
        None => None,
    };
    let inputs: Vec<&Path> = std::iter::once(det.as_path())
        .chain(args.review.as_deref())
        .collect();
    super::outputs::refuse_same(out, &inputs)?;
    tessera_dicom::io::check_output(out, &[], args.force).map_err(super::outputs::Refused::from)?;
    let selection = if args.accepted_only {
        Selection::AcceptedOnly
    } else {
        Selection::All
    };
    let options = SrOptions::now(selection);
    let count = sr::write(out, &report, review.as_ref(), &options)
        .with_context(|| format!("writing the SR for {}", det.display()))?;
    println!(
        "{}: {count} finding(s), study {}, SR {}",
        out.display(),
        report.source.as_ref().map_or("?", |s| s.study_uid.as_str()),
        options.sop_instance_uid
    );
    Ok(())
}

fn dump(path: &Path) -> anyhow::Result<()> {
    let read = tessera_dicom::dicom::sr::read_sr(path)?;
    let findings = sr::findings(&read, path)?;
    println!(
        "{}: study {}, {} finding(s){}",
        path.display(),
        read.study_uid,
        findings.len(),
        if read.complete {
            ""
        } else {
            " (review partial)"
        }
    );
    for f in &findings {
        let [x, y, z] = f.center_lps_mm;
        let size = f.size_mm.map_or("point".to_string(), |s| {
            format!("{:.1} x {:.1} x {:.1} mm", s[0], s[1], s[2])
        });
        let score = f.score.map_or("-".to_string(), |s| format!("{s:.3}"));
        let decision = f.decision.map_or("undecided", |d| d.label());
        println!(
            "  {}: ({x:.1}, {y:.1}, {z:.1}) mm, {size}, score {score}, {decision}{}",
            f.tracking_id,
            if f.note.is_empty() {
                String::new()
            } else {
                format!(", note: {}", f.note)
            }
        );
    }
    Ok(())
}
