//! `tessera lidc PATH`: the LIDC-IDRI reader annotations of a case, grouped across readers.

use std::path::PathBuf;

use anyhow::Context as _;
use tessera_dicom::lidc;

#[derive(Debug, clap::Args)]
pub struct LidcArgs {
    /// A LIDC-IDRI case folder (slices and the reader XML).
    pub path: PathBuf,
    /// Reads closer than this (mm), or half a diameter, are one nodule.
    #[arg(long, default_value_t = lidc::SAME_NODULE_MM, value_name = "MM")]
    pub same_nodule_mm: f64,
}

pub fn run(args: &LidcArgs) -> anyhow::Result<()> {
    let (volume, _) = tessera_dicom::dicom::open(&args.path, None, Default::default())
        .with_context(|| format!("opening {}", args.path.display()))?;
    let xml = lidc::find_xml(&args.path)
        .with_context(|| format!("no LIDC reader XML under {}", args.path.display()))?;
    let reads = lidc::read(&xml, &volume.geometry, &volume.info.series_uid)?;
    let groups = lidc::consensus(&reads, args.same_nodule_mm);
    println!(
        "{}: {} readers, {} marks, {} nodules (LIDC-IDRI, CC BY 3.0)",
        xml.display(),
        reads.readers,
        reads.nodules.len(),
        groups.len()
    );
    for (i, g) in groups.iter().enumerate() {
        let [x, y, z] = g.center_lps_mm;
        println!(
            "  {}: {} reader(s), {}, centre LPS [{x:.1}, {y:.1}, {z:.1}] mm",
            i + 1,
            g.readers,
            if g.outlined {
                format!("outlined, {:.1} mm", g.diameter_mm)
            } else {
                "under 3 mm (point)".into()
            }
        );
    }
    Ok(())
}
