//! `tessera bench`: speed figures, printed (never asserted by tests).
//!
//! Run in release: `cargo run --release -p tessera -- bench load PATH`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context as _;
use tessera_core::phantom::{self, PhantomSpec};
use tessera_dicom::dicom;

#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub what: BenchWhat,
}

#[derive(Debug, clap::Subcommand)]
pub enum BenchWhat {
    /// Scan, sort and decode a series into a volume, several times (after one warm-up run).
    Load {
        /// A DICOM folder; the largest series in it is loaded.
        path: PathBuf,
        /// Timed runs after the warm-up; the report gives min, median and max.
        #[arg(long, default_value_t = 5, value_name = "N")]
        repeat: usize,
        /// A Python with pydicom and numpy, for the reference figure
        /// (scripts/bench_pydicom.py: the same job in pydicom); skipped, and said, without one.
        #[arg(long, default_value = "python3", value_name = "PYTHON")]
        python: PathBuf,
    },
    /// Run `tessera detect` (each in a fresh process, so allocators do not share memory) on a
    /// series: whole volume, then each patch, under each allocator.
    Detect {
        /// A DICOM folder. Without it: the demo study.
        path: Option<PathBuf>,
        /// Model folder (with model.json).
        #[arg(long, value_name = "DIR")]
        model: PathBuf,
        /// Comma-separated `XxYxZ` patches, in voxels of the model's grid.
        #[arg(
            long,
            default_value = "512x512x64,256x256x64,128x128x64",
            value_name = "XxYxZ,..."
        )]
        patches: String,
        /// Comma-separated CPU allocators, each of none, tight-arena, arena.
        #[arg(long, default_value = "none,tight-arena,arena", value_name = "LIST")]
        allocators: String,
        /// CPU threads for inference (default: all cores).
        #[arg(long, value_name = "N")]
        threads: Option<usize>,
    },
    /// Time to produce a slice image (window/level applied) after a scroll, per plane, as a
    /// slice and as thick slabs, on a series or a phantom generated in memory.
    View {
        /// A DICOM folder. Without it: a phantom of `--size`.
        path: Option<PathBuf>,
        /// Phantom size in voxels, `XxYxZ`.
        #[arg(long, default_value = "512x512x600", value_parser = crate::common::parse::parse_size, value_name = "XxYxZ")]
        size: [usize; 3],
        /// Slab thicknesses in mm, comma-separated (0: a slice), each timed in every projection.
        #[arg(
            long,
            default_value = "0,10",
            value_delimiter = ',',
            value_name = "MM,..."
        )]
        slab_mm: Vec<f64>,
    },
    /// Several detection runs in one process, as the viewer makes them: process start to the
    /// first window, then each run's set-up (resampling, sessions) and windows. A first run
    /// pays what later runs do not (loading ONNX Runtime, cold caches); this shows how much.
    Startup {
        /// A DICOM folder. Without it: the demo study.
        path: Option<PathBuf>,
        /// Runs in this process.
        #[arg(long, default_value_t = 3, value_name = "N")]
        runs: usize,
    },
    /// The lung field (core::lung) of a series on the shipped detector's grid: time and volume.
    Lungs {
        /// A DICOM folder. Without it: the demo study.
        path: Option<PathBuf>,
        /// Timed runs; the report gives the median.
        #[arg(long, default_value_t = 3, value_name = "N")]
        repeat: usize,
        /// Also write axial slices (every 16th) with the field tinted, for looking at it.
        #[arg(long, value_name = "FILE.png")]
        png: Option<PathBuf>,
    },
    /// Nodule measurements (axes, volume, type) against a phantom's truth, or (with a
    /// LIDC-IDRI case) beside the readers' outlines.
    Measure {
        /// A LIDC-IDRI case folder (slices and the reader XML). Without it: phantoms.
        path: Option<PathBuf>,
        /// Phantom seeds, comma-separated (10 nodules each, 0.7 x 0.7 x 1.25 mm voxels).
        #[arg(
            long,
            default_value = "21,22,23",
            value_delimiter = ',',
            value_name = "N,..."
        )]
        seeds: Vec<u64>,
    },
    /// Generate and write a phantom.
    Phantom {
        /// Phantom size in voxels, `XxYxZ`.
        #[arg(long, default_value = "512x512x300", value_parser = crate::common::parse::parse_size, value_name = "XxYxZ")]
        size: [usize; 3],
        /// Voxel spacing in millimetres, `x,y,z`.
        #[arg(long, default_value = "0.7,0.7,1.25", value_parser = crate::common::parse::parse_spacing, value_name = "X,Y,Z")]
        spacing: [f64; 3],
    },
}

