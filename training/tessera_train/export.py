"""Export the trained network to ONNX (fp32 and fp16), check ONNX Runtime against PyTorch,
write `assets/models/<name>/` with its card. Metrics are added by `evaluate`.

Usage: python -m tessera_train.export --work DIR --out ../assets/models/tessera-nodule
"""

import argparse
import hashlib
import json
import os
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch

from . import config
from .fp16 import to_fp16
from .evaluate import series_of
from .net import LAYERS, Detector, receptive_field

OUTPUTS = ["heatmap", "size", "offset"]


def write_atomic(path: Path, data: bytes):
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def check_against_torch(net, path: Path, tol: float) -> float:
    """Largest difference between ORT and PyTorch on a volume of odd size."""
    x = torch.rand(1, 1, 37, 54, 46, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = [t.numpy() for t in net(x)]
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = session.run(OUTPUTS, {"ct": x.numpy()})
    worst = max(float(np.abs(a - b).max()) for a, b in zip(expected, got))
    if worst > tol:
        raise SystemExit(f"{path}: ONNX Runtime differs from PyTorch by {worst:.2e} (> {tol})")
    return worst


def card(onnx_sha: str, fp16_sha: str, parity: dict, steps: str, phase: str) -> dict:
    rf, stride = receptive_field()
    lo, hi = config.HU_WINDOW
    return {
        "name": config.NAME,
        "version": config.VERSION,
        "purpose": "Lung nodule detection on chest CT (research use, not for diagnosis): "
                   "3D CenterNet trained on synthetic phantoms and on LIDC-IDRI backgrounds "
                   "with inserted nodules.",
        "model_file": "model.onnx",
        "sha256": onnx_sha,
        "variants": {"fp16": {"model_file": "model_fp16.onnx", "sha256": fp16_sha}},
        "output_family": "centernet",
        "input": {"name": "ct", "layout": "NCDHW", "hu_window": [lo, hi],
                  "normalisation": "clip HU to hu_window, then (hu - lo) / (hi - lo): air is 0",
                  # The training volumes are DICOM series in their own order (x left, y posterior).
                  "orientation": "LPS"},
        "target_spacing_mm": [config.TARGET_SPACING_MM] * 3,
        "stride": stride,
        "receptive_field_voxels": rf,
        "outputs": {
            "heatmap": {"name": "heatmap", "meaning": "nodule centre probability, sigmoid, 1 channel"},
            "size": {"name": "size", "meaning": "box size in input voxels, channels x, y, z"},
            "offset": {"name": "offset",
                       "meaning": "sub-cell centre offset in [0, 1) output cells, channels x, y, z"},
        },
        "recommended_patch": [384, 384, 128],
        "lung_field": True,
        # Lung nodules are read in a lung window; the viewer opens studies there for this model.
        "display_window": {"name": "lung", "center_hu": -600, "width_hu": 1500},
        "coarse_pass": {"spacing_mm": [config.COARSE_SPACING_MM] * 3,
                        "min_size_mm": config.COARSE_MIN_MM},
        "default_score_threshold": 0.3,
        "training": {
            "recipe": "training/train.sh (training/tessera_train, fixed seeds)",
            "architecture": f"3x3x3 conv + batch norm + ReLU, (in, out, stride, dilation) = {LAYERS}; "
                            "heads 1x1x1 conv 32 -> ReLU -> 1x1x1 conv (1, 3, 3 channels)",
            "steps": steps, "batch": config.BATCH, "crop_voxels": config.CROP,
            "optimiser": f"AdamW, one-cycle lr {config.LR}, weight decay 1e-4",
            "loss": "CenterNet focal loss on the heatmap; L1 on log size and offset at centre cells",
            "data": {
                "phantoms": [f"tessera phantom {s}" for s in series_of(
                    config.TRAIN_PHANTOMS + (config.TRAIN_MASSES if phase == "masses" else []))],
                "lidc_backgrounds": f"{', '.join(config.LIDC_CASES)}: {config.LIDC_INSERTED} "
                                    "synthetic nodules inserted in the lungs of each; the readers' "
                                    "nodules are masked out of the loss (never used as positives)",
                "attribution": "LIDC-IDRI: Armato SG III et al., Medical Physics 38(2) 2011; "
                               "The Cancer Imaging Archive, CC BY 3.0 "
                               "(https://doi.org/10.7937/K9/TCIA.2015.LO9QL9SX)",
            },
            "onnx_vs_pytorch_max_abs_diff": parity,
        },
        "metrics": None,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--phase", choices=["first", "masses"], default="first")
    args = ap.parse_args()
    tag = "" if args.phase == "first" else "-masses"
    net = Detector()
    net.load_state_dict(torch.load(args.work / f"final{tag}.pt", weights_only=True))
    net.eval()
    args.out.mkdir(parents=True, exist_ok=True)
    staged = args.work / "model.onnx"
    axes = {"ct": {2: "d", 3: "h", 4: "w"}} | {o: {2: "d2", 3: "h2", 4: "w2"} for o in OUTPUTS}
    torch.onnx.export(net, (torch.zeros(1, 1, 32, 32, 32),), str(staged), input_names=["ct"],
                      output_names=OUTPUTS, dynamic_axes=axes, opset_version=17, dynamo=False)
    model = onnx.load(str(staged))
    onnx.checker.check_model(model)
    fp32 = model.SerializeToString()
    fp16 = to_fp16(model).SerializeToString()
    staged16 = args.work / "model_fp16.onnx"
    staged16.write_bytes(fp16)
    parity = {"fp32": check_against_torch(net, staged, 1e-4),
              "fp16": check_against_torch(net, staged16, 5e-2)}
    write_atomic(args.out / "model.onnx", fp32)
    write_atomic(args.out / "model_fp16.onnx", fp16)
    steps = torch.load(args.work / f"checkpoint{tag}.pt", weights_only=False)["step"]
    if args.phase == "masses":
        steps = (f"{config.STEPS}, then {steps} with masses (batch norm frozen, one-cycle lr "
                 f"{config.MASS_LR}, {config.MASS_SHARE:.0%} of crops from the mass phantoms, "
                 "a large lesion moved less so that it stays in the crop)")
    new = card(hashlib.sha256(fp32).hexdigest(), hashlib.sha256(fp16).hexdigest(), parity,
               str(steps), args.phase)
    old_path = args.out / "model.json"
    old = json.loads(old_path.read_text()) if old_path.is_file() else {}
    if old.get("training", {}).get("architecture") == new["training"]["architecture"]:
        new["memory"] = old.get("memory")  # it depends on the network only: kept
    text = json.dumps(new, indent=2)
    write_atomic(args.out / "model.json", (text + "\n").encode())
    print(f"wrote {args.out}: model.onnx {len(fp32)} bytes, model_fp16.onnx {len(fp16)} bytes; "
          f"ORT vs PyTorch max diff fp32 {parity['fp32']:.1e}, fp16 {parity['fp16']:.1e}")


if __name__ == "__main__":
    main()
