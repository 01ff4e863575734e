#!/usr/bin/env python3
"""MONAI's own detections on a study, as golden files for Tessera's parity test.

Runs MONAI's `RetinaNetDetector`, built from the bundle config with the network a Tessera
model folder was exported from (the bundle's weights, or the seeded ones made again from the
card's recipe, checked against the ONNX file), on the array Tessera feeds its network, three times: with MONAI's
sliding-window inferer at the card's roi, overlap and mode; the same in the other blending
mode (constant or gaussian); and on the whole volume.

The array: `tessera resample STUDY --spacing-mm <card spacing> --out study.npy` writes the
study on the model's spacing (HU, `[z, y, x]`, with its geometry beside it in `study.json`).
Here it is put in the card's voxel order (axes flipped as `tessera_plan::orient` flips them),
scaled as the card's input says, and transposed to MONAI's `[x, y, z]`.

    training/.venv/bin/python training/monai_bundle/golden.py \\
        --bundle training/monai_bundle/test_bundle --model assets/models/tessera-test-retinanet \\
        --study study.npy --out tests/golden/retinanet
"""
import argparse
import json
import os
import re
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from convert import load_bundle  # noqa: E402

CODES = {"L": (0, 1.0), "R": (0, -1.0), "P": (1, 1.0), "A": (1, -1.0), "S": (2, 1.0), "I": (2, -1.0)}


def flips(world_from_voxel, codes):
    """Per axis `[x, y, z]`, whether it is reversed to point the way `codes` say."""
    linear = np.array(world_from_voxel["linear"])
    out = []
    for a, code in enumerate(codes):
        axis, sign = CODES[code]
        column = linear[:, a]
        dominant = int(np.argmax(np.abs(column)))
        if dominant != axis:
            sys.exit(f"golden: axis {a} is not along {code}: not a flip")
        out.append(column[dominant] * sign < 0)
    return out


def model_input(study_npy, card):
    hu = np.load(study_npy).astype(np.float32)  # [z, y, x]
    with open(os.path.splitext(study_npy)[0] + ".json") as f:
        meta = json.load(f)
    if card["target_spacing_mm"] and not np.allclose(meta["spacing_mm"], card["target_spacing_mm"]):
        sys.exit(f"golden: {study_npy} has spacing {meta['spacing_mm']}, the card wants {card['target_spacing_mm']}")
    codes = card["input"].get("orientation")
    if codes:
        for a, flip in enumerate(flips(meta["world_from_voxel"], codes)):
            if flip:
                hu = np.flip(hu, axis=2 - a)
    lo, hi = card["input"]["hu_window"]
    x = (np.clip(hu, lo, hi) - lo) / (hi - lo)
    return np.ascontiguousarray(x.transpose(2, 1, 0))[None, None], meta  # [1, 1, x, y, z]


def detector_for(card, bundle, model_dir, check=True):
    """MONAI's detector with the network the Tessera model was exported from: the bundle's
    `models/model.pt`, the test model's recipe, or the converter's seeded weights; checked
    against the model's ONNX file on one window, so that both sides run the same network."""
    from convert import TesseraLayout, check_export, load_weights

    recipe = card.get("training", {}).get("recipe", "")
    if recipe.endswith("make_test_model.py"):
        from make_test_model import build_network

        detector = build_network(bundle)
    else:
        detector, _ = load_bundle(bundle)
        weights = card.get("training", {}).get("weights", "")
        found = re.search(r"seed (\d+)", weights) if weights.startswith("random") else None
        seed = int(found.group(1)) if found else None
        load_weights(detector.network, bundle, seed)
    detector.network.eval()
    if not check:
        return detector
    drift = check_export(detector.network, os.path.join(model_dir, card["model_file"]), [32, 64, 64])
    if drift > 1e-4:
        sys.exit(f"golden: the network made here differs from {model_dir}'s ONNX by {drift:.1e}: not the same weights")
    TesseraLayout(detector.network).network.use_list_output = False
    return detector


def run(detector, image, sliding):
    started = time.perf_counter()
    with torch.no_grad():
        out = detector(torch.from_numpy(image), use_inferer=sliding)[0]
    seconds = time.perf_counter() - started
    boxes = out[detector.target_box_key].numpy().astype(np.float64)
    scores = out[detector.pred_score_key].numpy().astype(np.float64)
    labels = out[detector.target_label_key].numpy().astype(int)
    return [
        {"score": float(s), "label": int(l), "box_xyzxyz": [float(v) for v in b]}
        for b, s, l in zip(boxes, scores, labels)
    ], seconds


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bundle", required=True)
    ap.add_argument("--model", required=True, help="the Tessera model folder converted from the bundle")
    ap.add_argument("--study", required=True, help="the study as `tessera resample` wrote it (.npy)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", choices=["sliding_window", "whole_volume"], help="one run only (a benchmark)")
    ap.add_argument("--roi", help="XxYxZ instead of the card's (a benchmark at a patch that fits)")
    ap.add_argument("--no-check", action="store_true", help="skip the ONNX check (a benchmark: nothing else in the process)")
    args = ap.parse_args()
    with open(os.path.join(args.model, "model.json")) as f:
        card = json.load(f)
    detector = detector_for(card, args.bundle, args.model, check=not args.no_check)
    if args.roi:
        detector.inferer.roi_size = [int(v) for v in args.roi.split("x")]
    detector.eval()
    torch.set_num_threads(2)
    image, meta = model_input(args.study, card)
    os.makedirs(args.out, exist_ok=True)
    inferer = detector.inferer
    card_mode = str(inferer.mode)
    other = "gaussian" if card_mode == "constant" else "constant"
    for mode, sliding, blend in [
        ("sliding_window", True, card_mode),
        (f"sliding_window_{other}", True, other),
        ("whole_volume", False, None),
    ]:
        if args.only and mode != args.only:
            continue
        if blend is not None:
            inferer.mode = blend
        detections, seconds = run(detector, image, sliding)
        record = {
            "what": f"MONAI {__import__('monai').__version__} RetinaNetDetector, {mode.replace('_', ' ')}",
            "model": card["name"],
            "model_sha256": card["sha256"],
            "study_series_uid": meta.get("series_uid"),
            "image_size_xyz": list(image.shape[2:]),
            "roi_xyz": [int(r) for r in inferer.roi_size] if sliding else None,
            "overlap": float(np.atleast_1d(inferer.overlap)[0]) if sliding else None,
            "mode": blend,
            "score_threshold": float(detector.box_selector.score_thresh),
            "coordinates": "the model grid's voxels [x, y, z] (after the card's orientation), voxel i centred on i",
            "seconds": round(seconds, 2),
            "detections": detections,
        }
        path = os.path.join(args.out, f"monai_{mode}.json")
        with open(path + ".tmp", "w") as f:
            json.dump(record, f, indent=1)
            f.write("\n")
        os.replace(path + ".tmp", path)
        print(f"{mode}: {len(detections)} detections in {seconds:.1f} s -> {path}")


if __name__ == "__main__":
    main()
