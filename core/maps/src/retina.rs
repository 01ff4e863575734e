//! RetinaNet maps to boxes, as MONAI's `RetinaNetDetector` makes them: per level, the sigmoid of
//! every anchor's logits over the score threshold, the level's best `topk` of them, their box
//! codes applied to their anchors (MONAI's `BoxCoder`), the boxes clipped to the image and the
//! empty ones dropped; then, over all levels, non-maximum suppression per class, best first,
//! up to the detection cap.
//!
//! Arithmetic is `f32`, in MONAI's order, so that scores and box faces agree with it to
//! rounding. Coordinates are the model grid's voxels (`[x, y, z]`, voxel `i` centred on `i`,
//! as MONAI's boxes are in its image's voxels); the image is the grid before padding.

use ndarray::{Array4, Axis};

use crate::decode::{Candidate, ModelGridBox};
use crate::stitch::{HeadMap, Maps, MissingHead};
use tessera_plan::model::{RetinaLevel, RetinaSpec};

/// A box as MONAI holds it: `[x0, y0, z0, x1, y1, z1]`, `f32`.
type Corners = [f32; 6];

/// One box over the threshold, before suppression.
#[derive(Debug, Clone, Copy)]
struct Scored {
    score: f32,
    label: usize,
    corners: Corners,
}

/// The detections of a RetinaNet's stitched maps (each level's classification and box
/// regression heads, found by the names in its card section, `[channels, z, y, x]`) on an
/// image of `image_size` voxels, best first; and how many boxes over `threshold` were beyond a
/// level's `topk`.
pub fn decode_retinanet(
    spec: &RetinaSpec,
    maps: &Maps,
    threshold: f32,
    image_size: [usize; 3],
) -> Result<(Vec<Candidate>, usize), MissingHead> {
    let mut boxes = Vec::new();
    let mut dropped = 0;
    for level in &spec.levels {
        let classes = maps.head(&level.classification)?;
        let codes = maps.head(&level.box_regression)?;
        let (level_boxes, over) = select_level(spec, level, classes, codes, threshold, image_size);
        dropped += over;
        boxes.extend(level_boxes);
    }
    let kept = suppress(boxes, spec.nms_threshold as f32, spec.detections_per_image);
    let candidates = kept
        .into_iter()
        .map(|b| {
            let c = b.corners.map(f64::from);
            Candidate {
                score: b.score,
                bbox: ModelGridBox {
                    center: std::array::from_fn(|a| (c[a] + c[a + 3]) / 2.0),
                    size: std::array::from_fn(|a| c[a + 3] - c[a]),
                },
            }
        })
        .collect();
    Ok((candidates, dropped))
}

/// A RetinaNet's score map: the finest level's best anchor score per cell (the sigmoid of its
/// largest logit), `[1, z, y, x]` at that level's stride, named after that level's
/// classification head.
pub fn score_map(spec: &RetinaSpec, maps: &Maps) -> Result<Maps, MissingHead> {
    let Some(level) = spec.levels.first() else {
        return Ok(Maps {
            stride: [1; 3],
            heads: Vec::new(),
        });
    };
    let classes = maps.head(&level.classification)?;
    let best = classes.fold_axis(Axis(0), f32::NEG_INFINITY, |m, v| m.max(*v));
    Ok(Maps {
        stride: level.stride,
        heads: vec![HeadMap {
            name: format!("{} (best anchor, sigmoid)", level.classification),
            map: best.mapv(sigmoid).insert_axis(Axis(0)),
        }],
    })
}

