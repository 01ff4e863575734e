//! From output maps to boxes: heatmap peaks, box size and offset heads, 3D non-maximum
//! suppression. Coordinates here are voxels of the model's input grid; `pipeline` maps them to
//! the patient (LPS mm) and to the original volume's voxels.

use ndarray::{Array3, ArrayView3, Axis};
use serde::{Deserialize, Serialize};

use tessera_plan::model::{OutputSpec, Outputs};

use crate::stitch::{Maps, MissingHead};

/// A box on the model's grid (the study resampled to the card's spacing), `[x, y, z]` in
/// its voxels, voxel `i` centred on `i`. det.json writes it as `model_box`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ModelGridBox {
    pub center: [f64; 3],
    /// Full extent, in voxels.
    pub size: [f64; 3],
}

impl ModelGridBox {
    pub fn min(&self) -> [f64; 3] {
        std::array::from_fn(|a| self.center[a] - self.size[a] / 2.0)
    }

    pub fn max(&self) -> [f64; 3] {
        std::array::from_fn(|a| self.center[a] + self.size[a] / 2.0)
    }

    /// Whether point `p` (voxels) lies in it, faces included.
    pub fn contains(&self, p: [f64; 3]) -> bool {
        let (lo, hi) = (self.min(), self.max());
        (0..3).all(|a| lo[a] <= p[a] && p[a] <= hi[a])
    }

    /// Its sides in millimetres on a grid of `spacing_mm`.
    pub fn size_mm(&self, spacing_mm: [f64; 3]) -> [f64; 3] {
        std::array::from_fn(|a| self.size[a] * spacing_mm[a])
    }

    /// The mean of its sides in millimetres on a grid of `spacing_mm`.
    pub fn mean_side_mm(&self, spacing_mm: [f64; 3]) -> f64 {
        self.size_mm(spacing_mm).iter().sum::<f64>() / 3.0
    }

    /// Intersection over union of two boxes.
    pub fn iou(&self, other: &Self) -> f64 {
        let (a0, a1, b0, b1) = (self.min(), self.max(), other.min(), other.max());
        let mut inter = 1.0;
        for k in 0..3 {
            inter *= (a1[k].min(b1[k]) - a0[k].max(b0[k])).max(0.0);
        }
        let vol = |s: [f64; 3]| s[0] * s[1] * s[2];
        let union = vol(self.size) + vol(other.size) - inter;
        if union > 0.0 { inter / union } else { 0.0 }
    }
}

/// A decoded finding before it becomes a detection: its score and its box.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    pub score: f32,
    pub bbox: ModelGridBox,
}

/// At most this many peaks are decoded per volume, the highest first (CenterNet keeps a top K
/// too): a weak or untrained model can put a peak in every other cell.
pub const MAX_PEAKS: usize = 1000;

/// CenterNet decoding: cells that are the maximum of their 3x3x3 neighbourhood and at least
/// `threshold`, the [`MAX_PEAKS`] best; centre = `(cell + offset) * stride`, size from the size
/// head (input voxels). Heads are `[heatmap, size, offset]`. Sorted by score, then position.
/// Returns the boxes and how many weaker peaks were dropped beyond [`MAX_PEAKS`]; the heads
/// are found by the names in the card's `outputs`.
pub fn decode_centernet(
    maps: &Maps,
    outputs: &Outputs,
    threshold: f32,
    volume_size: [usize; 3],
) -> Result<(Vec<Candidate>, usize), MissingHead> {
    let heat = named(maps, Some(&outputs.heatmap), "heatmap")?;
    let size = named(maps, outputs.size.as_ref(), "size")?;
    let offset = named(maps, outputs.offset.as_ref(), "offset")?;
    let heat = heat.index_axis(Axis(0), 0);
    let stride = maps.stride.map(|s| s as f64);
    let mut boxes: Vec<Candidate> = local_maxima(&heat, threshold)
        .into_iter()
        .map(|(z, y, x, score)| {
            let cell = [x, y, z];
            let center = std::array::from_fn(|a| {
                (cell[a] as f64 + f64::from(offset[[a, z, y, x]])) * stride[a]
            });
            let extent = std::array::from_fn(|a| f64::from(size[[a, z, y, x]]).max(1.0));
            Candidate {
                score,
                bbox: ModelGridBox {
                    center,
                    size: extent,
                },
            }
        })
        // Peaks in the stride padding lie outside the volume.
        .filter(|b| (0..3).all(|a| b.bbox.center[a] < volume_size[a] as f64))
        .collect();
    sort_boxes(&mut boxes);
    let dropped = boxes.len().saturating_sub(MAX_PEAKS);
    boxes.truncate(MAX_PEAKS);
    Ok((boxes, dropped))
}

