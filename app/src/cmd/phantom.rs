//! `tessera phantom`: write a synthetic chest CT with ground truth; and the cached demo study.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context as _;
use tessera_core::phantom::{self, PhantomSpec};

use crate::common::demo::{check_phantom_folder, write_folder};
use crate::common::parse::{parse_size, parse_spacing};

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
    /// Masses to place after the nodules (solid or part-solid, 20-50 mm, fewer mm in a small
    /// field of view), 0 to 10, listed in truth.json with them.
    #[arg(long, default_value_t = 0, value_name = "N", value_parser = clap::value_parser!(u16).range(0..=10))]
    pub masses: u16,
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
        masses: usize::from(args.masses),
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
        tessera_dicom::volume::format_size(spec.size),
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
