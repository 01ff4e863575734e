#!/usr/bin/env python3
"""The peer figure: MONAI's sliding-window inference driving a Tessera model through
onnxruntime, on the grid `tessera resample` wrote (HU, z-y-x .npy at the card's spacing).

Same job as `tessera detect`'s inference: the card's input normalisation, the model's three
heads stitched over the grid. Not the same as Tessera's decoding, NMS or rescoring: this times
the tiled inference only, and prints one JSON line: seconds, peak RSS of this process, windows.

    python bench/peers/monai_onnx.py GRID.npy MODEL_DIR --roi 288,288,64 --overlap 0.25 \
        --mode gaussian --threads 2 [--no-arena] [--whole]

Needs torch, monai, onnxruntime and numpy (bench/peers/README.md); never run by CI.
"""
import argparse
import json
import resource
import time

import numpy as np
import onnxruntime as ort
import torch
from monai.inferers import sliding_window_inference


def xyz(text):
    values = [int(v) for v in text.split(",")]
    if len(values) != 3:
        raise argparse.ArgumentTypeError("give x,y,z")
    return values


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("grid", help=".npy from `tessera resample` (HU, z, y, x)")
    parser.add_argument("model", help="model folder with model.json")
    parser.add_argument("--roi", type=xyz, default=[288, 288, 64], help="window x,y,z")
    parser.add_argument("--overlap", type=float, default=0.25)
    parser.add_argument("--mode", choices=["gaussian", "constant"], default="gaussian")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--no-arena", action="store_true", help="ORT CPU arena off")
    parser.add_argument("--whole", action="store_true", help="ORT alone on the whole grid")
    args = parser.parse_args()

    with open(f"{args.model}/model.json") as f:
        card = json.load(f)
    lo, hi = card["input"]["hu_window"]
    hu = np.load(args.grid).astype(np.float32)
    x = np.clip(hu, lo, hi)
    x = (x - lo) / (hi - lo)
    # The far end padded to the stride with the model's zero (air), as Tessera pads.
    stride = card["stride"]
    pad = [(0, (-n) % stride) for n in x.shape]
    x = np.pad(x, pad)[None, None]

    options = ort.SessionOptions()
    options.intra_op_num_threads = args.threads
    options.inter_op_num_threads = 1
    options.enable_cpu_mem_arena = not args.no_arena
    session = ort.InferenceSession(
        f"{args.model}/{card['model_file']}", options, providers=["CPUExecutionProvider"]
    )
    input_name = card["input"]["name"]
    outputs = [card["outputs"][k]["name"] for k in ("heatmap", "size", "offset")]
    windows = 0

    def predictor(window):
        nonlocal windows
        windows += 1
        heads = session.run(outputs, {input_name: window.numpy()})
        return tuple(torch.from_numpy(h) for h in heads)

    torch.set_num_threads(1)  # blending only; inference threads are ORT's
    started = time.perf_counter()
    with torch.no_grad():
        if args.whole:
            heads = predictor(torch.from_numpy(x))
        else:
            roi = [args.roi[2], args.roi[1], args.roi[0]]
            heads = sliding_window_inference(
                torch.from_numpy(x), roi, 1, predictor, overlap=args.overlap, mode=args.mode
            )
    seconds = time.perf_counter() - started
    peak_bytes = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(
        json.dumps(
            {
                "seconds": seconds,
                "peak_rss_bytes": peak_bytes,
                "windows": windows,
                "heatmap_shape": list(heads[0].shape),
                "heatmap_max": float(heads[0].max()),
            }
        )
    )


if __name__ == "__main__":
    main()
