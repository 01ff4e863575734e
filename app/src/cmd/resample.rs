//! `tessera resample PATH --spacing-mm S --out FILE.npy`: the volume exactly as the pipeline
//! feeds it to a model (loaded, resampled to the card's spacing), for `training/`.
//!
//! Writes `FILE.npy` (int16 HU, `[z, y, x]`, rounded; with `--float32` the pipeline's own
//! float values) and `FILE.json` beside it: the grid's size, spacing and `world_from_voxel`,
//! and the LIDC reader nodules when the folder has them.

use std::path::PathBuf;

use anyhow::Context as _;
use serde_json::json;
use tessera_dicom::{lidc, npy};
use tessera_plan::resample::resample;

use super::{flags, outputs};

#[derive(Debug, clap::Args)]
pub struct ResampleArgs {
    /// A DICOM file or folder.
    pub path: PathBuf,
    /// Target spacing, mm: one value (isotropic) or `x,y,z`.
    #[arg(long, value_parser = flags::spacing_mm, value_name = "MM|X,Y,Z")]
    pub spacing_mm: [f64; 3],
    /// The `.npy` file to write (its `.json` sidecar goes beside it; both or neither).
    #[arg(long, value_name = "FILE.npy")]
    pub out: PathBuf,
    /// Interpolate over missing or unreadable slices instead of refusing the series (the
    /// sidecar lists the filled slices).
    #[arg(long)]
    pub allow_gaps: bool,
    /// Write inside the input folder or over an existing DICOM file (never over an input file).
    #[arg(long)]
    pub force: bool,
    /// HU as float32, exactly the values the pipeline feeds a model (for parity with another
    /// framework), instead of int16 rounded.
    #[arg(long)]
    pub float32: bool,
}

pub fn run(args: &ResampleArgs) -> anyhow::Result<()> {
    let sidecar_path = args.out.with_extension("json");
    if sidecar_path == args.out {
        anyhow::bail!(
            "--out {} would be overwritten by its own .json sidecar: give the volume a .npy name",
            args.out.display()
        );
    }
    let options = tessera_dicom::dicom::LoadOptions {
        allow_gaps: args.allow_gaps,
    };
    let (volume, scan) = tessera_dicom::study::open(&args.path, None, options)
        .with_context(|| format!("opening {}", args.path.display()))?;
    outputs::check(
        &[&args.out, &sidecar_path],
        &outputs::inputs_of(&args.path, &scan),
        args.force,
    )?;
    let resampled = resample(&volume, args.spacing_mm)?;
    let grid = resampled.as_ref().unwrap_or(&volume);
    let hu = grid.voxels.to_f32();
    let volume_bytes = if args.float32 {
        npy::encode_f32(&hu)
    } else {
        npy::encode_i16(
            &hu.mapv(|v| v.round().clamp(f32::from(i16::MIN), f32::from(i16::MAX)) as i16),
        )
    };
    let lidc_nodules = match lidc::find_xml(&args.path) {
        Some(xml) => {
            let reads = lidc::read(&xml, &volume.geometry, &volume.info.series_uid)?;
            lidc::consensus(&reads, lidc::SAME_NODULE_MM)
                .iter()
                .map(|n| {
                    json!({
                        "center_lps_mm": n.center_lps_mm,
                        "diameter_mm": n.diameter_mm,
                        "readers": n.readers,
                        "outlined": n.outlined,
                    })
                })
                .collect()
        }
        None => Vec::new(),
    };
    let sidecar = json!({
        "source": args.path,
        "series_uid": volume.info.series_uid,
        "size": grid.geometry.size,
        "spacing_mm": grid.geometry.spacing_mm,
        "world_from_voxel": grid.geometry.world_from_voxel,
        "lidc_nodules": lidc_nodules,
        "warnings": volume.warnings,
        "filled_slices": volume.filled_slices,
    });
    let sidecar_text = serde_json::to_string_pretty(&sidecar)?;
    tessera_dicom::io::write_set(&[
        (&args.out, &volume_bytes),
        (&sidecar_path, sidecar_text.as_bytes()),
    ])?;
    println!(
        "{} -> {} ({}, {:?} mm)",
        args.path.display(),
        args.out.display(),
        grid.geometry.size_label(),
        grid.geometry.spacing_mm
    );
    Ok(())
}
