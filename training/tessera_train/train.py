"""Training loop: random crops, CenterNet focal loss, checkpoints (resumable).

Usage: python -m tessera_train.train --tessera BIN --work DIR --shared ../shared/data
"""

import argparse
import time
from pathlib import Path

import numpy as np
import torch

from . import config, data
from .net import Detector

LO, HI = config.HU_WINDOW


def normalise(hu):
    return (np.clip(hu.astype(np.float32), LO, HI) - LO) / (HI - LO)


def crop_of(case: data.Case, rng, positive: bool):
    """A CROP^3 crop origin (x, y, z), near a nodule or anywhere, and the crop (air-padded)."""
    shape = np.array(case.hu.shape[::-1])
    c = config.CROP
    if positive and len(case.centres):
        centre = case.centres[rng.integers(len(case.centres))] + rng.uniform(-14, 14, 3)
    else:
        centre = rng.uniform(0.1, 0.9, 3) * shape
    # Origins on the stride grid, as the tiling engine places windows.
    origin = (np.floor((centre - c / 2) / config.STRIDE) * config.STRIDE).astype(int)
    out = np.full((c, c, c), LO, np.float32)
    lo, hi = np.maximum(origin, 0), np.minimum(origin + c, shape)
    if np.all(hi > lo):
        out[lo[2] - origin[2]:hi[2] - origin[2], lo[1] - origin[1]:hi[1] - origin[1],
            lo[0] - origin[0]:hi[0] - origin[0]] = case.hu[lo[2]:hi[2], lo[1]:hi[1], lo[0]:hi[0]]
    return origin, out


def targets(centres, diameters, ignore):
    """Heatmap (Gaussian per nodule, peak 1 at its cell), loss weight (0 near ignored
    nodules), and size/offset targets with a mask at the peak cells. Positions are voxels
    of the crop, x y z."""
    n = config.CROP // config.STRIDE
    heat = np.zeros((n, n, n), np.float32)
    weight = np.ones((n, n, n), np.float32)
    reg = np.zeros((6, n, n, n), np.float32)
    mask = np.zeros((n, n, n), np.float32)
    zz, yy, xx = np.ogrid[0:n, 0:n, 0:n]
    for centre, diameter in zip(centres, diameters):
        rel = centre / config.STRIDE  # cells: the decoder's centre is (cell + offset) * stride
        cell = np.floor(rel).astype(int)
        sigma = max(0.7, diameter / config.STRIDE / 6)
        if np.any(cell < -3 * sigma) or np.any(cell >= n + 3 * sigma):
            continue
        g = np.exp(-((xx - cell[0]) ** 2 + (yy - cell[1]) ** 2 + (zz - cell[2]) ** 2)
                   / (2 * sigma ** 2))
        np.maximum(heat, g.astype(np.float32), out=heat)
        if np.all(cell >= 0) and np.all(cell < n):
            x, y, z = cell
            heat[z, y, x] = 1.0
            mask[z, y, x] = 1.0
            reg[0:3, z, y, x] = np.log(max(diameter, 1.0))
            reg[3:6, z, y, x] = rel - cell
    for x0, y0, z0, r in ignore:
        rel = np.array([x0, y0, z0]) / config.STRIDE
        d2 = (xx - rel[0]) ** 2 + (yy - rel[1]) ** 2 + (zz - rel[2]) ** 2
        weight[d2 <= (r / config.STRIDE) ** 2] = 0.0
    return heat, weight, reg, mask


def sample(case: data.Case, rng):
    """One augmented crop and its targets: flips along x and z (positions flipped with the
    voxels, targets computed after), a small HU shift and extra noise."""
    origin, vol = crop_of(case, rng, positive=rng.random() < 0.6)
    centres = case.centres - origin
    ignore = case.ignore.copy()
    ignore[:, :3] -= origin
    last = config.CROP - 1
    for axis_vol, axis_xyz in ((2, 0), (0, 2)):
        if rng.random() < 0.5:
            vol = np.flip(vol, axis_vol)
            centres[:, axis_xyz] = last - centres[:, axis_xyz]
            ignore[:, axis_xyz] = last - ignore[:, axis_xyz]
    vol = vol + rng.normal(0, 20) + rng.normal(0, rng.uniform(0, 12), vol.shape)
    return [np.ascontiguousarray(vol, dtype=np.float32),
            *targets(centres, case.diameters, ignore)]


