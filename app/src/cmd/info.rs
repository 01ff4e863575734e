//! `tessera info [PATH] [--json]`: the series in a file or folder, without decoding pixels.

use std::path::PathBuf;

use anyhow::Context as _;
use serde::Serialize;
use tessera_dicom::dicom;
use tessera_dicom::volume::format_size;

use crate::common::series::{SeriesRow, row, volume_row};

#[derive(Debug, Default, clap::Args)]
pub struct InfoArgs {
    /// A DICOM file or folder (searched recursively). Without it: the built-in demo study.
    pub path: Option<PathBuf>,
    /// Print JSON (an object: the series, and the files skipped with their reasons) instead of
    /// text.
    #[arg(long)]
    pub json: bool,
    /// Lay out series with gaps or unreadable files by interpolating over them (listing every
    /// filled slice) instead of reporting them as errors.
    #[arg(long)]
    pub allow_gaps: bool,
}

/// What `info --json` prints (a documented, stable schema).
#[derive(Debug, Serialize)]
pub struct InfoReport<'a> {
    pub root: &'a std::path::Path,
    pub files_seen: usize,
    pub series: Vec<SeriesRow>,
    /// Every file that is in no series, with the reason.
    pub skipped: &'a [dicom::Skipped],
}

pub fn run(args: &InfoArgs) -> anyhow::Result<()> {
    let path = crate::common::demo::study_or_demo(args.path.as_deref())?;
    let options = dicom::LoadOptions {
        allow_gaps: args.allow_gaps,
    };
    let (report, rows) = if tessera_dicom::image_file::format_of(&path).is_some() {
        let (volume, report) = tessera_dicom::study::open(&path, None, options)?;
        (report, vec![volume_row(&volume)])
    } else {
        let report = dicom::scan(&path).with_context(|| format!("scanning {}", path.display()))?;
        let rows: Vec<SeriesRow> = report.series.iter().map(|s| row(s, options)).collect();
        (report, rows)
    };
    let empty = rows.is_empty();
    if args.json {
        let json = InfoReport {
            root: &report.root,
            files_seen: report.files_seen,
            series: rows,
            skipped: &report.skipped,
        };
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        print_text(&report, &rows);
    }
    if empty {
        anyhow::bail!(
            "no DICOM image series in {} ({} file(s) looked at, {} skipped)",
            path.display(),
            report.files_seen,
            report.skipped.len()
        );
    }
    Ok(())
}

fn print_text(report: &dicom::ScanReport, rows: &[SeriesRow]) {
    println!(
        "{}: {} file(s), {} series, {} skipped",
        report.root.display(),
        report.files_seen,
        rows.len(),
        report.skipped.len()
    );
    for (i, r) in rows.iter().enumerate() {
        println!();
        println!(
            "[{}] {} {}{}",
            i + 1,
            if r.modality.is_empty() {
                "??"
            } else {
                &r.modality
            },
            if r.description.is_empty() {
                "(no description)"
            } else {
                &r.description
            },
            if r.localizer { " [scout]" } else { "" }
        );
        println!("    uid      {}", r.series_uid);
        if !r.patient_id.is_empty() {
            println!("    patient  {}", r.patient_id);
        }
        match &r.error {
            None => {
                println!("    size     {} voxels", format_size(r.size));
                println!(
                    "    spacing  {:.4} x {:.4} x {:.4} mm",
                    r.spacing_mm[0], r.spacing_mm[1], r.spacing_mm[2]
                );
            }
            Some(e) => println!("    error    {e}"),
        }
        println!("    files    {} ({} frames)", r.files, r.frames);
        for w in &r.warnings {
            println!("    warning  {w}");
        }
    }
    if !report.skipped.is_empty() {
        println!();
        println!("skipped:");
        for s in &report.skipped {
            println!("    {}: {}", s.path.display(), s.reason);
        }
    }
}
