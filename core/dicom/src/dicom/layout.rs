//! Puts the frames of one series in order and derives the volume geometry from their positions.
//!
//! Slices are sorted by ImagePositionPatient projected on the slice normal (row x column
//! direction); spacing comes from those positions, never from SliceThickness. Duplicate
//! positions are dropped and a gantry tilt is kept as a shear in `world_from_voxel`, both with a
//! warning. Nothing missing is filled in unless the caller allows gaps: uneven gaps and
//! unreadable files refuse the series by default; with [`LoadOptions::allow_gaps`] the gaps are
//! interpolated on a uniform grid and every filled slice is listed. What cannot be a volume is
//! refused.

use crate::geometry::{Affine3, Vec3, cross, dot, norm, scale, sub};
use crate::volume::{FilledSlice, Geometry, MAX_VOXELS};

use super::DicomError;
use super::scan::SeriesFiles;

/// Positions closer than this along the normal are the same slice position, mm.
const DUPLICATE_TOLERANCE_MM: f64 = 0.01;
/// Relative deviation from the typical gap above which spacing counts as uneven (1 %, as ITK).
const UNEVEN_RELATIVE: f64 = 0.01;
/// Direction cosines must be unit length and orthogonal within this.
const COSINE_TOLERANCE: f64 = 1e-2;
/// In-plane drift per mm along the normal above which the stack is tilted (0.06 degrees).
const TILT_TOLERANCE: f64 = 1e-3;

/// One frame of the series: which file and frame it comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameRef {
    pub file: usize,
    pub frame: u32,
}

/// How output slice `k` of the volume is made.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SliceSource {
    /// Exactly one input frame.
    Frame(FrameRef),
    /// `(1 - weight) * below + weight * above`: a slice that was missing from the series.
    Blend {
        below: FrameRef,
        above: FrameRef,
        weight: f64,
    },
}

/// The ordered plan for building a volume from a series, known before any pixel is decoded.
#[derive(Debug, Clone)]
pub struct SeriesLayout {
    pub geometry: Geometry,
    pub slices: Vec<SliceSource>,
    pub warnings: Vec<String>,
    /// Slices that no file provides, interpolated because the caller allowed gaps.
    pub filled: Vec<FilledSlice>,
}

/// How to treat a series with missing or unreadable slices.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoadOptions {
    /// Interpolate over gaps and unreadable files instead of refusing the series. Every filled
    /// slice is listed in the volume's warnings and `filled_slices`.
    pub allow_gaps: bool,
}

struct Positioned {
    frame: FrameRef,
    along_normal_mm: f64,
    position: Vec3,
    instance: i64,
}

