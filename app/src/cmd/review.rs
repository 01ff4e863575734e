//! `tessera review det.json --reader NAME --accept 1,3 --reject 2 --out review.json`: a
//! reader's decisions recorded without the viewer (scripts, a review done on paper). Findings
//! are numbered as `tessera detect` prints them and the viewer's table shows them (from 1).
//! An existing review of the same run is updated; one of another run is refused.

use std::path::PathBuf;

use anyhow::Context as _;
use tessera_core::report::DetectionReport;
use tessera_core::review::{Decision, Review};

#[derive(Debug, clap::Args)]
pub struct ReviewArgs {
    /// The run's det.json.
    #[arg(value_name = "DET.json")]
    pub det: PathBuf,
    /// The reader, as DICOM PN (`Family^Given`).
    #[arg(long, value_name = "NAME")]
    pub reader: String,
    /// Findings to accept (numbers from 1, comma-separated).
    #[arg(long, value_name = "N,...", value_delimiter = ',')]
    pub accept: Vec<usize>,
    /// Findings to reject.
    #[arg(long, value_name = "N,...", value_delimiter = ',')]
    pub reject: Vec<usize>,
    /// Findings the reader is unsure of.
    #[arg(long, value_name = "N,...", value_delimiter = ',')]
    pub unsure: Vec<usize>,
    /// A note on a finding: `N=text` (repeatable).
    #[arg(long, value_name = "N=TEXT")]
    pub note: Vec<String>,
    /// The review file to write (updated when it reviews the same run).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
}

pub fn run(args: &ReviewArgs) -> anyhow::Result<()> {
    let report = DetectionReport::read_json(&args.det)?;
    super::outputs::refuse_same(&args.out, &[&args.det])?;
    let mut review = if args.out.exists() {
        Review::read_for(&args.out, &report)?
    } else {
        Review::new(&report, &args.reader)
    };
    review.reader.clone_from(&args.reader);
    let count = report.detections.len();
    let index = |n: usize| -> anyhow::Result<usize> {
        if (1..=count).contains(&n) {
            Ok(n - 1)
        } else {
            anyhow::bail!("there is no finding {n}: the run has {count} (numbered from 1)")
        }
    };
    let now = tessera_core::sr::now_dt();
    for (numbers, decision) in [
        (&args.accept, Decision::Accepted),
        (&args.reject, Decision::Rejected),
        (&args.unsure, Decision::Unsure),
    ] {
        for &n in numbers {
            review.decide(index(n)?, Some(decision), &now);
        }
    }
    for note in &args.note {
        let (n, text) = note
            .split_once('=')
            .with_context(|| format!("--note '{note}' is not N=TEXT"))?;
        let n: usize = n
            .trim()
            .parse()
            .with_context(|| format!("--note '{note}': N is not a number"))?;
        let i = index(n)?;
        let decision = review.of(i).and_then(|f| f.decision);
        review.decide(i, decision, &now);
        if let Some(f) = review.findings.iter_mut().find(|f| f.index == i) {
            f.note = text.to_string();
        }
    }
    review.write(&args.out)?;
    let decided = review
        .findings
        .iter()
        .filter(|f| f.decision.is_some())
        .count();
    println!(
        "{}: {decided} of {count} finding(s) decided by {}",
        args.out.display(),
        review.reader
    );
    Ok(())
}