pub fn run(args: &BenchArgs) -> anyhow::Result<()> {
    match &args.what {
        BenchWhat::Load {
            path,
            repeat,
            python,
        } => {
            let median_s = load(path, *repeat)?;
            pydicom_reference(path, *repeat, python, median_s)
        }
        BenchWhat::Phantom { size, spacing } => phantom_bench(*size, *spacing),
        BenchWhat::Measure { path, seeds } => super::measure_bench::run(path.as_deref(), seeds),
        BenchWhat::View {
            path,
            size,
            slab_mm,
        } => view_bench(path.as_deref(), *size, slab_mm),
        BenchWhat::Startup { path, runs } => startup_bench(path.as_deref(), *runs),
        BenchWhat::Lungs { path, repeat, png } => {
            lungs_bench(path.as_deref(), *repeat, png.as_deref())
        }
        BenchWhat::Detect {
            path,
            model,
            patches,
            allocators,
            threads,
        } => detect_bench(path.as_deref(), model, patches, allocators, *threads),
    }
}

/// Prints the figures; returns the median time in seconds.
fn load(path: &Path, repeat: usize) -> anyhow::Result<f64> {
    let once = || -> anyhow::Result<(f64, f64, tessera_dicom::Volume, u64)> {
        let started = Instant::now();
        let report = dicom::scan(path).with_context(|| format!("scanning {}", path.display()))?;
        let series = dicom::largest_stack(&report).context("no image series")?;
        let layout = dicom::layout(series, Default::default())?;
        let scanned_s = started.elapsed().as_secs_f64();
        let volume = dicom::decode(series, &layout)?;
        let total_s = started.elapsed().as_secs_f64();
        let bytes: u64 = series
            .files
            .iter()
            .filter_map(|f| std::fs::metadata(&f.path).ok())
            .map(|m| m.len())
            .sum();
        Ok((scanned_s, total_s, volume, bytes))
    };
    once()?; // warm the page cache: we measure decoding, not the disk
    let mut totals = Vec::with_capacity(repeat);
    let mut scans = Vec::with_capacity(repeat);
    let mut last = None;
    for _ in 0..repeat.max(1) {
        let (scan_s, total_s, volume, bytes) = once()?;
        totals.push(total_s);
        scans.push(scan_s);
        last = Some((volume, bytes));
    }
    let Some((volume, bytes)) = last else {
        return Ok(0.0);
    };
    totals.sort_by(f64::total_cmp);
    scans.sort_by(f64::total_cmp);
    let median = totals[totals.len() / 2];
    let slices = volume.geometry.size[2] as f64;
    println!(
        "load {} ({} voxels, {:.1} MB of files, {} threads)",
        path.display(),
        volume.geometry.size_label(),
        bytes as f64 / 1e6,
        rayon::current_num_threads()
    );
    println!(
        "  median of {}: {:.1} ms total ({:.1} ms scan+sort), {:.3} ms/slice, {:.0} MB/s; best {:.1} ms",
        totals.len(),
        median * 1e3,
        scans[scans.len() / 2] * 1e3,
        median * 1e3 / slices,
        bytes as f64 / 1e6 / median,
        totals[0] * 1e3
    );
    Ok(median)
}