/// Orders the frames of `series` and derives its geometry.
///
/// A series with unreadable files or uneven gaps is refused unless `options.allow_gaps`.
#[allow(
    clippy::too_many_lines,
    reason = "one pass over the slices, each check refusing with its own reason, in the order a reader checks them"
)]
pub fn layout(series: &SeriesFiles, options: LoadOptions) -> Result<SeriesLayout, DicomError> {
    let first = series.first();
    let name = series_name(series);
    if !series.unreadable.is_empty() && !options.allow_gaps {
        let list: Vec<String> = series
            .unreadable
            .iter()
            .map(|s| format!("{}: {}", s.path.display(), s.reason))
            .collect();
        return Err(DicomError::MissingSlices {
            series: name,
            detail: format!(
                "{} file(s) could not be read: {}",
                list.len(),
                list.join("; ")
            ),
        });
    }
    let refuse = |reason: String| DicomError::NotAVolume {
        series: name.clone(),
        reason,
    };
    let first_frame = &first.frames[0]; // invariant: headers always hold at least one frame
    let o = first_frame.orientation;
    let (row_dir, col_dir) = ([o[0], o[1], o[2]], [o[3], o[4], o[5]]);
    if (norm(row_dir) - 1.0).abs() > COSINE_TOLERANCE
        || (norm(col_dir) - 1.0).abs() > COSINE_TOLERANCE
        || dot(row_dir, col_dir).abs() > COSINE_TOLERANCE
    {
        return Err(refuse(format!(
            "ImageOrientationPatient {o:?} in {} is not two orthogonal unit vectors",
            first.path.display()
        )));
    }
    let row_dir = scale(row_dir, 1.0 / norm(row_dir));
    let col_dir = scale(col_dir, 1.0 / norm(col_dir));
    let normal = cross(row_dir, col_dir);
    // A series UID split by orientation or size: say which part this volume is.
    let mut warnings: Vec<String> = series.split_note.iter().cloned().collect();

    let [spacing_x, spacing_y] = first_frame.pixel_spacing_mm;
    let mut frames = Vec::with_capacity(series.frame_count());
    for (file_index, file) in series.files.iter().enumerate() {
        for f in &file.frames {
            if (f.pixel_spacing_mm[0] - spacing_x).abs() > 1e-3 * spacing_x
                || (f.pixel_spacing_mm[1] - spacing_y).abs() > 1e-3 * spacing_y
            {
                return Err(refuse(format!(
                    "PixelSpacing differs within the series ({} has {:?}, {} has {:?})",
                    first.path.display(),
                    first_frame.pixel_spacing_mm,
                    file.path.display(),
                    f.pixel_spacing_mm
                )));
            }
            frames.push(Positioned {
                frame: FrameRef {
                    file: file_index,
                    frame: f.frame,
                },
                along_normal_mm: dot(f.position_lps_mm, normal),
                position: f.position_lps_mm,
                instance: file.instance_number.unwrap_or(i64::MAX),
            });
        }
    }
    frames.sort_by(|a, b| {
        a.along_normal_mm
            .total_cmp(&b.along_normal_mm)
            .then(a.instance.cmp(&b.instance))
            .then(a.frame.file.cmp(&b.frame.file))
            .then(a.frame.frame.cmp(&b.frame.frame))
    });

    let before = frames.len();
    frames.dedup_by(|later, kept| {
        (later.along_normal_mm - kept.along_normal_mm).abs() < DUPLICATE_TOLERANCE_MM
    });
    if frames.len() < before {
        warnings.push(format!(
            "{} duplicate slice position(s): kept the first of each by InstanceNumber",
            before - frames.len()
        ));
    }

    // Invariant: a series has at least one file and each file one frame, so `frames` is not
    // empty (dedup keeps the first of each run).
    let origin = frames[0].position;
    if frames.len() == 1 {
        let thickness = first.info.slice_thickness_mm.filter(|t| *t > 0.0);
        let spacing_z = thickness.unwrap_or(1.0);
        warnings.push(format!(
            "single slice: z spacing {spacing_z} mm taken from {}",
            if thickness.is_some() {
                "SliceThickness"
            } else {
                "a default (no SliceThickness)"
            }
        ));
        return Ok(SeriesLayout {
            geometry: geometry(
                first,
                [spacing_x, spacing_y, spacing_z],
                row_dir,
                col_dir,
                scale(normal, spacing_z),
                origin,
                1,
            ),
            slices: vec![SliceSource::Frame(frames[0].frame)],
            warnings,
            filled: Vec::new(),
        });
    }

    let gaps: Vec<f64> = frames
        .windows(2)
        .map(|w| w[1].along_normal_mm - w[0].along_normal_mm)
        .collect();
    let nominal = median(&gaps);
    let (min_gap, max_gap) = gaps.iter().fold((f64::INFINITY, 0.0_f64), |(lo, hi), g| {
        (lo.min(*g), hi.max(*g))
    });
    let span = frames[frames.len() - 1].along_normal_mm - frames[0].along_normal_mm;

    // Tilt: in-plane drift of the positions per mm travelled along the normal.
    let last = &frames[frames.len() - 1];
    let drift = sub(sub(last.position, origin), scale(normal, span));
    let shear = scale(drift, 1.0 / span);
    let z_direction = if norm(shear) > TILT_TOLERANCE {
        let tilt_deg = norm(shear).atan().to_degrees();
        warnings.push(format!(
            "gantry tilt {tilt_deg:.2} deg: slice positions are not along the slice normal; world_from_voxel keeps the shear (the volume is not resampled)"
        ));
        [
            normal[0] + shear[0],
            normal[1] + shear[1],
            normal[2] + shear[2],
        ]
    } else {
        normal
    };

    let uneven = gaps
        .iter()
        .any(|g| (g - nominal).abs() > UNEVEN_RELATIVE * nominal);
    let count = if uneven {
        (span / nominal).round() + 1.0
    } else {
        frames.len() as f64
    };
    let plane = f64::from(first.columns) * f64::from(first.rows);
    if count * plane > MAX_VOXELS as f64 {
        return Err(refuse(format!(
            "{count} slices of {}x{} would be over the limit of {MAX_VOXELS} voxels (slice positions from {:.3} to {:.3} mm)",
            first.columns,
            first.rows,
            frames[0].along_normal_mm,
            frames[frames.len() - 1].along_normal_mm
        )));
    }
    // A gap close to a whole multiple of the typical one means slices are missing.
    let missing: usize = gaps
        .iter()
        .map(|g| g / nominal)
        .filter(|ratio| *ratio > 1.5 && (ratio - ratio.round()).abs() < 0.1)
        .map(|ratio| ratio.round() as usize - 1)
        .sum();
    let spread = format!("{min_gap:.3} to {max_gap:.3} mm, typical {nominal:.3} mm");
    let grid = uneven.then(|| regular_grid(&frames, nominal));
    let interpolated = grid.as_ref().map_or(0, |slices| {
        slices
            .iter()
            .filter(|s| matches!(s, SliceSource::Blend { .. }))
            .count()
    });
    if uneven && !options.allow_gaps {
        return Err(DicomError::MissingSlices {
            series: name,
            detail: format!(
                "uneven slice spacing ({spread}{}): a uniform grid would interpolate {interpolated} of its {} slices",
                if missing > 0 {
                    format!(", about {missing} slice(s) missing")
                } else {
                    String::new()
                },
                count as usize
            ),
        });
    }
    let slices = if let Some(slices) = grid {
        let mut text = format!(
            "uneven slice spacing ({spread}): resampled to a uniform {nominal:.3} mm grid of {} slices, {interpolated} interpolated",
            slices.len()
        );
        if missing > 0 {
            text.push_str(&format!("; about {missing} missing slice(s)"));
        }
        warnings.push(text);
        slices
    } else {
        frames.iter().map(|f| SliceSource::Frame(f.frame)).collect()
    };
    let spacing_z = if uneven {
        nominal
    } else {
        span / gaps.len() as f64
    };
    let geometry = geometry(
        first,
        [spacing_x, spacing_y, spacing_z],
        row_dir,
        col_dir,
        scale(z_direction, spacing_z),
        origin,
        slices.len(),
    );
    let filled = filled_slices(
        &slices,
        &geometry,
        series,
        normal,
        frames[0].along_normal_mm,
    );
    for f in &filled {
        warnings.push(f.describe());
    }
    if !series.unreadable.is_empty() {
        let unplaced = series.unreadable.len() - filled.iter().filter(|f| f.file.is_some()).count();
        warnings.push(format!(
            "{} unreadable file(s) left out of the series, {unplaced} of them at no known position: {}",
            series.unreadable.len(),
            series
                .unreadable
                .iter()
                .map(|s| format!("{}: {}", s.path.display(), s.reason))
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
    Ok(SeriesLayout {
        geometry,
        slices,
        warnings,
        filled,
    })
}

fn filled_slices(
    slices: &[SliceSource],
    geometry: &Geometry,
    series: &SeriesFiles,
    normal: Vec3,
    start_mm: f64,
) -> Vec<FilledSlice> {
    let step = geometry.spacing_mm[2];
    slices
        .iter()
        .enumerate()
        .filter(|(_, s)| matches!(s, SliceSource::Blend { .. }))
        .map(|(index, _)| {
            let file = series.unreadable.iter().find_map(|u| {
                let along = dot(u.position_lps_mm?, normal);
                let k = (along - start_mm) / step;
                ((k - index as f64).abs() < 0.5).then(|| u.path.clone())
            });
            FilledSlice {
                index,
                position_lps_mm: geometry.world_from_voxel.apply([0.0, 0.0, index as f64]),
                file,
            }
        })
        .collect()
}

fn geometry(
    first: &super::header::FileHeader,
    spacing_mm: Vec3,
    row_dir: Vec3,
    col_dir: Vec3,
    z_column: Vec3,
    origin: Vec3,
    slices: usize,
) -> Geometry {
    Geometry {
        size: [first.columns as usize, first.rows as usize, slices],
        spacing_mm,
        world_from_voxel: Affine3::from_columns(
            [
                scale(row_dir, spacing_mm[0]),
                scale(col_dir, spacing_mm[1]),
                z_column,
            ],
            origin,
        ),
    }
}

/// Slices at `first + k * step` along the normal, each exact or blended from its neighbours.
fn regular_grid(frames: &[Positioned], step: f64) -> Vec<SliceSource> {
    let start = frames[0].along_normal_mm;
    let span = frames[frames.len() - 1].along_normal_mm - start;
    let count = (span / step).round() as usize + 1;
    let mut slices = Vec::with_capacity(count);
    let mut below = 0;
    for k in 0..count {
        let target = start + k as f64 * step;
        while below + 2 < frames.len() && frames[below + 1].along_normal_mm <= target {
            below += 1;
        }
        let (lo, hi) = (&frames[below], &frames[(below + 1).min(frames.len() - 1)]);
        let exact = [lo, hi]
            .into_iter()
            .find(|f| (f.along_normal_mm - target).abs() < DUPLICATE_TOLERANCE_MM);
        if let Some(f) = exact {
            slices.push(SliceSource::Frame(f.frame));
        } else {
            let gap = hi.along_normal_mm - lo.along_normal_mm;
            let weight = ((target - lo.along_normal_mm) / gap).clamp(0.0, 1.0);
            slices.push(SliceSource::Blend {
                below: lo.frame,
                above: hi.frame,
                weight,
            });
        }
    }
    slices
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted[sorted.len() / 2]
}

/// A short name for messages: description and UID.
pub fn series_name(series: &SeriesFiles) -> String {
    let info = &series.first().info;
    if info.series_description.is_empty() {
        format!("series {}", info.series_uid)
    } else {
        format!("series '{}' ({})", info.series_description, info.series_uid)
    }
}
