"""The rescoring stage: a small 3D classifier that rescores the detector's best candidates
(false-positive reduction, as LUNA16 systems do). `tessera detect` runs it when the card names
it (`rescore` in model.json): on the resampled volume, a PATCH^3 patch around each of the TOP
best candidates, normalised like the detector's input; the final score is the geometric mean
of its probability and the detector's score (a finding needs both; see README.md).

Training candidates are the detector's own top detections on the training phantoms
(`tessera detect --no-rescore`, cached in WORK/rescore/train); a candidate is positive when its
centre lies inside a nodule, as `tessera evaluate` counts a hit. Writes `rescore.onnx` (checked
against PyTorch) and the card's `rescore` section; `evaluate` then measures the whole pipeline.

Usage: python -m tessera_train.rescore --tessera BIN --work DIR --shared ../shared/data --model DIR
"""

import hashlib
import json
import time
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import torch
from scipy import ndimage
from torch import nn

from . import config, data
from .evaluate import FROC_THRESHOLD, arguments, detect, hits_a_nodule
from .export import write_atomic
from .train import normalise

PATCH = 24  # voxels at the target spacing (30 mm), centred on the candidate
TOP = 300  # candidates per scan, best detector score first
JITTER = 2  # training crops move the centre by up to this many voxels along each axis
STEPS = 3000
SEED = 7
# A candidate wider than this (mean box side, voxels: 20 mm) is cut from a cube scaled to
# show it 20 mm wide in the patch, as nodules up to 30 mm are seen in training.
SCALE_ABOVE = 16.0


def patch_scale(size_voxels, scale_above) -> float:
    """How much wider than the patch the cube around a candidate of this box is (the card's
    `scale_above_voxels`, None: never; `tessera`'s `RescoreSpec::patch_scale`)."""
    if scale_above is None:
        return 1.0
    return max(float(np.mean(size_voxels)) / scale_above, 1.0)


def scaled_patch(hu: np.ndarray, centre_xyz, edge: int, scale: float) -> np.ndarray:
    """`edge` points per axis `scale` voxels apart about the middle of the unscaled patch
    (round(c) - 0.5), trilinear in HU, air outside: `scaled_candidate_patch` in tessera."""
    middle = np.round(centre_xyz) - 0.5
    steps = (np.arange(edge) - (edge - 1) / 2) * scale
    x, y, z = (middle[a] + steps for a in range(3))
    grid = np.meshgrid(z, y, x, indexing="ij")
    out = ndimage.map_coordinates(hu.astype(np.float32), grid, order=1, mode="constant",
                                  cval=config.HU_WINDOW[0])
    return np.round(out).astype(np.int16)


def candidates(det: dict, npy: Path, edge: int = PATCH, scale_above=None):
    """The top candidates and their `edge`^3 patches (int16 HU, air outside the volume), the
    cube scaled for candidates wider than `scale_above` voxels as the pipeline scales it."""
    sidecar = json.loads(npy.with_suffix(".json").read_text())
    volume = np.load(npy)
    h = edge // 2 + 2
    hu = np.pad(volume, h, constant_values=int(config.HU_WINDOW[0]))
    dets = det["detections"][:TOP]
    lo, hi = edge // 2, edge - edge // 2
    patches = np.zeros((len(dets), edge, edge, edge), np.int16)
    for i, d in enumerate(dets):
        centre = data.voxel_from_world(sidecar, d["center_lps_mm"])
        scale = patch_scale(d["model_box"]["size"], scale_above)
        if scale > 1.0:
            patches[i] = scaled_patch(volume, centre, edge, scale)
            continue
        x, y, z = np.round(centre).astype(int) + h
        patches[i] = hu[z - lo:z + hi, y - lo:y + hi, x - lo:x + hi]
    return dets, patches


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()

        def block(c_in, c_out):
            return [nn.Conv3d(c_in, c_out, 3, padding=1, bias=False), nn.BatchNorm3d(c_out),
                    nn.ReLU(inplace=True)]

        self.features = nn.Sequential(*block(1, 16), *block(16, 16), nn.MaxPool3d(2),
                                      *block(16, 32), *block(32, 32), nn.MaxPool3d(2),
                                      *block(32, 64), *block(64, 64), nn.MaxPool3d(2))
        cells = (PATCH // 8) ** 3
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(64 * cells, 64), nn.ReLU(inplace=True),
                                  nn.Dropout(0.3), nn.Linear(64, 1))

    def forward(self, x):
        return self.head(self.features(x))


def augment(batch: np.ndarray, rng) -> np.ndarray:
    """Flips and axis permutations (the grid is isotropic), HU shift and noise."""
    for axis in (1, 2, 3):
        if rng.random() < 0.5:
            batch = np.flip(batch, axis)
    batch = np.transpose(batch, (0, *rng.permutation([1, 2, 3])))
    batch = batch + rng.normal(0, 20) + rng.normal(0, rng.uniform(0, 12), batch.shape)
    return np.ascontiguousarray(batch, dtype=np.float32)