/// Runs scripts/bench_pydicom.py on the same folder and prints its figure and the ratio.
fn pydicom_reference(
    path: &Path,
    repeat: usize,
    python: &Path,
    tessera_median_s: f64,
) -> anyhow::Result<()> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/bench_pydicom.py");
    let output = std::process::Command::new(python)
        .arg(&script)
        .arg(path)
        .args(["--repeat", &repeat.max(1).to_string()])
        .output();
    let stdout = match output {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).into_owned(),
        Ok(o) => {
            let stderr = String::from_utf8_lossy(&o.stderr);
            let last = stderr.lines().last().unwrap_or("").trim().to_string();
            println!(
                "pydicom reference not run: {} {} failed ({last}); give --python a Python with pydicom and numpy",
                python.display(),
                script.display()
            );
            return Ok(());
        }
        Err(e) => {
            println!(
                "pydicom reference not run: cannot start {}: {e}",
                python.display()
            );
            return Ok(());
        }
    };
    print!("{stdout}");
    // "... median of 7: 339.9 ms, ..."
    let median_ms = stdout
        .split("median of ")
        .nth(1)
        .and_then(|rest| rest.split(": ").nth(1))
        .and_then(|rest| rest.split(" ms").next())
        .and_then(|ms| ms.trim().parse::<f64>().ok())
        .context("reading the median from bench_pydicom.py's output")?;
    println!(
        "  tessera is {:.2}x the speed of pydicom on this folder",
        median_ms / 1e3 / tessera_median_s
    );
    Ok(())
}

fn phantom_bench(size: [usize; 3], spacing_mm: [f64; 3]) -> anyhow::Result<()> {
    let spec = PhantomSpec {
        size,
        spacing_mm,
        ..PhantomSpec::default()
    };
    let started = Instant::now();
    let made = phantom::generate(&spec)?;
    let generated_s = started.elapsed().as_secs_f64();
    let dir = std::env::temp_dir().join(format!("tessera-bench-phantom-{}", std::process::id()));
    let written = Instant::now();
    phantom::write_series(&made, &dir)?;
    let write_s = written.elapsed().as_secs_f64();
    std::fs::remove_dir_all(&dir).with_context(|| format!("removing {}", dir.display()))?;
    println!(
        "phantom {} at {:?} mm ({} threads): generate {:.2} s, write {:.2} s ({} files)",
        tessera_dicom::volume::format_size(size),
        spacing_mm,
        rayon::current_num_threads(),
        generated_s,
        write_s,
        size[2] + 1
    );
    Ok(())
}

fn detect_bench(
    path: Option<&Path>,
    model: &Path,
    patches: &str,
    allocators: &str,
    threads: Option<usize>,
) -> anyhow::Result<()> {
    let study = crate::common::demo::study_or_demo(path)?;
    // The children decode the series; here the headers give the size.
    let size = dicom::open_geometry(&study, None, Default::default())?.size;
    // A patch at least as large as the volume: the whole-volume reference.
    let whole = size.map(|n| n.div_ceil(2) * 2);
    let mut runs: Vec<(String, [usize; 3])> = vec![("whole".into(), whole)];
    for p in patches.split(',').filter(|p| !p.trim().is_empty()) {
        let patch = crate::common::parse::parse_size(p.trim()).map_err(anyhow::Error::msg)?;
        runs.push((p.trim().to_string(), patch));
    }
    let exe = std::env::current_exe().context("finding the tessera executable")?;
    let out = std::env::temp_dir().join(format!("tessera-bench-{}.json", std::process::id()));
    println!(
        "detect bench on {} ({} voxels), model {}",
        study.display(),
        tessera_dicom::volume::format_size(size),
        model.display()
    );
    println!(
        "{:<16} {:<12} {:>8} {:>10} {:>12} {:>12} {:>14}",
        "patch", "allocator", "windows", "recompute", "inference s", "Mvoxel/s", "peak RSS MiB"
    );
    for allocator in allocators
        .split(',')
        .map(str::trim)
        .filter(|a| !a.is_empty())
    {
        for (label, patch) in &runs {
            let mut command =
                super::sweep::detect_command(&exe, &study, model, *patch, whole, threads, &out);
            command.args(["--allocator", allocator]);
            let result = command.output().context("running tessera detect")?;
            if !result.status.success() {
                anyhow::bail!(
                    "{label} / {allocator}: {}",
                    String::from_utf8_lossy(&result.stderr).trim()
                );
            }
            let report = tessera_core::report::DetectionReport::read_json(&out)?;
            let voxels = size.iter().product::<usize>() as f64;
            println!(
                "{:<16} {:<12} {:>8} {:>10.3} {:>12.2} {:>12.1} {:>14.0}",
                label,
                allocator,
                report.stats.windows,
                report.plan.recompute_factor,
                report.stats.inference_s,
                voxels / report.stats.inference_s / 1e6,
                report.stats.memory.peak_memory_bytes as f64 / (1024.0 * 1024.0)
            );
        }
    }
    let _ = std::fs::remove_file(&out);
    Ok(())
}

