//! `tessera phantom`: write a synthetic chest CT with ground truth; and the cached demo study.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context as _;
use tessera_core::phantom::{self, PhantomSpec};

#[derive(Debug, clap::Args)]
pub struct PhantomArgs {
    /// Folder to write the series and truth.json into: a new or empty folder, or a previous
    /// phantom's (which is replaced as a whole). Anything else is refused.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// Random seed: the same seed (and size, spacing, nodules, noise) gives the same bytes.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub seed: u64,
    /// Size in voxels, `XxYxZ` (columns x rows x slices).
    #[arg(long, default_value = "512x512x300", value_parser = parse_size, value_name = "XxYxZ")]
    pub size: [usize; 3],
    /// Voxel spacing in millimetres, `x,y,z` (z is slice spacing and thickness).
    #[arg(long, default_value = "0.7,0.7,1.25", value_parser = parse_spacing, value_name = "X,Y,Z")]
    pub spacing: [f64; 3],
    /// Nodules to place (solid, part-solid and ground-glass, 3-30 mm), 0 to 100, listed in
    /// truth.json.
    #[arg(long, default_value_t = 6, value_name = "N", value_parser = clap::value_parser!(u16).range(0..=100))]
    pub nodules: u16,
    /// Noise standard deviation, HU (0: none; at most 1000).
    #[arg(long, default_value_t = 18.0, value_name = "HU", value_parser = parse_noise)]
    pub noise: f32,
}

fn parse_noise(text: &str) -> Result<f32, String> {
    match text.trim().parse::<f32>() {
        Ok(v) if (0.0..=1000.0).contains(&v) => Ok(v),
        _ => Err(format!("'{text}' is not a noise level from 0 to 1000 HU")),
    }
}

pub fn run(args: &PhantomArgs) -> anyhow::Result<()> {
    let spec = PhantomSpec {
        seed: args.seed,
        size: args.size,
        spacing_mm: args.spacing,
        nodules: usize::from(args.nodules),
        noise_hu: args.noise,
    };
    check_phantom_folder(&args.out).map_err(super::outputs::Refused)?;
    let started = Instant::now();
    let phantom = phantom::generate(&spec).context("generating the phantom")?;
    let generated_s = started.elapsed().as_secs_f64();
    write_folder(&phantom, &args.out)
        .with_context(|| format!("writing the phantom to {}", args.out.display()))?;
    println!(
        "phantom seed {} {} at {:?} mm: {} nodule(s) -> {} (generated in {generated_s:.2} s, written in {:.2} s)",
        spec.seed,
        tessera_core::volume::format_size(spec.size),
        spec.spacing_mm,
        phantom.truth.nodules.len(),
        args.out.display(),
        started.elapsed().as_secs_f64() - generated_s
    );
    for n in &phantom.truth.nodules {
        println!(
            "  nodule {}: {:?} {:?}, {:.1} mm at LPS [{:.1}, {:.1}, {:.1}] mm",
            n.id,
            n.kind,
            n.attachment,
            n.diameter_mm,
            n.center_lps_mm[0],
            n.center_lps_mm[1],
            n.center_lps_mm[2]
        );
    }
    Ok(())
}

/// The demo study's recipe. Bump `DEMO_VERSION` when the phantom's output changes.
pub fn demo_spec() -> PhantomSpec {
    PhantomSpec {
        seed: 7,
        size: [512, 512, 160],
        spacing_mm: [0.7, 0.7, 2.0],
        nodules: 6,
        noise_hu: 18.0,
    }
}
const DEMO_VERSION: u32 = 1;

/// `path`, or the demo study when there is none (every command's default).
pub fn study_or_demo(path: Option<&Path>) -> anyhow::Result<PathBuf> {
    match path {
        Some(p) => Ok(p.to_path_buf()),
        None => demo_study_dir().context("preparing the demo study"),
    }
}

/// The demo study as a DICOM folder in the user's cache, written on first use.
pub fn demo_study_dir() -> anyhow::Result<PathBuf> {
    let dir = cache_root().join(format!("demo-v{DEMO_VERSION}-seed{}", demo_spec().seed));
    if dir.join(phantom::TRUTH_FILE).is_file() {
        return Ok(dir);
    }
    eprintln!("writing the demo study to {} (once)...", dir.display());
    let phantom = phantom::generate(&demo_spec()).context("generating the demo study")?;
    match write_folder(&phantom, &dir) {
        Ok(()) => Ok(dir),
        // Another process finished first: theirs is identical (same seed), use it.
        Err(_) if dir.join(phantom::TRUTH_FILE).is_file() => Ok(dir),
        Err(e) => Err(e).with_context(|| format!("writing the demo study into {}", dir.display())),
    }
}

