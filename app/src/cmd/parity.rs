//! `tessera parity A.json B.json`: are two runs the same, detection by detection?
//!
//! Exit 0 only within the tolerances; 1 when they differ; errors (unreadable files) exit 1 too,
//! with a message on stderr.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use tessera_core::parity::{Tolerances, compare};
use tessera_core::report::DetectionReport;

#[derive(Debug, clap::Args)]
pub struct ParityArgs {
    /// The first run's det.json (e.g. the whole-volume reference).
    #[arg(value_name = "A.json")]
    pub a: PathBuf,
    /// The second run's det.json (e.g. a tiled run).
    #[arg(value_name = "B.json")]
    pub b: PathBuf,
    /// Largest score difference of a matched pair.
    #[arg(long, default_value_t = 1e-4, value_name = "SCORE", value_parser = super::flags::score)]
    pub score_tol: f32,
    /// Largest difference of any box face, in voxels of the model grid.
    #[arg(long, default_value_t = 0.5, value_name = "VOXELS", value_parser = super::flags::non_negative)]
    pub box_tol_voxels: f64,
    /// Print JSON instead of Markdown.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: &ParityArgs) -> anyhow::Result<ExitCode> {
    let a = DetectionReport::read_json(&args.a).context("reading run A")?;
    let b = DetectionReport::read_json(&args.b).context("reading run B")?;
    if a.model.sha256 != b.model.sha256 || a.series_uid != b.series_uid {
        eprintln!(
            "warning: the runs differ in model ({} vs {}) or series ({} vs {}): parity compares like with like",
            a.model.name, b.model.name, a.series_uid, b.series_uid
        );
    }
    let tolerances = Tolerances {
        score: args.score_tol,
        box_voxels: args.box_tol_voxels,
    };
    let report = compare(&a, &b, tolerances);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!(
            "{}",
            report.to_markdown(
                &a,
                &b,
                &args.a.display().to_string(),
                &args.b.display().to_string()
            )
        );
    }
    Ok(if report.within_tolerance {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