fn startup_bench(path: Option<&Path>, runs: usize) -> anyhow::Result<()> {
    use tessera_core::pipeline::{self, Event};
    use tessera_plan::device::CancelToken;
    use tessera_plan::model::Model;
    use tessera_plan::request::DetectConfig;
    let study = crate::common::demo::study_or_demo(path)?;
    let model = Model::load(&tessera_plan::model::default_detector()?)?;
    let loading = Instant::now();
    let (volume, _) = dicom::open(&study, None, Default::default())
        .with_context(|| format!("opening {}", study.display()))?;
    let load_s = loading.elapsed().as_secs_f64();
    let config = DetectConfig::defaults_for(&model);
    println!(
        "{} runs of {} on {} ({} voxels, loaded in {load_s:.2} s), patch {}, {} threads",
        runs,
        model.card.name,
        study.display(),
        volume.geometry.size_label(),
        tessera_dicom::volume::format_size(config.tile.patch),
        config.threads
    );
    println!(
        "{:<5} {:>16} {:>10} {:>10}  windows s",
        "run", "to 1st window s", "set-up s", "total s"
    );
    for run in 1..=runs.max(1) {
        let started = Instant::now();
        let mut first_window_at = None;
        let mut windows: Vec<f64> = Vec::new();
        pipeline::detect(
            &volume,
            &model,
            &config,
            &CancelToken::new(),
            &mut |e| match e {
                Event::WindowStarted { .. } if first_window_at.is_none() => {
                    first_window_at = Some((started.elapsed(), crate::process_age()));
                }
                Event::WindowFinished { elapsed_s, .. } => windows.push(*elapsed_s),
                _ => {}
            },
        )?;
        let total_s = started.elapsed().as_secs_f64();
        let (setup, since_process) = first_window_at.context("the run had no window")?;
        let listed: Vec<String> = windows.iter().map(|s| format!("{s:.2}")).collect();
        println!(
            "{:<5} {:>16.2} {:>10.2} {:>10.2}  {}",
            run,
            since_process.as_secs_f64(),
            setup.as_secs_f64(),
            total_s,
            listed.join(" ")
        );
    }
    println!(
        "  (to 1st window: since the process started; set-up: since the run started; windows in plan order)"
    );
    Ok(())
}