/// The map of the card's output `spec` (its `what` head); a card without it is refused at
/// load, so `None` is a head that is missing all the same.
fn named<'a>(
    maps: &'a Maps,
    spec: Option<&OutputSpec>,
    what: &str,
) -> Result<&'a ndarray::Array4<f32>, MissingHead> {
    match spec {
        Some(spec) => maps.head(&spec.name),
        None => Err(MissingHead {
            name: format!("(the card names no {what} output)"),
            have: String::new(),
        }),
    }
}

/// Segmentation decoding (e.g. nnU-Net exports): cells of the probability map (head 0,
/// channel 0, the card's `heatmap` output) at or above `threshold`, grouped into 6-connected components; each component
/// becomes the box of its cells (in input voxels) scored by its highest probability. Sorted
/// like [`decode_centernet`]; the [`MAX_PEAKS`] best are kept.
pub fn decode_segmentation(
    maps: &Maps,
    outputs: &Outputs,
    threshold: f32,
    volume_size: [usize; 3],
) -> Result<(Vec<Candidate>, usize), MissingHead> {
    let prob = maps.head(&outputs.heatmap.name)?.index_axis(Axis(0), 0);
    let (nz, ny, nx) = prob.dim();
    let stride = maps.stride.map(|s| s as f64);
    let mut label = Array3::<u32>::zeros((nz, ny, nx));
    let mut boxes = Vec::new();
    let mut stack = Vec::new();
    for ((z, y, x), &p) in prob.indexed_iter() {
        if p < threshold || label[[z, y, x]] != 0 {
            continue;
        }
        let id = boxes.len() as u32 + 1;
        let (mut lo, mut hi, mut best) = ([x, y, z], [x, y, z], p);
        label[[z, y, x]] = id;
        stack.push([x, y, z]);
        while let Some(cell) = stack.pop() {
            best = best.max(prob[[cell[2], cell[1], cell[0]]]);
            for a in 0..3 {
                lo[a] = lo[a].min(cell[a]);
                hi[a] = hi[a].max(cell[a]);
            }
            let dims = [nx, ny, nz];
            for a in 0..3 {
                for step in [-1i64, 1] {
                    let moved = cell[a] as i64 + step;
                    if moved < 0 || moved >= dims[a] as i64 {
                        continue;
                    }
                    let mut next = cell;
                    next[a] = moved as usize;
                    let at = [next[2], next[1], next[0]];
                    if label[at] == 0 && prob[at] >= threshold {
                        label[at] = id;
                        stack.push(next);
                    }
                }
            }
        }
        // Cell i covers input voxels [i * stride, (i + 1) * stride), clipped to the volume.
        let min: [f64; 3] = std::array::from_fn(|a| lo[a] as f64 * stride[a]);
        let max: [f64; 3] =
            std::array::from_fn(|a| ((hi[a] + 1) as f64 * stride[a]).min(volume_size[a] as f64));
        if (0..3).any(|a| max[a] <= min[a]) {
            continue;
        }
        boxes.push(Candidate {
            score: best,
            bbox: ModelGridBox {
                // Voxel i is centred on i: a box over voxels [a, b) spans [a - 0.5, b - 0.5).
                center: std::array::from_fn(|a| (min[a] + max[a]) / 2.0 - 0.5),
                size: std::array::from_fn(|a| max[a] - min[a]),
            },
        });
    }
    sort_boxes(&mut boxes);
    let dropped = boxes.len().saturating_sub(MAX_PEAKS);
    boxes.truncate(MAX_PEAKS);
    Ok((boxes, dropped))
}