/// Refuses a folder that holds anything but a previous phantom (or nothing).
fn check_phantom_folder(dir: &Path) -> Result<(), tessera_core::io::OutputError> {
    let refuse = |reason: String| tessera_core::io::OutputError::NotOurFolder {
        path: dir.to_path_buf(),
        reason,
    };
    let Ok(meta) = std::fs::metadata(dir) else {
        return Ok(()); // does not exist yet
    };
    if !meta.is_dir() {
        return Err(tessera_core::io::OutputError::NotAFile {
            path: dir.to_path_buf(),
            kind: "not a folder",
        });
    }
    let entries = std::fs::read_dir(dir).map_err(|e| refuse(e.to_string()))?;
    let mut names = Vec::new();
    for entry in entries {
        names.push(entry.map_err(|e| refuse(e.to_string()))?.file_name());
    }
    if names.is_empty() {
        return Ok(());
    }
    let ours = |name: &std::ffi::OsStr| {
        let name = name.to_string_lossy();
        name == phantom::TRUTH_FILE || (name.starts_with("IMG") && name.ends_with(".dcm"))
    };
    if !names.iter().any(|n| n == phantom::TRUTH_FILE) {
        return Err(refuse(format!(
            "{} entries and no {}",
            names.len(),
            phantom::TRUTH_FILE
        )));
    }
    match names.iter().find(|n| !ours(n)) {
        Some(other) => Err(refuse(format!(
            "{} is not a phantom's file",
            other.to_string_lossy()
        ))),
        None => Ok(()),
    }
}

/// Writes the phantom into a staging folder beside `dir`, then swaps it in: a half-written
/// phantom is never seen, and a previous one is replaced as a whole.
fn write_folder(phantom: &phantom::Phantom, dir: &Path) -> anyhow::Result<()> {
    let staging = dir.with_extension(format!("tmp-{}", std::process::id()));
    let result = (|| -> anyhow::Result<()> {
        phantom::write_series(phantom, &staging)?;
        if dir.exists() {
            // Checked by `check_phantom_folder`: empty or a previous phantom.
            std::fs::remove_dir_all(dir).with_context(|| format!("replacing {}", dir.display()))?;
        }
        std::fs::rename(&staging, dir).with_context(|| format!("moving into {}", dir.display()))
    })();
    if result.is_err() && staging.exists() {
        let _ = std::fs::remove_dir_all(&staging);
    }
    result
}

/// `$TESSERA_CACHE_DIR`, else `$XDG_CACHE_HOME/tessera`, else `~/.cache/tessera`.
fn cache_root() -> PathBuf {
    let from_env = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    from_env("TESSERA_CACHE_DIR")
        .or_else(|| from_env("XDG_CACHE_HOME").map(|p| p.join("tessera")))
        .or_else(|| from_env("HOME").map(|p| Path::new(&p).join(".cache").join("tessera")))
        .unwrap_or_else(|| std::env::temp_dir().join("tessera-cache"))
}

/// `512x512x64` -> `[512, 512, 64]`.
pub fn parse_size(text: &str) -> Result<[usize; 3], String> {
    let parts: Vec<&str> = text.split(['x', 'X']).collect();
    let values: Result<Vec<usize>, _> = parts.iter().map(|p| p.trim().parse::<usize>()).collect();
    match values {
        Ok(v) if v.len() == 3 && v.iter().all(|n| *n > 0) => Ok([v[0], v[1], v[2]]),
        _ => Err(format!("'{text}' is not a size like 512x512x64")),
    }
}

/// `0.7,0.7,1.25` -> `[0.7, 0.7, 1.25]`.
pub fn parse_spacing(text: &str) -> Result<[f64; 3], String> {
    let values: Result<Vec<f64>, _> = text.split(',').map(|p| p.trim().parse::<f64>()).collect();
    match values {
        Ok(v) if v.len() == 3 && v.iter().all(|s| s.is_finite() && *s > 0.0) => {
            Ok([v[0], v[1], v[2]])
        }
        _ => Err(format!(
            "'{text}' is not a spacing like 0.7,0.7,1.25 (mm, all positive)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_and_spacings_parse_or_explain() {
        assert_eq!(parse_size("512x512x64"), Ok([512, 512, 64]));
        assert!(parse_size("512x512").unwrap_err().contains("512x512x64"));
        assert!(parse_size("0x1x1").is_err());
        assert_eq!(parse_spacing("0.7,0.7,1.25"), Ok([0.7, 0.7, 1.25]));
        assert!(parse_spacing("0.7,-1,1").is_err());
    }
}
