//! What a card's output family needs from it: checked when a model loads, so that a card the
//! decoder cannot use is refused before anything runs.

use super::{ModelCard, OutputFamily, RetinaSpec};

/// What the card's output family needs from it.
pub(super) fn check_family(card: &ModelCard) -> Result<(), String> {
    match (card.output_family, &card.outputs, &card.retinanet) {
        (OutputFamily::Centernet, Some(o), _) if o.size.is_none() || o.offset.is_none() => {
            Err("a centernet model needs size and offset outputs".into())
        }
        (OutputFamily::Centernet | OutputFamily::Segmentation, None, _) => {
            Err("a centernet or segmentation model needs its outputs".into())
        }
        (OutputFamily::Retinanet, _, None) => {
            Err("a retinanet model needs its retinanet section".into())
        }
        (OutputFamily::Retinanet, _, Some(retina)) => check_retinanet(retina, card),
        _ => Ok(()),
    }
}

/// What a card's `retinanet` section must hold to be decoded.
fn check_retinanet(spec: &RetinaSpec, card: &ModelCard) -> Result<(), String> {
    if spec.levels.is_empty() || spec.num_classes == 0 {
        return Err("retinanet needs at least one level and one class".into());
    }
    let grid = card.stride.per_axis();
    for (i, level) in spec.levels.iter().enumerate() {
        if level.anchors.is_empty() || level.stride.contains(&0) {
            return Err(format!(
                "retinanet level {i} needs anchors and a positive stride"
            ));
        }
        if (0..3).any(|a| !grid[a].is_multiple_of(level.stride[a])) {
            return Err(format!(
                "the card's stride {grid:?} must be a multiple of level {i}'s stride {:?}, so that every window's cells line up",
                level.stride
            ));
        }
    }
    if (0..3)
        .any(|a| spec.size_divisible[a] == 0 || !grid[a].is_multiple_of(spec.size_divisible[a]))
    {
        return Err(format!(
            "the card's stride {grid:?} must be a multiple of size_divisible {:?}",
            spec.size_divisible
        ));
    }
    let positive = |v: f64| v.is_finite() && v > 0.0;
    if !spec.box_coder_weights.iter().all(|w| positive(*w)) || !positive(spec.box_transform_clip) {
        return Err("retinanet box_coder_weights and box_transform_clip must be positive".into());
    }
    if !(0.0..=1.0).contains(&spec.nms_threshold)
        || spec.topk_candidates_per_level == 0
        || spec.detections_per_image == 0
    {
        return Err(
            "retinanet needs nms_threshold in [0, 1] and positive topk_candidates_per_level and detections_per_image"
                .into(),
        );
    }
    if card.coarse_pass.is_some() {
        return Err("a retinanet model has no coarse pass".into());
    }
    Ok(())
}