fn select_level(
    spec: &RetinaSpec,
    level: &RetinaLevel,
    classes: &Array4<f32>,
    codes: &Array4<f32>,
    threshold: f32,
    image_size: [usize; 3],
) -> (Vec<Scored>, usize) {
    let (anchors, k) = (level.anchors.len(), spec.num_classes);
    let (_, nz, ny, nx) = classes.dim();
    // MONAI's order: x slowest, then y, z, the anchor, the class.
    let mut over: Vec<(f32, usize)> = Vec::new();
    for x in 0..nx {
        for y in 0..ny {
            for z in 0..nz {
                let location = (x * ny + y) * nz + z;
                for channel in 0..anchors * k {
                    let score = sigmoid(classes[[channel, z, y, x]]);
                    if score > threshold {
                        over.push((score, location * anchors * k + channel));
                    }
                }
            }
        }
    }
    // Best first; equal scores keep MONAI's order.
    over.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    let dropped = over.len().saturating_sub(spec.topk_candidates_per_level);
    over.truncate(spec.topk_candidates_per_level);
    let boxes = over
        .into_iter()
        .filter_map(|(score, flat)| {
            let (anchor_index, label) = (flat / k, flat % k);
            let (location, a) = (anchor_index / anchors, anchor_index % anchors);
            let cell = [location / (nz * ny), location / nz % ny, location % nz];
            let anchor = anchor_at(level, a, cell);
            let code: [f32; 6] =
                std::array::from_fn(|j| codes[[a * 6 + j, cell[2], cell[1], cell[0]]]);
            let corners = apply_code(spec, anchor, code);
            clip(corners, image_size).map(|corners| Scored {
                score,
                label,
                corners,
            })
        })
        .collect();
    (boxes, dropped)
}

fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// Anchor `a` of the cell at `cell` (`[x, y, z]`): the cell's centre, `cell * stride +
/// stride / 2` (integer, as MONAI's), plus the anchor's corners.
fn anchor_at(level: &RetinaLevel, a: usize, cell: [usize; 3]) -> Corners {
    let centre: [f32; 3] =
        std::array::from_fn(|i| (cell[i] * level.stride[i] + level.stride[i] / 2) as f32);
    let shape = level.anchors[a];
    std::array::from_fn(|j| centre[j % 3] + shape[j] as f32)
}

/// MONAI's `BoxCoder.decode_single` for one box.
fn apply_code(spec: &RetinaSpec, anchor: Corners, code: [f32; 6]) -> Corners {
    let weights = spec.box_coder_weights.map(|w| w as f32);
    let clip = spec.box_transform_clip as f32;
    let mut corners = [0.0f32; 6];
    for axis in 0..3 {
        let size = anchor[axis + 3] - anchor[axis];
        let centre = (anchor[axis] + anchor[axis + 3]) / 2.0;
        let d_centre = code[axis] / weights[axis];
        let d_size = (code[axis + 3] / weights[axis + 3]).min(clip);
        let new_centre = d_centre * size + centre;
        let half = 0.5 * (d_size.exp() * size);
        corners[axis] = new_centre - half;
        corners[axis + 3] = new_centre + half;
    }
    corners
}

/// The box clipped to `[0, size]` on every axis, or `None` when it is then under one voxel
/// deep on any axis (MONAI's `clip_boxes_to_image` with `remove_empty`).
fn clip(mut corners: Corners, image_size: [usize; 3]) -> Option<Corners> {
    for axis in 0..3 {
        let hi = image_size[axis] as f32;
        corners[axis] = corners[axis].clamp(0.0, hi);
        corners[axis + 3] = corners[axis + 3].clamp(0.0, hi);
    }
    (0..3)
        .all(|a| corners[a + 3] >= corners[a] + 1.0)
        .then_some(corners)
}

/// Greedy suppression per class, best first (a stable sort, as MONAI's), keeping a box whose
/// overlap with every kept box of its class is at most `threshold`; at most `cap` boxes.
fn suppress(mut boxes: Vec<Scored>, threshold: f32, cap: usize) -> Vec<Scored> {
    boxes.sort_by(|a, b| b.score.total_cmp(&a.score));
    let mut kept: Vec<Scored> = Vec::new();
    for b in boxes {
        if kept.len() >= cap {
            break;
        }
        let clear = kept
            .iter()
            .filter(|k| k.label == b.label)
            .all(|k| iou(&k.corners, &b.corners) <= threshold);
        if clear {
            kept.push(b);
        }
    }
    kept
}

