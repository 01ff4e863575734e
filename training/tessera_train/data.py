"""Training data: volumes exactly as the pipeline feeds the model (`tessera resample`), with
nodule centres and diameters in voxels of that grid.

Usage: python -m tessera_train.data --tessera BIN --work DIR --shared ../shared/data
"""

import argparse
import json
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy import ndimage

from . import config


@dataclass
class Case:
    name: str
    hu: np.ndarray  # int16 [z, y, x]
    centres: np.ndarray  # (n, 3) voxels x, y, z
    diameters: np.ndarray  # (n,) voxels
    ignore: np.ndarray = field(default_factory=lambda: np.zeros((0, 4)))  # x, y, z, radius


def voxel_from_world(sidecar: dict, lps_mm) -> np.ndarray:
    """Inverse of the sidecar's `world_from_voxel`."""
    a = sidecar["world_from_voxel"]
    linear, t = np.array(a["linear"]), np.array(a["translation"])
    return np.linalg.solve(linear, np.asarray(lps_mm, dtype=float) - t)


def run(cmd):
    subprocess.run([str(c) for c in cmd], check=True, stdout=subprocess.DEVNULL)


def make_phantoms(tessera, work: Path, table, tag: str):
    """Writes each phantom series (for evaluation) and its resampled npy (for training)."""
    out = []
    for seeds, size, spacing, nodules, noise, *masses in table:
        for seed in seeds:
            series = work / tag / f"phantom-{seed}"
            npy = work / tag / f"phantom-{seed}.npy"
            if not (series / "truth.json").is_file():
                run([tessera, "phantom", "--out", series, "--seed", seed, "--size", size,
                     "--spacing", spacing, "--nodules", nodules, "--noise", noise,
                     *(["--masses", masses[0]] if masses else [])])
            if not npy.is_file():
                run([tessera, "resample", series, "--spacing-mm", config.TARGET_SPACING_MM,
                     "--out", npy])
            out.append((series, npy))
    return out


def load_phantom(series: Path, npy: Path) -> Case:
    sidecar = json.loads(npy.with_suffix(".json").read_text())
    truth = json.loads((series / "truth.json").read_text())
    spacing = np.array(sidecar["spacing_mm"])
    centres = [voxel_from_world(sidecar, n["center_lps_mm"]) for n in truth["nodules"]]
    diameters = [n["diameter_mm"] / spacing.mean() for n in truth["nodules"]]
    return Case(series.name, np.load(npy), np.array(centres).reshape(-1, 3), np.array(diameters))


def lung_mask(hu: np.ndarray) -> np.ndarray:
    """Air inside the body: low HU, not connected to the volume's border."""
    air = ndimage.uniform_filter(hu.astype(np.float32), 3) < -500
    labels, _ = ndimage.label(air)
    border = np.unique(np.concatenate([labels[:, 0].ravel(), labels[:, -1].ravel(),
                                       labels[:, :, 0].ravel(), labels[:, :, -1].ravel()]))
    return air & ~np.isin(labels, border)


def insert_nodules(hu: np.ndarray, rng: np.random.Generator, count: int, spacing_mm: float):
    """Synthetic nodules in the lungs of a real scan: solid, part-solid or ground-glass
    spheres with a one-voxel partial-volume edge and noise like the scan's."""
    hu = hu.astype(np.float32)
    lung = ndimage.binary_erosion(lung_mask(hu), iterations=2)
    candidates = np.argwhere(lung)  # z, y, x
    centres, diameters = [], []
    for _ in range(count * 20):
        if len(centres) == count or len(candidates) == 0:
            break
        z, y, x = candidates[rng.integers(len(candidates))]
        d_mm = float(np.exp(rng.uniform(np.log(4.0), np.log(30.0))))
        r = d_mm / spacing_mm / 2
        c = np.array([x, y, z], float) + rng.uniform(-0.5, 0.5, 3)
        if any(np.linalg.norm(c - o) < r + dd / 2 + 4 for o, dd in zip(centres, diameters)):
            continue
        lo = np.maximum(np.floor(c - r - 2).astype(int), 0)
        hi = np.minimum(np.ceil(c + r + 3).astype(int), np.array(hu.shape[::-1]))
        if np.any(hi - lo < 3):
            continue
        zz, yy, xx = np.ogrid[lo[2]:hi[2], lo[1]:hi[1], lo[0]:hi[0]]
        dist = np.sqrt((xx - c[0]) ** 2 + (yy - c[1]) ** 2 + (zz - c[2]) ** 2)
        # Mostly in lung: nodules may touch vessels and pleura, not sit in the chest wall.
        if lung[zz, yy, xx][dist <= r].mean() < 0.7:
            continue
        kind = rng.choice(["solid", "part-solid", "ground-glass"], p=[0.6, 0.2, 0.2])
        core = {"solid": 30.0, "part-solid": -100.0, "ground-glass": -550.0}[kind]
        target = core + rng.normal(0, 20, dist.shape)
        if kind == "part-solid":
            target = np.where(dist < r * 0.5, 20.0, -550.0) + rng.normal(0, 20, dist.shape)
        w = np.clip(r + 0.5 - dist, 0, 1)
        box = hu[zz, yy, xx]
        hu[zz, yy, xx] = box + w * (target - box)
        centres.append(c)
        diameters.append(2 * r)
    return np.round(hu).astype(np.int16), np.array(centres).reshape(-1, 3), np.array(diameters)


def resampled_lidc(tessera, shared: Path, work: Path, case: str) -> Path:
    """The case resampled to the model's grid (cached): the `.npy`, its sidecar beside it."""
    npy = work / "lidc" / f"{case}.npy"
    if not npy.is_file():
        npy.parent.mkdir(parents=True, exist_ok=True)
        run([tessera, "resample", shared / "lidc" / case, "--spacing-mm",
             config.TARGET_SPACING_MM, "--out", npy])
    return npy


def load_lidc(tessera, shared: Path, work: Path, case: str, rng) -> Case:
    npy = resampled_lidc(tessera, shared, work, case)
    sidecar = json.loads(npy.with_suffix(".json").read_text())
    spacing = float(np.mean(sidecar["spacing_mm"]))
    hu, centres, diameters = insert_nodules(np.load(npy), rng, config.LIDC_INSERTED, spacing)
    ignore = [np.append(voxel_from_world(sidecar, n["center_lps_mm"]),
                        max(n["diameter_mm"], 6.0) / spacing / 2 + 3)
              for n in sidecar["lidc_nodules"]]
    return Case(case, hu, centres, diameters, np.array(ignore).reshape(-1, 4))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tessera", required=True)
    ap.add_argument("--work", type=Path, required=True)
    args = ap.parse_args()
    for tag in ("train", "held-out", "held-out-masses", "lidc"):
        (args.work / tag).mkdir(parents=True, exist_ok=True)
    train = make_phantoms(args.tessera, args.work, config.TRAIN_PHANTOMS, "train")
    held = make_phantoms(args.tessera, args.work, config.HELD_OUT_PHANTOMS, "held-out")
    held += make_phantoms(args.tessera, args.work, config.HELD_OUT_MASSES, "held-out-masses")
    print(f"{len(train)} training and {len(held)} held-out phantoms in {args.work}")


if __name__ == "__main__":
    main()