fn lungs_bench(path: Option<&Path>, repeat: usize, png: Option<&Path>) -> anyhow::Result<()> {
    use tessera_maps::lung;
    use tessera_plan::model::Model;
    let study = crate::common::demo::study_or_demo(path)?;
    let model = Model::load(&tessera_plan::model::default_detector()?)?;
    let (volume, _) = dicom::open(&study, None, Default::default())
        .with_context(|| format!("opening {}", study.display()))?;
    let resampled = tessera_plan::request::resample_for(&volume, &model)?;
    let grid = resampled.as_ref().unwrap_or(&volume);
    let mut times = Vec::new();
    let mut field = None;
    for _ in 0..repeat.max(1) {
        let started = Instant::now();
        field = Some(lung::segment(&grid.voxels, grid.geometry.spacing_mm));
        times.push(started.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    let field = field.context("no run")?;
    println!(
        "lung field of {} on {} voxels ({} threads): median of {} {:.3} s, {:.0} ml",
        study.display(),
        grid.geometry.size_label(),
        rayon::current_num_threads(),
        times.len(),
        times[times.len() / 2],
        field.volume_ml()
    );
    if let Some(png) = png {
        write_lung_montage(grid, &field, png)?;
        println!("  slices with the field tinted: {}", png.display());
    }
    Ok(())
}

/// Every 16th axial slice side by side, lung window, the field tinted green.
fn write_lung_montage(
    grid: &tessera_dicom::Volume,
    field: &tessera_maps::lung::LungField,
    path: &Path,
) -> anyhow::Result<()> {
    let [nx, ny, nz] = grid.geometry.size;
    let zs: Vec<usize> = (0..nz).step_by(16).collect();
    let per_row = 6;
    let rows = zs.len().div_ceil(per_row);
    let (width, height) = (nx * per_row.min(zs.len()), ny * rows);
    let mut rgb = vec![0u8; width * height * 3];
    for (k, &z) in zs.iter().enumerate() {
        let (ox, oy) = ((k % per_row) * nx, (k / per_row) * ny);
        let mask = field.axial(z).unwrap_or(&[]);
        for y in 0..ny {
            for x in 0..nx {
                let hu = grid.voxels.hu_at([x, y, z]).unwrap_or(-1000.0);
                let g = (((hu + 1350.0) / 1500.0).clamp(0.0, 1.0) * 255.0) as u8;
                let inside = mask.get(y * nx + x) == Some(&1);
                let at = ((oy + y) * width + ox + x) * 3;
                rgb[at..at + 3].copy_from_slice(&if inside {
                    [g / 2, g / 2 + 100, g / 2]
                } else {
                    [g, g, g]
                });
            }
        }
    }
    let mut bytes = Vec::new();
    image::ImageEncoder::write_image(
        image::codecs::png::PngEncoder::new(&mut bytes),
        &rgb,
        width as u32,
        height as u32,
        image::ExtendedColorType::Rgb8,
    )
    .context("encoding the PNG")?;
    tessera_dicom::io::write_atomic(path, &bytes)
        .with_context(|| format!("writing {}", path.display()))
}

fn view_bench(path: Option<&Path>, size: [usize; 3], slabs_mm: &[f64]) -> anyhow::Result<()> {
    use tessera_dicom::view::{Plane, Slab, SlabMode, WindowLevel, slab_image};
    let volume = match path {
        Some(path) => {
            dicom::open(path, None, Default::default())
                .with_context(|| format!("opening {}", path.display()))?
                .0
        }
        None => {
            let spec = PhantomSpec {
                size,
                spacing_mm: [0.7, 0.7, 0.6],
                ..PhantomSpec::default()
            };
            phantom::generate(&spec)?.volume
        }
    };
    let g = &volume.geometry;
    println!(
        "images of {} ({} voxels, {:.2} x {:.2} x {:.2} mm), lung window, {} thread(s); the image only (the viewer then uploads it as a texture):",
        path.map_or("a phantom".into(), |p| p.display().to_string()),
        g.size_label(),
        g.spacing_mm[0],
        g.spacing_mm[1],
        g.spacing_mm[2],
        rayon::current_num_threads()
    );
    for plane in [Plane::Axial, Plane::Coronal, Plane::Sagittal] {
        let n = g.size[plane.normal_axis()];
        let indices: Vec<usize> = (0..50).map(|i| i * n / 50).collect();
        for &thickness_mm in slabs_mm {
            let modes: &[SlabMode] = if thickness_mm > 0.0 {
                &SlabMode::ALL
            } else {
                &[SlabMode::Mip]
            };
            for &mode in modes {
                let slab = Slab { thickness_mm, mode };
                let started = Instant::now();
                for &index in &indices {
                    slab_image(&volume.voxels, g, plane, index, slab, WindowLevel::LUNG)
                        .context("slice out of range")?;
                }
                let per_image_ms = started.elapsed().as_secs_f64() * 1e3 / indices.len() as f64;
                let what = if thickness_mm > 0.0 {
                    format!(
                        "{} slab {thickness_mm} mm ({} planes)",
                        mode.label(),
                        2 * slab.half_planes(g, plane) + 1
                    )
                } else {
                    "slice".to_string()
                };
                println!("  {plane:?} {what}: {per_image_ms:.2} ms per image");
            }
        }
    }
    Ok(())
}
