#!/usr/bin/env python3
"""A MONAI detection bundle (e.g. `lung_nodule_ct_detection`) to a Tessera model folder:
`model.onnx` and its card, `model.json`.

    python -m monai.bundle download lung_nodule_ct_detection --bundle_dir bundles
    python training/monai_bundle/convert.py bundles/lung_nodule_ct_detection --out models/monai-lung-nodule

Everything comes from the bundle's `configs/inference.json`, through MONAI's own parser: the
network (`network_def`), the anchors (`anchor_generator`, as MONAI computes them), the box
selector and the sliding window (`detector_ops`), the box coder, `size_divisible`, and the
preprocessing (`Orientationd`, `Spacingd`, `ScaleIntensityRanged`). The weights are
`models/model.pt`; `--random-weights SEED` builds the same architecture with seeded weights
instead (how this machine, which cannot reach the model hub, gets the seed's network).

The ONNX graph takes Tessera's layout, `[1, 1, z, y, x]`, and transposes it to MONAI's
`[1, 1, x, y, z]` inside the graph, so the network sees exactly the array MONAI gives it; its
outputs, three classification and three box-regression maps (one per pyramid level), are
transposed back to `[1, channels, z, y, x]`. The export is checked against PyTorch with ONNX
Runtime before the card is written.

Needs torch, MONAI and onnxruntime (`training/requirements.txt` plus `monai==1.6.1`); CI never
runs it.
"""
import argparse
import hashlib
import json
import math
import os
import sys
import tempfile

import numpy as np
import torch

TESSERA_LAYOUT = "NCDHW"


def load_bundle(bundle_dir):
    """The bundle's detector, with its `detector_ops` applied, and its raw config."""
    from monai.bundle import ConfigParser

    config_path = os.path.join(bundle_dir, "configs", "inference.json")
    if not os.path.isfile(config_path):
        sys.exit(f"convert: {config_path} does not exist: give the folder of a downloaded MONAI bundle")
    parser = ConfigParser()
    parser.read_config(config_path)
    parser["bundle_root"] = bundle_dir
    parser["device"] = "$torch.device('cpu')"
    detector = parser.get_parsed_content("detector")
    parser.get_parsed_content("detector_ops")
    if detector.inferer is None:
        sys.exit(f"convert: {config_path} sets no sliding-window inferer in detector_ops")
    return detector, parser.get()


def load_weights(network, bundle_dir, seed):
    """The bundle's `models/model.pt`, or seeded weights; what the card records of them."""
    if seed is not None:
        torch.manual_seed(seed)
        for module in network.modules():
            if hasattr(module, "reset_parameters") and not list(module.children()):
                module.reset_parameters()
        # RetinaNet's own initialisation (normal 0.01, the 0.01 prior in the class bias).
        network.classification_head.__init__(
            network.classification_head.cls_logits.in_channels,
            network.num_anchors,
            network.num_classes,
            network.spatial_dims,
        )
        network.regression_head.__init__(
            network.regression_head.bbox_reg.in_channels, network.num_anchors, network.spatial_dims
        )
        return {"weights": f"random, seed {seed} (MONAI's initialisation, no training)"}
    path = os.path.join(bundle_dir, "models", "model.pt")
    if not os.path.isfile(path):
        sys.exit(f"convert: {path} does not exist: download the bundle with its weights, or pass --random-weights SEED")
    state = torch.load(path, map_location="cpu", weights_only=True)
    if isinstance(state, dict) and "model" in state and isinstance(state["model"], dict):
        state = state["model"]
    network.load_state_dict(state)
    return {"weights": "models/model.pt", "weights_sha256": sha256(path)}


class TesseraLayout(torch.nn.Module):
    """The network between Tessera's `[n, c, z, y, x]` and MONAI's `[n, c, x, y, z]`."""

    def __init__(self, network):
        super().__init__()
        self.network = network
        self.network.use_list_output = True

    def forward(self, ct):
        maps = self.network(ct.permute(0, 1, 4, 3, 2))
        return tuple(m.permute(0, 1, 4, 3, 2) for m in maps)


