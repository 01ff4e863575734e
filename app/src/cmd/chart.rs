//! The sweep's chart: peak memory and inference time against window voxels, with the fitted
//! memory model and the budget line. Drawn twice, as SVG and PNG, with the embedded font.

use std::path::Path;

use anyhow::Context as _;
use plotters::prelude::*;
use tessera_plan::memory::forecast::{HeldMemory, MemoryForecast};
use tessera_plan::memory::line::MemoryModel;

/// One run on the chart.
#[derive(Debug, Clone, PartialEq)]
pub struct ChartPoint {
    /// The run's patch, written beside its points.
    pub patch: [usize; 3],
    pub largest_window_voxels: usize,
    pub peak_bytes: u64,
    pub inference_s: f64,
}

/// What the chart draws: the runs, the memory the process held before the first and what the
/// runs hold for the study (the predicted bound adds to both).
#[derive(Debug, Clone, PartialEq)]
pub struct ChartData {
    pub points: Vec<ChartPoint>,
    pub baseline_bytes: u64,
    pub held: HeldMemory,
}

static FONT: &[u8] = include_bytes!("../../../assets/fonts/DejaVuSansMono.ttf");

pub fn memory_chart(
    data: &ChartData,
    memory: Option<&MemoryModel>,
    budget: Option<u64>,
    out: &Path,
) -> anyhow::Result<()> {
    // Registering twice is harmless: the second call replaces the first.
    plotters::style::register_font("sans-serif", FontStyle::Normal, FONT)
        .map_err(|_| anyhow::anyhow!("the embedded chart font is not a valid TrueType font"))?;
    let svg = out.join("memory.svg");
    draw(
        &SVGBackend::new(&svg, (1100, 480)).into_drawing_area(),
        data,
        memory,
        budget,
    )
    .with_context(|| format!("drawing {}", svg.display()))?;
    let png = out.join("memory.png");
    draw(
        &BitMapBackend::new(&png, (1100, 480)).into_drawing_area(),
        data,
        memory,
        budget,
    )
    .with_context(|| format!("drawing {}", png.display()))?;
    Ok(())
}

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, plotters::coord::Shift>,
    data: &ChartData,
    memory: Option<&MemoryModel>,
    budget: Option<u64>,
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow::anyhow!("{e:?}");
    root.fill(&WHITE).map_err(err)?;
    let (left, right) = root.split_horizontally(560);
    let points: Vec<(f64, f64, f64)> = data
        .points
        .iter()
        .map(|p| {
            (
                p.largest_window_voxels as f64 / 1e6,
                p.peak_bytes as f64 / GIB,
                p.inference_s,
            )
        })
        .collect();
    let labels: Vec<String> = data
        .points
        .iter()
        .map(|p| tessera_dicom::volume::format_size(p.patch))
        .collect();
    let max_x = points.iter().map(|p| p.0).fold(0.0, f64::max) * 1.1 + 1e-9;
    let budget_gib = budget.map(|b| b as f64 / GIB);
    let max_mem = points
        .iter()
        .map(|p| p.1)
        .chain(budget_gib)
        .fold(0.0, f64::max)
        * 1.15
        + 1e-9;
    let mut chart = ChartBuilder::on(&left)
        .caption("Peak memory per window", ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..max_x, 0.0..max_mem)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("largest window (million voxels)")
        .y_desc("peak memory (GiB)")
        .draw()
        .map_err(err)?;
    chart
        .draw_series(
            points
                .iter()
                .map(|p| Circle::new((p.0, p.1), 5, BLUE.filled())),
        )
        .map_err(err)?
        .label("measured")
        .legend(|(x, y)| Circle::new((x + 10, y), 5, BLUE.filled()));
    chart
        .draw_series(patch_labels(&points, &labels, (max_x, max_mem), |p| {
            (p.0, p.1)
        }))
        .map_err(err)?;
    if let Some(m) = memory {
        let forecast = MemoryForecast {
            model: *m,
            baseline_bytes: data.baseline_bytes,
            held: data.held,
        };
        let line = (0..=50).map(|i| {
            let x = max_x * f64::from(i) / 50.0;
            (x, forecast.peak_bytes((x * 1e6) as usize) as f64 / GIB)
        });
        chart
            .draw_series(LineSeries::new(line, BLACK))
            .map_err(err)?
            .label("predicted bound")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLACK));
    }
    if let Some(b) = budget_gib {
        chart
            .draw_series(LineSeries::new([(0.0, b), (max_x, b)], RED.stroke_width(2)))
            .map_err(err)?
            .label("budget")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], RED));
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(err)?;

    time_panel(&right, &points, &labels, max_x)?;
    root.present().map_err(err)?;
    Ok(())
}

/// The right panel: inference time per run, each point labelled with its patch.
fn time_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    points: &[(f64, f64, f64)],
    labels: &[String],
    max_x: f64,
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow::anyhow!("{e:?}");
    let max_t = points.iter().map(|p| p.2).fold(0.0, f64::max) * 1.15 + 1e-9;
    let mut chart = ChartBuilder::on(area)
        .caption("Inference time", ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..max_x, 0.0..max_t)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("largest window (million voxels)")
        .y_desc("inference time (s)")
        .draw()
        .map_err(err)?;
    chart
        .draw_series(
            points
                .iter()
                .map(|p| TriangleMarker::new((p.0, p.2), 6, GREEN.filled())),
        )
        .map_err(err)?;
    chart
        .draw_series(patch_labels(points, labels, (max_x, max_t), |p| (p.0, p.2)))
        .map_err(err)?;
    Ok(())
}

/// Each point's patch written beside it: above and below in turn (close points do not print
/// over each other), and to the left of points in the right quarter (inside the chart).
/// `max` is the chart's `(x, y)` extent; `at` picks a point's coordinates.
fn patch_labels(
    points: &[(f64, f64, f64)],
    labels: &[String],
    max: (f64, f64),
    at: impl Fn(&(f64, f64, f64)) -> (f64, f64),
) -> Vec<Text<'static, (f64, f64), String>> {
    use plotters::style::text_anchor::{HPos, Pos, VPos};
    points
        .iter()
        .zip(labels)
        .enumerate()
        .map(|(i, (p, label))| {
            let (x, y) = at(p);
            let (h, dx) = if x > 0.75 * max.0 {
                (HPos::Right, -0.015 * max.0)
            } else {
                (HPos::Left, 0.015 * max.0)
            };
            let (v, dy) = if i % 2 == 0 {
                (VPos::Bottom, 0.02 * max.1)
            } else {
                (VPos::Top, -0.02 * max.1)
            };
            let style = ("sans-serif", 12)
                .into_font()
                .color(&BLACK)
                .pos(Pos::new(h, v));
            Text::new(label.clone(), (x + dx, y + dy), style)
        })
        .collect()
}
