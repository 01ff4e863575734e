"""Experiment, not part of the shipped recipe or the pipeline: a second-stage classifier that
rescores the detector's candidates (false-positive reduction, as LUNA16 systems do), measured
through `tessera evaluate` on the held-out phantoms and the LIDC cases.

It runs after `evaluate` (it reads the held-out candidates that `evaluate` cached in
WORK/eval). Training candidates are the shipped detector's top detections on the training
phantoms (`tessera detect`, cached in WORK/fpr/train); a candidate is positive when its centre
lies inside a nodule, as `tessera evaluate` counts a hit.

Usage: python -m tessera_train.fpr --tessera BIN --work DIR --shared ../shared/data --model DIR
"""

import json
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

from . import config, data
from .evaluate import arguments, detect, evaluate, hits_a_nodule
from .train import normalise

PATCH = 24  # voxels at the target spacing (30 mm), centred on the candidate
TOP = 300  # candidates per scan, best detector score first
STEPS = 2000
SEED = 7


def candidates(det: dict, npy: Path):
    """The top candidates and their patches (int16 HU, air outside the volume)."""
    sidecar = json.loads(npy.with_suffix(".json").read_text())
    h = PATCH // 2 + 2
    hu = np.pad(np.load(npy), h, constant_values=int(config.HU_WINDOW[0]))
    dets = det["detections"][:TOP]
    lo, hi = PATCH // 2, PATCH - PATCH // 2
    patches = np.zeros((len(dets), PATCH, PATCH, PATCH), np.int16)
    for i, d in enumerate(dets):
        x, y, z = np.round(data.voxel_from_world(sidecar, d["center_lps_mm"])).astype(int) + h
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
    pos, neg = np.flatnonzero(labels), np.flatnonzero(~labels)
    net = Classifier()
    opt = torch.optim.AdamW(net.parameters(), 1e-3, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, 1e-3, total_steps=STEPS, pct_start=0.05)
    t0, running = time.time(), 0.0
    for step in range(STEPS):
        idx = np.concatenate([rng.choice(pos, 12), rng.choice(neg, 20)])  # balanced batches
        x = torch.from_numpy(normalise(augment(patches[idx], rng)))[:, None]
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


def rescore(net: Classifier, det_path: Path, npy: Path, out_dir: Path):
    """The run's top candidates twice, best first: as the detector scored them, and scored by
    the classifier alone. Returns both files' paths."""
    det = json.loads(det_path.read_text())
    dets, patches = candidates(det, npy)
    p = []
    with torch.no_grad():
        for i in range(0, len(patches), 64):
            x = torch.from_numpy(normalise(patches[i:i + 64]))[:, None]
            p.extend(torch.sigmoid(net(x))[:, 0].tolist())
    name = det_path.name.removesuffix(".det.json")
    paths = out_dir / f"{name}.top.json", out_dir / f"{name}.fpr.json"
    for path, scored in zip(paths, (dets, [{**d, "score": float(q)} for d, q in zip(dets, p)])):
        path.write_text(json.dumps({**det, "detections": sorted(scored,
                                                                key=lambda d: -d["score"])}))
    return paths


def main():
    args = arguments()
    torch.manual_seed(SEED)
    rng = np.random.default_rng(SEED)
    (args.work / "fpr" / "train").mkdir(parents=True, exist_ok=True)
    (args.work / "fpr" / "eval").mkdir(parents=True, exist_ok=True)
    xs, ys = [], []
    for series, npy in data.make_phantoms(args.tessera, args.work, config.TRAIN_PHANTOMS, "train"):
        det = detect(args.tessera, series, args.model,
                     args.work / "fpr" / "train" / f"{series.name}.det.json")
        dets, patches = candidates(det, npy)
        xs.append(patches)
        truth = json.loads((series / "truth.json").read_text())
        ys.append(np.array([hits_a_nodule(d, truth) for d in dets], dtype=bool))
    patches, labels = np.concatenate(xs), np.concatenate(ys)
    print(f"{len(patches)} training candidates, {labels.sum()} on nodules", flush=True)
    net = train(patches, labels, rng)

    # (run, its resampled volume, its truth, the evaluate flag) for every scan measured.
    scans = [(args.work / "eval" / f"{series.name}.det.json", npy, series / "truth.json",
              "--phantom")
             for series, npy in data.make_phantoms(args.tessera, args.work,
                                                   config.HELD_OUT_PHANTOMS, "held-out")]
    scans += [(args.work / "eval" / f"{case}.det.json", args.work / "lidc" / f"{case}.npy",
               args.shared / "lidc" / case, "--lidc")
              for case in config.LIDC_CASES if (args.shared / "lidc" / case).is_dir()]
    pairs = {}  # (flag, "detector" | "rescored") -> [(run, truth)]
    for det_path, npy, truth, flag in scans:
        top, fpr = rescore(net, det_path, npy, args.work / "fpr" / "eval")
        pairs.setdefault((flag, "detector"), []).append((top, truth))
        pairs.setdefault((flag, "rescored"), []).append((fpr, truth))
    for (flag, label), runs in pairs.items():
        froc = evaluate(args.tessera, flag, runs)
        print(f"{flag[2:]}, {label}: CPM {froc['cpm']:.4f}, sensitivity "
              f"{' '.join(f'{s:.3f}' for s in froc['sensitivity'])}")


if __name__ == "__main__":
    main()
