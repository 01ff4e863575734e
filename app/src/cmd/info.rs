//! `tessera info [PATH] [--json]`: the series in a file or folder, without decoding pixels.

use std::path::PathBuf;

use anyhow::Context as _;
use serde::Serialize;
use tessera_core::dicom::{self, SeriesFiles};
use tessera_core::volume::format_size;

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

/// One series as `info --json` prints it (a documented, stable schema).
#[derive(Debug, Clone, Serialize)]
pub struct SeriesRow {
    pub series_uid: String,
    pub modality: String,
    pub description: String,
    pub series_number: Option<i64>,
    pub patient_id: String,
    pub size: [usize; 3],
    pub spacing_mm: [f64; 3],
    pub origin_lps_mm: [f64; 3],
    pub files: usize,
    pub frames: usize,
    pub localizer: bool,
    pub transfer_syntaxes: Vec<String>,
    pub warnings: Vec<String>,
    /// Slices no file provides, interpolated (only with `--allow-gaps`).
    pub filled_slices: Vec<dicom::FilledSlice>,
    /// Image files that could not be read and may be slices of this series.
    pub unreadable_files: Vec<PathBuf>,
    /// Set when the series cannot be a volume; then size and spacing are zero.
    pub error: Option<String>,
}

pub fn run(args: &InfoArgs) -> anyhow::Result<()> {
    let path = super::phantom::study_or_demo(args.path.as_deref())?;
    let report = dicom::scan(&path).with_context(|| format!("scanning {}", path.display()))?;
    let options = dicom::LoadOptions {
        allow_gaps: args.allow_gaps,
    };
    let rows: Vec<SeriesRow> = report.series.iter().map(|s| row(s, options)).collect();
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

pub fn row(series: &SeriesFiles, options: dicom::LoadOptions) -> SeriesRow {
    let first = series.first();
    let mut transfer_syntaxes: Vec<String> = series
        .files
        .iter()
        .map(|f| f.transfer_syntax_uid.clone())
        .collect();
    transfer_syntaxes.sort();
    transfer_syntaxes.dedup();
    let mut warnings = Vec::new();
    if let Err(e) = dicom::check_transfer_syntaxes(series) {
        warnings.push(format!("cannot decode: {e}"));
    }
    let mut filled_slices = Vec::new();
    let (size, spacing_mm, origin_lps_mm, error) = match dicom::layout(series, options) {
        Ok(layout) => {
            warnings.extend(layout.warnings);
            filled_slices = layout.filled;
            (
                layout.geometry.size,
                layout.geometry.spacing_mm,
                layout.geometry.origin_lps_mm(),
                None,
            )
        }
        Err(e) => ([0; 3], [0.0; 3], [0.0; 3], Some(e.to_string())),
    };
    SeriesRow {
        series_uid: first.info.series_uid.clone(),
        modality: first.info.modality.clone(),
        description: first.info.series_description.clone(),
        series_number: first.info.series_number,
        patient_id: first.info.patient_id.clone(),
        size,
        spacing_mm,
        origin_lps_mm,
        files: series.files.len(),
        frames: series.frame_count(),
        localizer: first.is_localizer(),
        transfer_syntaxes,
        warnings,
        filled_slices,
        unreadable_files: series.unreadable.iter().map(|u| u.path.clone()).collect(),
        error,
    }
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
