//! `tessera pull URL [--study UID --out DIR]` and `tessera push URL FILES...`: a PACS over
//! DICOMweb. Without `--study`, pull lists the server's studies (QIDO-RS); with it, retrieves
//! the study's CT series (WADO-RS) into a new folder, as a set. Push stores files (STOW-RS).
//! Credentials come from the environment (`TESSERA_PACS_USER`/`TESSERA_PACS_PASSWORD` or
//! `TESSERA_PACS_TOKEN`), never from the command line.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use tessera_pacs::{Auth, Progress, Server, StudyQuery};

#[derive(Debug, clap::Args)]
pub struct PullArgs {
    /// The DICOMweb root, e.g. http://localhost:8042/dicom-web.
    pub url: String,
    /// The study to retrieve; without it, list the studies.
    #[arg(long, value_name = "UID")]
    pub study: Option<String>,
    /// Only this series of the study (it must be CT).
    #[arg(long, value_name = "UID", requires = "study")]
    pub series: Option<String>,
    /// The folder to retrieve into (new or empty).
    #[arg(long, value_name = "DIR", requires = "study")]
    pub out: Option<PathBuf>,
    /// When listing: only patients whose name matches (DICOM wildcards, e.g. 'DOE*').
    #[arg(long, value_name = "NAME")]
    pub patient: Option<String>,
}

#[derive(Debug, clap::Args)]
pub struct PushArgs {
    /// The DICOMweb root, e.g. http://localhost:8042/dicom-web.
    pub url: String,
    /// DICOM files, or folders whose DICOM files are all sent.
    #[arg(required = true, value_name = "FILES")]
    pub paths: Vec<PathBuf>,
}

fn server(url: &str) -> anyhow::Result<Server> {
    Ok(Server::new(url, Auth::from_env()?)?)
}

pub fn pull(args: &PullArgs) -> anyhow::Result<()> {
    let server = server(&args.url)?;
    let Some(study) = &args.study else {
        return list(&server, args);
    };
    let Some(out) = &args.out else {
        anyhow::bail!("give --out DIR: the folder to retrieve the study into");
    };
    let cancel = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let on_interrupt = std::sync::Arc::clone(&cancel);
    // A second handler cannot be installed (tests call this twice); Ctrl-C then just exits.
    let _ = ctrlc::set_handler(move || {
        on_interrupt.store(true, std::sync::atomic::Ordering::Relaxed);
    });
    let cancelled = || cancel.load(std::sync::atomic::Ordering::Relaxed);
    let mut shown = 0u64;
    let mut progress = |p: &Progress| {
        if p.bytes >= shown + (16 << 20) || p.series_done == p.series_total {
            shown = p.bytes;
            eprintln!(
                "series {}/{}: {:.1} MiB received",
                (p.series_done + 1).min(p.series_total),
                p.series_total,
                p.bytes as f64 / f64::from(1u32 << 20)
            );
        }
    };
    let retrieved = server
        .retrieve_ct(
            study,
            args.series.as_deref(),
            out,
            &cancelled,
            &mut progress,
        )
        .with_context(|| format!("retrieving study {study}; nothing was written"))?;
    println!(
        "{}: {} file(s), {} CT series, {:.1} MiB",
        retrieved.dir.display(),
        retrieved.files,
        retrieved.series.len(),
        retrieved.bytes as f64 / f64::from(1u32 << 20)
    );
    Ok(())
}

fn list(server: &Server, args: &PullArgs) -> anyhow::Result<()> {
    let query = StudyQuery {
        patient_name: args.patient.clone(),
        ..StudyQuery::default()
    };
    let studies = server.search_studies(&query)?;
    println!("{} study(ies) on {}", studies.len(), server.base_url());
    for s in &studies {
        println!(
            "{}  {}  {}  {}  [{}]  {}",
            s.study_uid,
            s.study_date,
            s.patient_name,
            s.patient_id,
            s.modalities.join(","),
            s.description
        );
    }
    Ok(())
}

pub fn push(args: &PushArgs) -> anyhow::Result<()> {
    let server = server(&args.url)?;
    let mut files = Vec::new();
    for path in &args.paths {
        collect(path, &mut files)?;
    }
    if files.is_empty() {
        anyhow::bail!("no DICOM files in {:?}", args.paths);
    }
    let stored = server.store_files(&files)?;
    println!(
        "{}: stored {} of {} file(s)",
        server.base_url(),
        stored.stored.len(),
        stored.sent
    );
    Ok(())
}

/// `path` if it is a file, else the DICOM files under it (sorted, for a stable order).
fn collect(path: &Path, files: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    if !path.is_dir() {
        files.push(path.to_path_buf());
        return Ok(());
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
        .with_context(|| format!("reading {}", path.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for entry in entries {
        if entry.is_dir() {
            collect(&entry, files)?;
        } else if tessera_dicom::io::is_dicom_file(&entry) {
            files.push(entry);
        }
    }
    Ok(())
}