/// `(z, y, x, value)` of every cell that is at least `threshold` and not below any neighbour;
/// ties are broken by position so that a plateau yields one peak.
fn local_maxima(heat: &ArrayView3<'_, f32>, threshold: f32) -> Vec<(usize, usize, usize, f32)> {
    let (nz, ny, nx) = heat.dim();
    let mut peaks = Vec::new();
    for ((z, y, x), &v) in heat.indexed_iter() {
        if v < threshold {
            continue;
        }
        let mut is_peak = true;
        'scan: for dz in -1i64..=1 {
            for dy in -1i64..=1 {
                for dx in -1i64..=1 {
                    let (zz, yy, xx) = (z as i64 + dz, y as i64 + dy, x as i64 + dx);
                    if (dz, dy, dx) == (0, 0, 0)
                        || zz < 0
                        || yy < 0
                        || xx < 0
                        || zz >= nz as i64
                        || yy >= ny as i64
                        || xx >= nx as i64
                    {
                        continue;
                    }
                    let n = heat[[zz as usize, yy as usize, xx as usize]];
                    // A neighbour that is higher, or equal and earlier, wins.
                    if n > v || (n == v && (dz, dy, dx) < (0, 0, 0)) {
                        is_peak = false;
                        break 'scan;
                    }
                }
            }
        }
        if is_peak {
            peaks.push((z, y, x, v));
        }
    }
    peaks
}

/// Greedy 3D non-maximum suppression: keeps the best box, drops those overlapping it by more
/// than `max_iou`, repeats.
pub fn nms(mut boxes: Vec<Candidate>, max_iou: f64) -> Vec<Candidate> {
    sort_boxes(&mut boxes);
    // Only boxes in neighbouring buckets can overlap: buckets as wide as the largest box.
    let bucket = boxes
        .iter()
        .flat_map(|b| b.bbox.size)
        .fold(1.0_f64, f64::max);
    let key = |b: &Candidate| -> [i64; 3] {
        std::array::from_fn(|a| (b.bbox.center[a] / bucket).floor() as i64)
    };
    let mut grid: std::collections::HashMap<[i64; 3], Vec<usize>> =
        std::collections::HashMap::new();
    let mut kept: Vec<Candidate> = Vec::new();
    for b in boxes {
        let k = key(&b);
        let mut clear = true;
        'neighbours: for dz in -1..=1 {
            for dy in -1..=1 {
                for dx in -1..=1 {
                    let cell = [k[0] + dx, k[1] + dy, k[2] + dz];
                    if grid
                        .get(&cell)
                        .is_some_and(|ids| ids.iter().any(|&i| kept[i].bbox.iou(&b.bbox) > max_iou))
                    {
                        clear = false;
                        break 'neighbours;
                    }
                }
            }
        }
        if clear {
            grid.entry(k).or_default().push(kept.len());
            kept.push(b);
        }
    }
    kept
}

