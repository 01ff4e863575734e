//! `tessera bench measure`: the nodule measurements ([`tessera_core::measure`]) against
//! what is known of each nodule: a phantom's truth (diameter, volume, type), or the LIDC-IDRI
//! readers' outlines (their in-plane extents). Figures, printed; the exact checks are tests.

use std::path::Path;
use std::time::Instant;

use anyhow::Context as _;
use tessera_core::measure::{Method, NoduleType, measure};
use tessera_core::phantom::{self, PhantomSpec, structures::NoduleKind};
use tessera_dicom::lidc;
use tessera_dicom::volume::StudyVoxelBox;

/// A LIDC-IDRI case's outlined nodules, or (without `path`) the nodules of phantoms of
/// `seeds` on a screening protocol's voxels.
pub fn run(path: Option<&Path>, seeds: &[u64]) -> anyhow::Result<()> {
    match path {
        Some(path) => lidc_case(path),
        None => phantoms(seeds),
    }
}

fn phantoms(seeds: &[u64]) -> anyhow::Result<()> {
    println!(
        "seed id type diameter_mm attachment | method measured_type mean_mm (error) long short | volume_mm3 (true) | mean_hu | ms"
    );
    let mut rows = Vec::new();
    for &seed in seeds {
        let spec = PhantomSpec {
            seed,
            size: [400, 400, 160],
            spacing_mm: [0.7, 0.7, 1.25],
            nodules: 10,
            noise_hu: 18.0,
            masses: 0,
        };
        let p = phantom::generate(&spec)?;
        let v = &p.volume;
        let field = tessera_maps::lung::segment(&v.voxels, v.geometry.spacing_mm);
        let in_lung = |at: [usize; 3]| field.is_lung(at);
        for n in &p.truth.nodules {
            let started = Instant::now();
            let m = measure(&v.voxels, &v.geometry, &n.box_voxel, Some(&in_lung));
            let ms = started.elapsed().as_secs_f64() * 1e3;
            let true_mm3 = std::f64::consts::PI / 6.0 * n.diameter_mm.powi(3);
            let error = m.mean_diameter_mm - n.diameter_mm;
            println!(
                "{seed} {} {:?} {:.1} {:?} | {:?} {} {:.1} ({error:+.1}) {:.1} {:.1} | {} ({true_mm3:.0}) | {} | {ms:.0}",
                n.id,
                n.kind,
                n.diameter_mm,
                n.attachment,
                m.method,
                m.nodule_type.map_or("-", NoduleType::label),
                m.mean_diameter_mm,
                m.axes.long_axis_mm,
                m.axes.short_axis_mm,
                m.volume_mm3.map_or("-".into(), |v| format!("{v:.0}")),
                m.mean_hu.map_or("-".into(), |v| format!("{v:.0}")),
            );
            rows.push((n.kind, n.diameter_mm, m, error));
        }
    }
    println!(
        "\nby type and size: nodules, segmented, typed right, mean |error| and largest |error| of the mean diameter (segmented ones)"
    );
    for kind in [
        NoduleKind::Solid,
        NoduleKind::PartSolid,
        NoduleKind::GroundGlass,
    ] {
        for (lo, hi) in [(0.0, 6.0), (6.0, 15.0), (15.0, f64::INFINITY)] {
            let group: Vec<_> = rows
                .iter()
                .filter(|r| r.0 == kind && r.1 >= lo && r.1 < hi)
                .collect();
            if group.is_empty() {
                continue;
            }
            let segmented: Vec<_> = group
                .iter()
                .filter(|r| r.2.method == Method::Segmented)
                .collect();
            let typed = segmented
                .iter()
                .filter(|r| r.2.nodule_type.map(NoduleType::label) == Some(kind_label(kind)))
                .count();
            let errors: Vec<f64> = segmented.iter().map(|r| r.3.abs()).collect();
            let mean = errors.iter().sum::<f64>() / errors.len().max(1) as f64;
            let max = errors.iter().copied().fold(0.0, f64::max);
            println!(
                "  {:<12} {lo:>4.0} to {hi:<4.0} mm: {:>2}, segmented {:>2}, typed right {:>2}, |error| mean {mean:.2} mm, largest {max:.2} mm",
                kind_label(kind),
                group.len(),
                segmented.len(),
                typed,
            );
        }
    }
    Ok(())
}