def batch(cases, weights, rng):
    items = [sample(cases[rng.choice(len(cases), p=weights)], rng) for _ in range(config.BATCH)]
    vol, heat, weight, reg, mask = (np.stack(x) for x in zip(*items))
    return (torch.from_numpy(normalise(vol))[:, None], torch.from_numpy(heat)[:, None],
            torch.from_numpy(weight)[:, None], torch.from_numpy(reg),
            torch.from_numpy(mask)[:, None])


def loss_fn(net, vol, heat, weight, reg, mask):
    heat_logit, log_size, offset_logit = net.raw(vol)
    p = torch.sigmoid(heat_logit).clamp(1e-4, 1 - 1e-4)
    pos = (heat == 1).float()
    n_pos = pos.sum().clamp(min=1)
    focal = -(pos * torch.log(p) * (1 - p) ** 2
              + (1 - pos) * torch.log(1 - p) * p ** 2 * (1 - heat) ** 4) * weight
    size_l1 = (torch.abs(log_size - reg[:, 0:3]) * mask).sum() / n_pos
    offset_l1 = (torch.abs(torch.sigmoid(offset_logit) - reg[:, 3:6]) * mask).sum() / n_pos
    return focal.sum() / n_pos, size_l1, offset_l1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tessera", required=True)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--shared", type=Path, required=True)
    ap.add_argument("--steps", type=int, default=config.STEPS)
    args = ap.parse_args()
    torch.manual_seed(config.SEED)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    rng = np.random.default_rng(config.SEED)
    train = data.make_phantoms(args.tessera, args.work, config.TRAIN_PHANTOMS, "train")
    cases = [data.load_phantom(s, n) for s, n in train]
    phantom_count = len(cases)
    for name in config.LIDC_CASES:
        if (args.shared / "lidc" / name).is_dir():
            cases.append(data.load_lidc(args.tessera, args.shared, args.work, name, rng))
        else:
            print(f"warning: {args.shared / 'lidc' / name} is missing: training on phantoms only")
    lidc_count = len(cases) - phantom_count
    weights = np.array([(1 - config.LIDC_SHARE) / phantom_count] * phantom_count
                       + [config.LIDC_SHARE / max(lidc_count, 1)] * lidc_count)
    weights /= weights.sum()
    print(f"{phantom_count} phantoms, {lidc_count} LIDC backgrounds, "
          f"{sum(len(c.centres) for c in cases)} nodules")

    net = Detector()
    opt = torch.optim.AdamW(net.parameters(), lr=config.LR, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, config.LR, total_steps=args.steps,
                                                pct_start=0.05)
    ckpt = args.work / "checkpoint.pt"
    start = 0
    if ckpt.is_file():
        state = torch.load(ckpt, weights_only=False)
        net.load_state_dict(state["net"]); opt.load_state_dict(state["opt"])
        sched.load_state_dict(state["sched"]); rng.bit_generator.state = state["rng"]
        torch.set_rng_state(state["torch_rng"])
        start = state["step"]
        print(f"resuming at step {start}")
    net.train()
    t0, running = time.time(), np.zeros(3)
    for step in range(start, args.steps):
        losses = loss_fn(net, *batch(cases, weights, rng))
        total = losses[0] + losses[1] + losses[2]
        opt.zero_grad()
        total.backward()
        opt.step()
        sched.step()
        running = 0.98 * running + 0.02 * np.array([l.item() for l in losses])
        if (step + 1) % 50 == 0:
            print(f"step {step + 1}/{args.steps} focal {running[0]:.3f} size {running[1]:.3f} "
                  f"offset {running[2]:.3f} ({time.time() - t0:.0f} s)", flush=True)
        if (step + 1) % 500 == 0 or step + 1 == args.steps:
            tmp = ckpt.with_suffix(".tmp")
            torch.save({"net": net.state_dict(), "opt": opt.state_dict(),
                        "sched": sched.state_dict(), "rng": rng.bit_generator.state,
                        "torch_rng": torch.get_rng_state(), "step": step + 1}, tmp)
            tmp.replace(ckpt)
    torch.save(net.state_dict(), args.work / "final.pt")


if __name__ == "__main__":
    main()