fn sort_boxes(boxes: &mut [Candidate]) {
    boxes.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then(a.bbox.center[2].total_cmp(&b.bbox.center[2]))
            .then(a.bbox.center[1].total_cmp(&b.bbox.center[1]))
            .then(a.bbox.center[0].total_cmp(&b.bbox.center[0]))
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stitch::HeadMap;
    use ndarray::Array4;

    fn maps_with_peaks(peaks: &[([usize; 3], f32)]) -> Maps {
        let mut heat = Array4::<f32>::zeros((1, 8, 8, 8));
        let mut size = Array4::<f32>::from_elem((3, 8, 8, 8), 4.0);
        let offset = Array4::<f32>::from_elem((3, 8, 8, 8), 0.5);
        for ([x, y, z], v) in peaks {
            heat[[0, *z, *y, *x]] = *v;
            size[[0, *z, *y, *x]] = 6.0;
        }
        Maps {
            stride: [2; 3],
            heads: vec![
                named("heat", heat),
                named("size", size),
                named("offset", offset),
            ],
        }
    }

    fn named(name: &str, map: Array4<f32>) -> HeadMap {
        HeadMap {
            name: name.into(),
            map,
        }
    }

    fn outputs() -> Outputs {
        let spec = |name: &str| OutputSpec {
            name: name.into(),
            meaning: String::new(),
        };
        Outputs {
            heatmap: spec("heat"),
            size: Some(spec("size")),
            offset: Some(spec("offset")),
        }
    }

    #[test]
    fn peaks_become_boxes_in_input_voxels() {
        let maps = maps_with_peaks(&[([3, 4, 5], 0.9), ([6, 1, 1], 0.4), ([0, 0, 0], 0.1)]);
        let (boxes, dropped) = decode_centernet(&maps, &outputs(), 0.3, [16, 16, 16]).unwrap();
        assert_eq!(dropped, 0);
        assert_eq!(boxes.len(), 2);
        assert_eq!(boxes[0].score, 0.9);
        assert_eq!(boxes[0].bbox.center, [7.0, 9.0, 11.0]); // (cell + 0.5) * 2
        assert_eq!(boxes[0].bbox.size, [6.0, 4.0, 4.0]);
        assert_eq!(boxes[1].bbox.center, [13.0, 3.0, 3.0]);
    }

    #[test]
    fn a_plateau_gives_one_peak_and_padding_peaks_are_dropped() {
        let maps = maps_with_peaks(&[([2, 2, 2], 0.8), ([3, 2, 2], 0.8), ([7, 7, 7], 0.9)]);
        let (boxes, _) = decode_centernet(&maps, &outputs(), 0.5, [14, 14, 14]).unwrap();
        assert_eq!(boxes.len(), 1, "{boxes:?}");
        assert_eq!(boxes[0].bbox.center, [5.0, 5.0, 5.0]);
    }

    #[test]
    fn segmentation_components_become_boxes() {
        let mut prob = Array4::<f32>::zeros((1, 6, 6, 6));
        // An L-shaped component (x 1..=2 at y 1, then y 2 at x 2) and a single cell.
        for (z, y, x, p) in [
            (1, 1, 1, 0.6),
            (1, 1, 2, 0.9),
            (1, 2, 2, 0.7),
            (4, 4, 4, 0.5),
        ] {
            prob[[0, z, y, x]] = p;
        }
        // Diagonal neighbours are separate components (6-connectivity).
        prob[[0, 2, 2, 3]] = 0.8;
        let maps = Maps {
            stride: [2; 3],
            heads: vec![named("heat", prob)],
        };
        let (boxes, dropped) = decode_segmentation(&maps, &outputs(), 0.5, [12, 12, 9]).unwrap();
        assert_eq!(dropped, 0);
        let scores: Vec<f32> = boxes.iter().map(|b| b.score).collect();
        assert_eq!(scores, vec![0.9, 0.8, 0.5]);
        // Cells x 1..=2, y 1..=2, z 1 -> voxels [2, 6) x [2, 6) x [2, 4).
        assert_eq!(boxes[0].bbox.size, [4.0, 4.0, 2.0]);
        assert_eq!(boxes[0].bbox.center, [3.5, 3.5, 2.5]);
        // Cell z 4 -> voxels [8, 10), clipped to the 9-voxel volume: [8, 9).
        assert_eq!(boxes[2].bbox.size, [2.0, 2.0, 1.0]);
        assert_eq!(boxes[2].bbox.center[2], 8.0);
    }

    #[test]
    fn nms_keeps_the_best_of_overlapping_boxes() {
        let b = |score, x| Candidate {
            score,
            bbox: ModelGridBox {
                center: [x, 0.0, 0.0],
                size: [4.0, 4.0, 4.0],
            },
        };
        let kept = nms(vec![b(0.5, 1.0), b(0.9, 0.0), b(0.7, 10.0)], 0.3);
        assert_eq!(
            kept.iter().map(|k| k.score).collect::<Vec<_>>(),
            vec![0.9, 0.7]
        );
        assert!((b(1.0, 0.0).bbox.iou(&b(1.0, 2.0).bbox) - 32.0 / 96.0).abs() < 1e-12);
    }
}
