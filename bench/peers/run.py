#!/usr/bin/env python3
"""Tessera against MONAI's sliding-window inference (onnxruntime), same model, same grid.

Runs each configuration --repeat times, each in a fresh process, keeps the fastest, and prints
one table: windows, inference seconds, whole-process seconds, peak RSS, and ratios to Tessera's
default run. By hand only (never in CI); needs a release build and a Python with the peer's
packages (bench/peers/README.md).

    python3 bench/peers/run.py [STUDY] --peer-python /path/to/venv/bin/python --repeat 3

Inference seconds: Tessera's windows (det.json stats.inference_s), MONAI's sliding_window_inference
call. Process seconds: the whole command (Tessera: DICOM load, resampling, inference, decoding,
rescoring; MONAI: imports, loading the .npy, session, inference). Peak RSS: Tessera's own
measure (VmHWM per phase, det.json), the peer's getrusage maxrss.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TESSERA = os.path.join(ROOT, "target", "release", "tessera")
MODEL = os.path.join(ROOT, "assets", "models", "tessera-nodule")
PEER = os.path.join(ROOT, "bench", "peers", "monai_onnx.py")


def timed(command):
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"run.py: {' '.join(command)} failed:\n{done.stderr.strip()}")
    return done, seconds


def tessera(study, out, extra):
    def once():
        _, wall = timed([TESSERA, "detect", study, "--out", out, "--force", *extra])
        with open(out) as f:
            stats = json.load(f)["stats"]
        peak = max(stats["peak_memory_bytes"], stats.get("rescore_peak_bytes", 0))
        return stats["windows"], stats["inference_s"], wall, peak

    return once


def peer(python, grid, extra):
    def once():
        done, wall = timed([python, PEER, grid, MODEL, *extra])
        result = json.loads(done.stdout.strip().splitlines()[-1])
        return result["windows"], result["seconds"], wall, result["peak_rss_bytes"]

    return once


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("study", nargs="?", default=os.path.join(ROOT, "..", "shared", "data", "lidc", "LIDC-IDRI-0001"))
    parser.add_argument("--peer-python", default="python3")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--budget", default="735MiB", help="memory budget for the chosen-patch run")
    args = parser.parse_args()
    threads = str(args.threads)
    with tempfile.TemporaryDirectory() as work:
        grid = os.path.join(work, "grid.npy")
        timed([TESSERA, "resample", args.study, "--spacing-mm", "1.25", "--out", grid])
        out = os.path.join(work, "det.json")
        t = ["--threads", threads]
        runs = [
            ("tessera default (384x384x128 halo)", tessera(args.study, out, t)),
            ("tessera 288x288x64 halo", tessera(args.study, out, t + ["--patch", "288x288x64"])),
            ("tessera 288x288x64 constant", tessera(args.study, out, t + ["--patch", "288x288x64", "--blend", "constant"])),
            (f"tessera budget {args.budget} halo", tessera(args.study, out, t + ["--memory-budget", args.budget])),
            ("monai 288x288x64 gaussian, arena", peer(args.peer_python, grid, ["--threads", threads, "--mode", "gaussian"])),
            ("monai 288x288x64 constant, no arena", peer(args.peer_python, grid, ["--threads", threads, "--mode", "constant", "--no-arena"])),
            ("onnxruntime whole grid, arena", peer(args.peer_python, grid, ["--threads", threads, "--whole"])),
        ]
        results = []
        for name, once in runs:
            best = min((once() for _ in range(args.repeat)), key=lambda r: r[1])
            results.append((name, *best))
            print(f"  {name}: {best[1]:.2f} s", file=sys.stderr)
    base = results[0]
    print(f"{args.study}, {threads} threads, best of {args.repeat} (by inference time)")
    print(f"{'run':<38} {'windows':>7} {'infer s':>8} {'process s':>9} {'peak MiB':>9} {'time/tessera':>12} {'peak/tessera':>12}")
    for name, windows, infer, wall, peak in results:
        print(
            f"{name:<38} {windows:>7} {infer:>8.2f} {wall:>9.2f} {peak / 2**20:>9.0f} "
            f"{infer / base[2]:>12.2f} {peak / base[4]:>12.2f}"
        )


if __name__ == "__main__":
    main()