fn kind_label(kind: NoduleKind) -> &'static str {
    match kind {
        NoduleKind::Solid => "solid",
        NoduleKind::PartSolid => "part-solid",
        NoduleKind::GroundGlass => "ground-glass",
    }
}

/// Each nodule the readers outlined: Tessera's axes measured in the box of their outlines,
/// beside each reader's in-plane extents.
fn lidc_case(path: &Path) -> anyhow::Result<()> {
    let (volume, _) = tessera_dicom::dicom::open(path, None, Default::default())
        .with_context(|| format!("opening {}", path.display()))?;
    let xml = lidc::find_xml(path)
        .with_context(|| format!("no LIDC reader XML under {}", path.display()))?;
    let reads = lidc::read(&xml, &volume.geometry, &volume.info.series_uid)?;
    let voxel_from_world = volume
        .geometry
        .world_from_voxel
        .inverse()
        .context("the series' geometry cannot be inverted")?;
    let field = tessera_maps::lung::segment(&volume.voxels, volume.geometry.spacing_mm);
    let in_lung = |v: [usize; 3]| field.is_lung(v);
    println!(
        "{} (LIDC-IDRI, CC BY 3.0): each outlined nodule, Tessera in the box of the readers' outlines",
        path.display()
    );
    for (i, g) in lidc::consensus(&reads, lidc::SAME_NODULE_MM)
        .iter()
        .enumerate()
    {
        let outlines: Vec<_> = g.reads.iter().filter(|r| r.outlined).collect();
        if outlines.is_empty() {
            continue;
        }
        let corner = |pick: &dyn Fn(&lidc::ReaderNodule) -> [f64; 3], lower: bool| -> [f64; 3] {
            std::array::from_fn(|a| {
                let values = outlines.iter().map(|r| pick(r)[a]);
                if lower {
                    values.fold(f64::INFINITY, f64::min)
                } else {
                    values.fold(f64::NEG_INFINITY, f64::max)
                }
            })
        };
        let lo = voxel_from_world.apply(corner(&|r| r.min_lps_mm, true));
        let hi = voxel_from_world.apply(corner(&|r| r.max_lps_mm, false));
        let size = volume.geometry.size;
        let finding = StudyVoxelBox {
            min: std::array::from_fn(|a| {
                (lo[a].min(hi[a]).round().max(0.0) as usize).min(size[a] - 1)
            }),
            max: std::array::from_fn(|a| {
                ((lo[a].max(hi[a]).round() + 1.0).max(1.0) as usize).min(size[a])
            }),
        };
        let m = measure(&volume.voxels, &volume.geometry, &finding, Some(&in_lung));
        let extents: Vec<String> = outlines
            .iter()
            .map(|r| {
                let x = r.max_lps_mm[0] - r.min_lps_mm[0];
                let y = r.max_lps_mm[1] - r.min_lps_mm[1];
                format!("{} {:.1} x {:.1}", r.reader, x.max(y), x.min(y))
            })
            .collect();
        println!(
            "  nodule {} ({} reader(s)): Tessera {:?} {} long {:.1} short {:.1} mean {:.1} mm, Lung-RADS {}; readers' extents (mm): {}",
            i + 1,
            g.readers,
            m.method,
            m.nodule_type.map_or("-", NoduleType::label),
            m.axes.long_axis_mm,
            m.axes.short_axis_mm,
            m.mean_diameter_mm,
            tessera_core::lungrads::of(&m).category.label(),
            extents.join("; ")
        );
    }
    Ok(())
}
