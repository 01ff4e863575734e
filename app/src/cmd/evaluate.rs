//! `tessera evaluate`: FROC and CPM of detections against phantom truth or LIDC readers.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use tessera_core::cases::{CaseTable, Marked, case_table};
use tessera_core::evaluate::{FP_RATES, Scan, Target, froc};
use tessera_core::phantom::Truth;
use tessera_core::report::DetectionReport;

#[derive(Debug, clap::Args)]
pub struct EvaluateArgs {
    /// `DET.json=TRUTH.json`: a run on a phantom and its truth.json (repeatable).
    #[arg(long = "phantom", value_name = "DET=TRUTH")]
    pub phantom: Vec<String>,
    /// `DET.json=CASE_DIR`: a run on a LIDC-IDRI case; targets are nodules of 3 mm or more that
    /// at least `--min-readers` outlined, other marks are ignored (as LUNA16 does). Repeatable.
    #[arg(long = "lidc", value_name = "DET=CASE")]
    pub lidc: Vec<String>,
    /// Readers (of 4) who must have outlined a LIDC nodule for it to be a target.
    #[arg(long, default_value_t = 3, value_name = "N")]
    pub min_readers: usize,
    /// Print JSON instead of text (with --cases, each case's table under `cases`).
    #[arg(long)]
    pub json: bool,
    /// For each LIDC case: every reader-marked nodule (readers, size, best score and rank,
    /// hit or miss) and every false positive at the threshold (inside or outside the lungs).
    /// Ranks count every detection in det.json: run detect with a low --score-threshold.
    #[arg(long)]
    pub cases: bool,
    /// The threshold of --cases (default: the one the run used).
    #[arg(long, value_name = "SCORE", value_parser = super::flags::score, requires = "cases")]
    pub threshold: Option<f32>,
}

pub fn run(args: &EvaluateArgs) -> anyhow::Result<()> {
    let mut scans = Vec::new();
    let mut cases = Vec::new();
    for pair in &args.phantom {
        let (det, truth) = split(pair)?;
        let truth: Truth = serde_json::from_slice(
            &std::fs::read(&truth).with_context(|| format!("reading {}", truth.display()))?,
        )
        .with_context(|| format!("{} is not a phantom truth.json", truth.display()))?;
        let targets = truth.nodules.iter().map(Target::from).collect();
        scans.push(scan(&det, targets, Vec::new(), &truth.series_uid)?);
    }
    for pair in &args.lidc {
        let (det, case) = split(pair)?;
        let (volume, _) = tessera_dicom::study::open(&case, None, Default::default())
            .with_context(|| format!("opening {}", case.display()))?;
        let xml = tessera_dicom::lidc::find_xml(&case)
            .with_context(|| format!("no LIDC reader XML under {}", case.display()))?;
        let reads = tessera_dicom::lidc::read(&xml, &volume.geometry, &volume.info.series_uid)?;
        let (mut targets, mut ignore) = (Vec::new(), Vec::new());
        let groups = tessera_dicom::lidc::consensus(&reads, tessera_dicom::lidc::SAME_NODULE_MM);
        if args.cases {
            let (name, table) = case_of(&det, &case, &groups, args.threshold)?;
            if !args.json {
                println!("{}", table.to_markdown(&name));
            }
            cases.push(serde_json::json!({ "case": name, "table": table }));
        }
        for g in groups {
            let t = Target {
                center_lps_mm: g.center_lps_mm,
                diameter_mm: g.diameter_mm,
            };
            if g.outlined && g.diameter_mm >= 3.0 && g.readers >= args.min_readers {
                targets.push(t);
            } else {
                ignore.push(t);
            }
        }
        scans.push(scan(&det, targets, ignore, &volume.info.series_uid)?);
    }
    anyhow::ensure!(
        !scans.is_empty(),
        "nothing to evaluate: give --phantom DET=TRUTH or --lidc DET=CASE"
    );
    let result = froc(&scans);
    if args.json {
        let mut value = serde_json::to_value(&result)?;
        if let (true, Some(fields)) = (args.cases, value.as_object_mut()) {
            fields.insert("cases".into(), cases.into());
        }
        println!("{}", serde_json::to_string_pretty(&value)?);
        return Ok(());
    }
    println!("{} scan(s), {} target(s)", result.scans, result.targets);
    println!(
        "| FP per scan | {} | CPM |",
        FP_RATES.map(|r| r.to_string()).join(" | ")
    );
    println!("|---|{}---|", "---|".repeat(FP_RATES.len()));
    println!(
        "| sensitivity | {} | {:.3} |",
        result.sensitivity.map(|s| format!("{s:.3}")).join(" | "),
        result.cpm
    );
    for (name, target, score) in &result.hits {
        let [x, y, z] = target.center_lps_mm;
        match score {
            Some(s) => println!(
                "  found  {name}: {:.1} mm at [{x:.1}, {y:.1}, {z:.1}], best score {s:.3}",
                target.diameter_mm
            ),
            None => println!(
                "  MISSED {name}: {:.1} mm at [{x:.1}, {y:.1}, {z:.1}]",
                target.diameter_mm
            ),
        }
    }
    Ok(())
}

/// `--cases`: the case's name and table, every reader mark counted.
fn case_of(
    det: &Path,
    case: &Path,
    groups: &[tessera_dicom::lidc::ConsensusNodule],
    threshold: Option<f32>,
) -> anyhow::Result<(String, CaseTable)> {
    let report = DetectionReport::read_json(det)?;
    let marked: Vec<Marked> = groups
        .iter()
        .map(|g| Marked {
            target: Target {
                center_lps_mm: g.center_lps_mm,
                diameter_mm: g.diameter_mm,
            },
            readers: g.readers,
        })
        .collect();
    let threshold = threshold.unwrap_or(report.config.score_threshold);
    let table = case_table(&report, &marked, threshold);
    let name = case.file_name().map_or_else(
        || case.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    Ok((name, table))
}

fn split(pair: &str) -> anyhow::Result<(PathBuf, PathBuf)> {
    let (a, b) = pair
        .split_once('=')
        .with_context(|| format!("'{pair}' is not DET=OTHER"))?;
    Ok((PathBuf::from(a), PathBuf::from(b)))
}

fn scan(
    det: &Path,
    targets: Vec<Target>,
    ignore: Vec<Target>,
    series_uid: &str,
) -> anyhow::Result<Scan> {
    let report = DetectionReport::read_json(det)?;
    anyhow::ensure!(
        report.series_uid == series_uid,
        "{} is a run on series {}, not {series_uid}",
        det.display(),
        report.series_uid
    );
    Ok(Scan {
        name: det.display().to_string(),
        targets,
        ignore,
        detections: report
            .detections
            .iter()
            .map(|d| (d.score, d.center_lps_mm))
            .collect(),
    })
}