def train(patches: np.ndarray, labels: np.ndarray, rng) -> Classifier:
    """`patches` are PATCH + 2 JITTER wide: each step crops PATCH^3 at a random offset."""
    pos, neg = np.flatnonzero(labels), np.flatnonzero(~labels)
    net = Classifier()
    opt = torch.optim.AdamW(net.parameters(), 1e-3, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, 1e-3, total_steps=STEPS, pct_start=0.05)
    t0, running = time.time(), 0.0
    for step in range(STEPS):
        idx = np.concatenate([rng.choice(pos, 12), rng.choice(neg, 20)])  # balanced batches
        offsets = rng.integers(0, 2 * JITTER + 1, size=(len(idx), 3))
        batch = np.stack([patches[i][z:z + PATCH, y:y + PATCH, x:x + PATCH]
                          for i, (z, y, x) in zip(idx, offsets)])
        x = torch.from_numpy(normalise(augment(batch, rng)))[:, None]
        y = torch.from_numpy(labels[idx].astype(np.float32))[:, None]
        loss = nn.functional.binary_cross_entropy_with_logits(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        running = 0.98 * running + 0.02 * loss.item()
        if (step + 1) % 200 == 0:
            print(f"step {step + 1}/{STEPS} loss {running:.3f} ({time.time() - t0:.0f} s)",
                  flush=True)
    return net.eval()


class Scored(nn.Module):
    """What ships: the classifier's probability, `[n, 1]`."""

    def __init__(self, net: Classifier):
        super().__init__()
        self.net = net

    def forward(self, x):
        return torch.sigmoid(self.net(x))


def export(net: Classifier, model_dir: Path, work: Path, trained_on: str, scale_above=None):
    """Writes `rescore.onnx` (checked against PyTorch) and the card's `rescore` section."""
    scored = Scored(net).eval()
    staged = work / "rescore.onnx"
    torch.onnx.export(scored, (torch.zeros(2, 1, PATCH, PATCH, PATCH),), str(staged),
                      input_names=["patch"], output_names=["score"],
                      dynamic_axes={"patch": {0: "n"}, "score": {0: "n"}}, opset_version=17,
                      dynamo=False)
    onnx.checker.check_model(onnx.load(str(staged)))
    x = torch.rand(5, 1, PATCH, PATCH, PATCH, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = scored(x).numpy()
    session = ort.InferenceSession(str(staged), providers=["CPUExecutionProvider"])
    worst = float(np.abs(session.run(["score"], {"patch": x.numpy()})[0] - expected).max())
    if worst > 1e-5:
        raise SystemExit(f"{staged}: ONNX Runtime differs from PyTorch by {worst:.2e}")
    data_bytes = staged.read_bytes()
    write_atomic(model_dir / "rescore.onnx", data_bytes)
    card_path = model_dir / "model.json"
    card = json.loads(card_path.read_text())
    card["rescore"] = {
        "model_file": "rescore.onnx",
        "sha256": hashlib.sha256(data_bytes).hexdigest(),
        "input": "patch",
        "output": "score",
        "patch_voxels": PATCH,
        "candidates": TOP,
        "candidate_threshold": FROC_THRESHOLD,
        "combine": "geometric_mean",
        "default_score_threshold": 0.5,
        "meaning": f"probability that a candidate is a nodule, from a {PATCH}^3 patch of the "
                   "resampled volume centred on the candidate's voxel (rounded), normalised "
                   "like the detector's input, air outside the volume; "
                   + (f"a candidate wider than {scale_above:g} voxels (mean box side) is seen "
                      f"through a cube scaled by side / {scale_above:g}, sampled trilinearly; "
                      if scale_above else "")
                   + "the final score is sqrt(detector score * this probability)",
        "training": {
            "recipe": "training/tessera_train/rescore.py (seed 7)",
            "architecture": "2 x (3x3x3 conv + batch norm + ReLU) then 2x2x2 max pool, three "
                            "times (16, 32, 64 channels); fully connected 64, dropout 0.3, 1; "
                            "sigmoid",
            "steps": STEPS,
            "batch": "12 candidates on nodules + 20 others",
            "augmentation": f"centre jitter of up to {JITTER} voxels per axis, flips, axis "
                            "permutations, HU shift and noise",
            "data": trained_on,
            "onnx_vs_pytorch_max_abs_diff": worst,
        },
    }
    if scale_above:
        card["rescore"]["scale_above_voxels"] = scale_above
    write_atomic(card_path, (json.dumps(card, indent=2) + "\n").encode())
    print(f"wrote {model_dir / 'rescore.onnx'}: {len(data_bytes)} bytes; ORT vs PyTorch max "
          f"diff {worst:.1e}")


def main():
    args = arguments(with_masses=True)
    scale_above = SCALE_ABOVE if args.with_masses else None
    torch.manual_seed(SEED)
    rng = np.random.default_rng(SEED)
    cache = args.work / "rescore" / "train"
    cache.mkdir(parents=True, exist_ok=True)
    xs, ys = [], []
    # The detector's training phantoms, and with --with-masses its second phase's (large
    # positives too).
    phantoms = data.make_phantoms(args.tessera, args.work, config.TRAIN_PHANTOMS, "train")
    if args.with_masses:
        phantoms += data.make_phantoms(args.tessera, args.work, config.TRAIN_MASSES,
                                       "train-masses")
    # The main pass's candidates only (--no-coarse-pass): the shipped stage was trained before
    # the coarse pass existed.
    for series, npy in phantoms:
        det = detect(args.tessera, series, args.model, cache / f"{series.name}.det.json",
                     rescore=False, coarse=False)
        dets, patches = candidates(det, npy, PATCH + 2 * JITTER, scale_above)
        xs.append(patches)
        truth = json.loads((series / "truth.json").read_text())
        ys.append(np.array([hits_a_nodule(d, truth) for d in dets], dtype=bool))
    patches, labels = np.concatenate(xs), np.concatenate(ys)
    trained_on = (f"the detector's top {TOP} candidates (score >= {FROC_THRESHOLD}) on the "
                  f"{len(xs)} training phantoms{' (masses included)' if args.with_masses else ''}: "
                  f"{len(patches)} candidates, {labels.sum()} "
                  "on nodules")
    print(trained_on, flush=True)
    net = train(patches, labels, rng)
    torch.save(net.state_dict(), args.work / "rescore.pt")
    export(net, args.model, args.work, trained_on, scale_above)


if __name__ == "__main__":
    main()