/// MONAI's `box_iou` in `f32`: intersection over union plus the machine epsilon.
fn iou(a: &Corners, b: &Corners) -> f32 {
    let volume = |c: &Corners| (c[3] - c[0]) * (c[4] - c[1]) * (c[5] - c[2]);
    let mut inter = 1.0f32;
    for axis in 0..3 {
        inter *= (a[axis + 3].min(b[axis + 3]) - a[axis].max(b[axis])).max(0.0);
    }
    let union = volume(a) + volume(b) - inter;
    inter / (union + f32::EPSILON)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> RetinaSpec {
        RetinaSpec {
            num_classes: 1,
            levels: vec![RetinaLevel {
                classification: "c".into(),
                box_regression: "b".into(),
                stride: [4, 4, 2],
                anchors: vec![[-3.0, -4.0, -2.0, 3.0, 4.0, 2.0]],
            }],
            box_coder_weights: [1.0; 6],
            box_transform_clip: (1000.0f64 / 16.0).ln(),
            topk_candidates_per_level: 1000,
            nms_threshold: 0.22,
            detections_per_image: 300,
            size_divisible: [16, 16, 8],
        }
    }

    #[test]
    fn a_zero_code_gives_the_anchor_about_its_cell_centre() {
        let spec = spec();
        let anchor = anchor_at(&spec.levels[0], 0, [2, 1, 3]);
        assert_eq!(anchor, [7.0, 2.0, 5.0, 13.0, 10.0, 9.0]);
        assert_eq!(apply_code(&spec, anchor, [0.0; 6]), anchor);
        // dx = 0.5 moves the centre half a width; dw = ln 2 doubles the width.
        let moved = apply_code(&spec, anchor, [0.5, 0.0, 0.0, 2f32.ln(), 0.0, 0.0]);
        assert!(
            (moved[0] - 7.0).abs() < 1e-5 && (moved[3] - 19.0).abs() < 1e-5,
            "{moved:?}"
        );
    }

    #[test]
    fn boxes_are_clipped_to_the_image_and_thin_ones_dropped() {
        assert_eq!(
            clip([-2.0, 1.0, 1.0, 3.0, 5.0, 9.0], [10, 10, 8]),
            Some([0.0, 1.0, 1.0, 3.0, 5.0, 8.0])
        );
        assert_eq!(clip([9.5, 1.0, 1.0, 12.0, 5.0, 4.0], [10, 10, 8]), None);
    }

    #[test]
    fn suppression_keeps_the_best_of_overlapping_boxes_and_stops_at_the_cap() {
        let b = |score, x: f32| Scored {
            score,
            label: 0,
            corners: [x, 0.0, 0.0, x + 4.0, 4.0, 4.0],
        };
        let kept = suppress(vec![b(0.5, 0.0), b(0.9, 1.0), b(0.7, 20.0)], 0.22, 300);
        let scores: Vec<f32> = kept.iter().map(|k| k.score).collect();
        assert_eq!(scores, vec![0.9, 0.7]);
        assert_eq!(suppress(vec![b(0.5, 0.0), b(0.7, 20.0)], 0.22, 1).len(), 1);
    }

    #[test]
    fn decoding_reads_monai_channel_order_and_counts_what_topk_drops() {
        let mut spec = spec();
        spec.topk_candidates_per_level = 1;
        // One cell per axis at stride [4, 4, 2]: an image of 4 x 4 x 2 voxels, two cells in x.
        let mut classes = Array4::from_elem((1, 1, 1, 2), -10.0f32);
        classes[[0, 0, 0, 1]] = 2.0; // the cell at x = 1
        classes[[0, 0, 0, 0]] = 1.0;
        let codes = Array4::zeros((6, 1, 1, 2));
        let level = &spec.levels[0];
        let maps = Maps {
            stride: level.stride,
            heads: vec![
                HeadMap {
                    name: level.box_regression.clone(),
                    map: codes,
                },
                HeadMap {
                    name: level.classification.clone(),
                    map: classes,
                },
            ],
        };
        let (found, dropped) = decode_retinanet(&spec, &maps, 0.5, [8, 4, 2]).unwrap();
        assert_eq!(dropped, 1);
        assert_eq!(found.len(), 1);
        assert!((found[0].score - sigmoid(2.0)).abs() < 1e-7);
        // Cell x = 1 is centred at 1 * 4 + 2 = 6; the anchor is 6 wide, clipped at 8.
        assert_eq!(found[0].bbox.min(), [3.0, 0.0, 0.0]);
        assert_eq!(found[0].bbox.max(), [8.0, 4.0, 2.0]);
    }
}
