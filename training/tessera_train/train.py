"""Training loop: random crops, CenterNet focal loss, checkpoints (resumable).

Usage: python -m tessera_train.train --tessera BIN --work DIR --shared ../shared/data
       python -m tessera_train.train ... --phase masses --init-onnx MODEL_DIR/model.onnx
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


def crop_of(case: data.Case, rng, positive: bool, fit: bool):
    """A CROP^3 crop origin (x, y, z), near a nodule or anywhere, and the crop (air-padded).
    With `fit` (the masses phase) a large lesion is moved less, so that it stays in the crop."""
    shape = np.array(case.hu.shape[::-1])
    c = config.CROP
    if positive and len(case.centres):
        i = rng.integers(len(case.centres))
        jitter = float(np.clip((c - case.diameters[i]) / 2 - 2, 2, 14)) if fit else 14.0
        centre = case.centres[i] + rng.uniform(-jitter, jitter, 3)
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


def sample(case: data.Case, rng, fit: bool):
    """One augmented crop and its targets: flips along x and z (positions flipped with the
    voxels, targets computed after), a small HU shift and extra noise."""
    origin, vol = crop_of(case, rng, rng.random() < 0.6, fit)
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


def batch(cases, weights, rng, fit: bool):
    items = [sample(cases[rng.choice(len(cases), p=weights)], rng, fit)
             for _ in range(config.BATCH)]
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


def load_cases(args, rng, phase: str):
    """The training cases and the probability of drawing each."""
    train = data.make_phantoms(args.tessera, args.work, config.TRAIN_PHANTOMS, "train")
    cases = [data.load_phantom(s, n) for s, n in train]
    phantom_count = len(cases)
    for name in config.LIDC_CASES:
        if (args.shared / "lidc" / name).is_dir():
            cases.append(data.load_lidc(args.tessera, args.shared, args.work, name, rng))
        else:
            print(f"warning: {args.shared / 'lidc' / name} is missing: training on phantoms only")
    lidc_count = len(cases) - phantom_count
    weights = ([(1 - config.LIDC_SHARE) / phantom_count] * phantom_count
               + [config.LIDC_SHARE / max(lidc_count, 1)] * lidc_count)
    if phase == "masses":
        masses = data.make_phantoms(args.tessera, args.work, config.TRAIN_MASSES, "train-masses")
        cases += [data.load_phantom(s, n) for s, n in masses]
        weights = ([w * (1 - config.MASS_SHARE) for w in weights]
                   + [config.MASS_SHARE / len(masses)] * len(masses))
    weights = np.array(weights) / np.sum(weights)
    print(f"{phantom_count} phantoms, {lidc_count} LIDC backgrounds, {len(cases)} cases, "
          f"{sum(len(c.centres) for c in cases)} nodules")
    return cases, weights


def from_onnx(net: Detector, path: Path):
    """The exported (batch norm folded) weights, with each batch norm set to pass them on."""
    import onnx
    from onnx import numpy_helper
    init = {t.name: torch.from_numpy(numpy_helper.to_array(t).copy())
            for t in onnx.load(str(path)).graph.initializer}
    body = sorted((k for k in init if k.startswith("onnx::Conv_")),
                  key=lambda k: int(k.split("_")[-1]))
    convs = [m for m in net.body if isinstance(m, torch.nn.Conv3d)]
    norms = [m for m in net.body if isinstance(m, torch.nn.BatchNorm3d)]
    with torch.no_grad():
        for conv, norm, w, b in zip(convs, norms, body[0::2], body[1::2]):
            conv.weight.copy_(init[w])
            norm.running_mean.zero_(); norm.running_var.fill_(1.0 - norm.eps)
            norm.weight.fill_(1.0); norm.bias.copy_(init[b])
        for name, p in net.named_parameters():
            if not name.startswith("body."):
                p.copy_(init[name])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tessera", required=True)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--shared", type=Path, required=True)
    ap.add_argument("--phase", choices=["first", "masses"], default="first")
    ap.add_argument("--init-onnx", type=Path, help="masses phase: the first phase's model.onnx")
    args = ap.parse_args()
    first = args.phase == "first"
    seed, steps, lr = ((config.SEED, config.STEPS, config.LR) if first
                       else (config.MASS_SEED, config.MASS_STEPS, config.MASS_LR))
    torch.manual_seed(seed)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    rng = np.random.default_rng(seed)
    cases, weights = load_cases(args, rng, args.phase)

    net = Detector()
    if not first:
        from_onnx(net, args.init_onnx)
    opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=1e-4)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, lr, total_steps=steps, pct_start=0.05)
    tag = "" if first else "-masses"
    ckpt = args.work / f"checkpoint{tag}.pt"
    start = 0
    if ckpt.is_file():
        state = torch.load(ckpt, weights_only=False)
        net.load_state_dict(state["net"]); opt.load_state_dict(state["opt"])
        sched.load_state_dict(state["sched"]); rng.bit_generator.state = state["rng"]
        torch.set_rng_state(state["torch_rng"])
        start = state["step"]
        print(f"resuming at step {start}")
    net.train()
    if not first:  # frozen statistics: the folded weights stay what the first phase made
        for m in net.modules():
            if isinstance(m, torch.nn.BatchNorm3d):
                m.eval()
    t0, running = time.time(), np.zeros(3)
    for step in range(start, steps):
        losses = loss_fn(net, *batch(cases, weights, rng, fit=not first))
        total = losses[0] + losses[1] + losses[2]
        opt.zero_grad()
        total.backward()
        opt.step()
        sched.step()
        running = 0.98 * running + 0.02 * np.array([l.item() for l in losses])
        if (step + 1) % 50 == 0:
            print(f"step {step + 1}/{steps} focal {running[0]:.3f} size {running[1]:.3f} "
                  f"offset {running[2]:.3f} ({time.time() - t0:.0f} s)", flush=True)
        if (step + 1) % 500 == 0 or step + 1 == steps:
            tmp = ckpt.with_suffix(".tmp")
            torch.save({"net": net.state_dict(), "opt": opt.state_dict(),
                        "sched": sched.state_dict(), "rng": rng.bit_generator.state,
                        "torch_rng": torch.get_rng_state(), "step": step + 1}, tmp)
            tmp.replace(ckpt)
    torch.save(net.state_dict(), args.work / f"final{tag}.pt")


if __name__ == "__main__":
    main()