def level_strides(network, size_divisible):
    """Each level's stride `[x, y, z]`, measured on an input of a few `size_divisible`."""
    probe = [4 * d for d in size_divisible]
    with torch.no_grad():
        maps = network(torch.zeros(1, 1, *probe))
    levels = len(maps) // 2
    return [[probe[a] // maps[level].shape[2 + a] for a in range(3)] for level in range(levels)]


def receptive_field(network, size_divisible):
    """How far one input voxel reaches, in voxels (the largest over axes and levels), and
    whether the probe bounded it: measured by an impulse in a probe of 8 `size_divisible`
    per axis, with the normalisation layers that span the window replaced by identities (their
    reach is the whole window, which the card states separately). A probe that bounds it gives
    a lower bound; the plan does not use it for such a model (no halo, no core)."""
    local = _with_local_norms(network)
    side = [8 * d for d in size_divisible]
    centre = [s // 2 for s in side]
    x = torch.zeros(1, 1, *side)
    with torch.no_grad():
        base = local(x)
        x[(0, 0, *centre)] = 1.0
        hit = local(x)
    reach, bounded = 0, False
    for b, h in zip(base, hit):
        changed = (b - h).abs().amax(dim=(0, 1)) > 0
        stride = [side[a] // b.shape[2 + a] for a in range(3)]
        for index in changed.nonzero().tolist():
            for a in range(3):
                cell_centre = index[a] * stride[a] + stride[a] // 2
                reach = max(reach, abs(cell_centre - centre[a]) + stride[a] // 2)
                bounded |= index[a] in (0, b.shape[2 + a] - 1)
    return 2 * reach + 1, bounded


def _with_local_norms(network):
    import copy

    local = copy.deepcopy(network)
    for name, module in list(local.named_modules()):
        for child_name, child in list(module.named_children()):
            if isinstance(child, (torch.nn.GroupNorm, torch.nn.InstanceNorm3d, torch.nn.LayerNorm)):
                setattr(module, child_name, torch.nn.Identity())
    return local.eval()


def window_norms(network):
    """Why a window's outputs depend on all of the window: the normalisation layers whose
    statistics are taken over it (GroupNorm, InstanceNorm, LayerNorm), or None."""
    kinds = {}
    for name, module in network.named_modules():
        if isinstance(module, (torch.nn.GroupNorm, torch.nn.InstanceNorm3d, torch.nn.LayerNorm)):
            part = name.split(".")[0]
            kinds.setdefault(type(module).__name__, set()).add(part)
    if not kinds:
        return None
    parts = "; ".join(f"{kind} in {', '.join(sorted(where))}" for kind, where in sorted(kinds.items()))
    return f"{parts}: its statistics are taken over the whole window, so no halo makes a tile equal the whole-volume run"


def preprocessing(raw):
    """`(orientation, spacing_mm, hu_window)` from the bundle's preprocessing transforms."""
    transforms = raw.get("preprocessing", {}).get("transforms", [])
    found = {t.get("_target_", "").split(".")[-1]: t for t in transforms if isinstance(t, dict)}
    orientation = found.get("Orientationd", {}).get("axcodes")
    spacing = found.get("Spacingd", {}).get("pixdim")
    scale = found.get("ScaleIntensityRanged")
    if scale is None:
        sys.exit("convert: the bundle's preprocessing has no ScaleIntensityRanged: Tessera cannot tell its input range")
    if (scale.get("b_min"), scale.get("b_max"), scale.get("clip")) != (0.0, 1.0, True):
        sys.exit(f"convert: ScaleIntensityRanged maps to [{scale.get('b_min')}, {scale.get('b_max')}] with clip={scale.get('clip')}: Tessera's input is clipped to [0, 1]")
    return orientation, spacing, [float(scale["a_min"]), float(scale["a_max"])]


def export(network, path, opset, levels):
    wrapped = TesseraLayout(network).eval()
    names = [f"cls_logits_{i}" for i in range(levels)] + [f"box_regression_{i}" for i in range(levels)]
    dims = {2: "z", 3: "y", 4: "x"}
    example = torch.zeros(1, 1, 32, 64, 64)
    torch.onnx.export(
        wrapped, (example,), path, input_names=["ct"], output_names=names, opset_version=opset,
        dynamic_axes={"ct": dims, **{n: {2: f"{n}_z", 3: f"{n}_y", 4: f"{n}_x"} for n in names}},
        dynamo=False,
    )
    return names


def check_export(network, path, patch_zyx, seed=0):
    """The largest difference between ONNX Runtime and PyTorch on one random window."""
    import onnxruntime as ort

    wrapped = TesseraLayout(network).eval()
    x = torch.rand(1, 1, *patch_zyx, generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        expected = [t.numpy() for t in wrapped(x)]
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    got = session.run(None, {"ct": x.numpy()})
    return max(float(np.abs(a - b).max()) for a, b in zip(expected, got))


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def lcm3(a, b):
    return [x * y // math.gcd(x, y) for x, y in zip(a, b)]


def card(name, detector, raw, strides, names, onnx_sha, weights, receptive, window_dependent, purpose, recipe):
    orientation, spacing, hu_window = preprocessing(raw)
    selector, inferer = detector.box_selector, detector.inferer
    size_divisible = [int(s) for s in detector.size_divisible]
    grid = lcm3(size_divisible, strides[-1])
    roi = [int(r) for r in inferer.roi_size]
    anchors = [a.tolist() for a in detector.anchor_generator.cell_anchors]
    levels = [
        {
            "classification": names[i],
            "box_regression": names[len(strides) + i],
            "stride": strides[i],
            "anchors": anchors[i],
        }
        for i in range(len(strides))
    ]
    return {
        "name": name,
        "version": "1",
        "purpose": purpose,
        "model_file": "model.onnx",
        "sha256": onnx_sha,
        "output_family": "retinanet",
        "input": {
            "name": "ct",
            "layout": TESSERA_LAYOUT,
            "hu_window": hu_window,
            "normalisation": "clip HU to hu_window, then (hu - lo) / (hi - lo) (MONAI's ScaleIntensityRanged to [0, 1], clipped)",
            "orientation": orientation,
        },
        "target_spacing_mm": spacing,
        "stride": grid,
        "receptive_field_voxels": receptive,
        "window_dependent": window_dependent,
        "outputs": None,
        "retinanet": {
            "num_classes": int(detector.num_classes),
            "levels": levels,
            "box_coder_weights": [float(w) for w in detector.box_coder.weights],
            "box_transform_clip": float(detector.box_coder.boxes_xform_clip),
            "topk_candidates_per_level": int(selector.topk_candidates_per_level),
            "nms_threshold": float(selector.nms_thresh),
            "detections_per_image": int(selector.detections_per_img),
            "size_divisible": size_divisible,
        },
        "tiling": {"blend": str(inferer.mode), "overlap": float(np.atleast_1d(inferer.overlap)[0])},
        "recommended_patch": roi,
        "default_score_threshold": float(selector.score_thresh),
        "lung_field": False,
        # A lung nodule detector: its findings are read in a lung window, and each gets a
        # Lung-RADS category suggested (it has no lung field to say so).
        "lung_rads": True,
        "display_window": {"name": "lung", "center_hu": -600, "width_hu": 1500},
        "training": {"recipe": recipe, **weights},
        "metrics": None,
    }


def convert(bundle_dir, out_dir, name, seed=None, adjust=None, purpose="", opset=17,
            recipe="training/monai_bundle/convert.py"):
    """Writes `out_dir/model.onnx` and `out_dir/model.json`; `adjust(network)` may change the
    weights before the export (the CI test model's heads). Returns the card."""
    detector, raw = load_bundle(bundle_dir)
    network = detector.network.eval()
    weights = load_weights(network, bundle_dir, seed)
    if adjust is not None:
        weights.update(adjust(network))
    network.eval()
    strides = level_strides(TesseraLayout(network).network, detector.size_divisible)
    receptive, bounded = receptive_field(network, detector.size_divisible)
    os.makedirs(out_dir, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir) as scratch:
        onnx_path = os.path.join(scratch, "model.onnx")
        names = export(network, onnx_path, opset, len(strides))
        patch_zyx = [int(p) for p in reversed(detector.inferer.roi_size)]
        check_zyx = [min(p, 4 * d) for p, d in zip(patch_zyx, reversed(detector.size_divisible))]
        drift = check_export(network, onnx_path, check_zyx)
        if drift > 1e-4:
            sys.exit(f"convert: ONNX Runtime differs from PyTorch by {drift:.2e} on one window: not written")
        the_card = card(
            name, detector, raw, strides, names, sha256(onnx_path), weights, receptive,
            window_norms(network), purpose, recipe,
        )
        the_card["training"]["export_check"] = f"ONNX Runtime vs PyTorch on a {check_zyx} window: max |difference| {drift:.1e}"
        if bounded:
            the_card["training"]["receptive_field"] = "at least this: it reached the edge of the probe"
        card_path = os.path.join(scratch, "model.json")
        with open(card_path, "w") as f:
            json.dump(the_card, f, indent=2)
            f.write("\n")
        os.replace(onnx_path, os.path.join(out_dir, "model.onnx"))
        os.replace(card_path, os.path.join(out_dir, "model.json"))
    return the_card, network, detector


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("bundle", help="a downloaded MONAI bundle folder (configs/inference.json, models/model.pt)")
    ap.add_argument("--out", required=True, help="the Tessera model folder to write")
    ap.add_argument("--name", help="the card's name (default: the bundle folder's name)")
    ap.add_argument("--random-weights", type=int, metavar="SEED", help="seeded weights instead of models/model.pt")
    ap.add_argument("--opset", type=int, default=17)
    args = ap.parse_args()
    name = args.name or os.path.basename(os.path.normpath(args.bundle))
    purpose = "MONAI bundle converted by training/monai_bundle/convert.py"
    if args.random_weights is not None:
        purpose += f"; random weights (seed {args.random_weights}): the architecture only, it finds nothing meaningful"
    the_card, _, _ = convert(args.bundle, args.out, name, args.random_weights, purpose=purpose, opset=args.opset)
    print(f"wrote {args.out}/model.onnx and model.json: {len(the_card['retinanet']['levels'])} levels, "
          f"strides {[l['stride'] for l in the_card['retinanet']['levels']]}, grid {the_card['stride']}, "
          f"receptive field {the_card['receptive_field_voxels']} voxels; {the_card['training']['export_check']}")


if __name__ == "__main__":
    main()
