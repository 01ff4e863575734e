#!/usr/bin/env python3
"""Writes assets/models/tessera-test-heavy: a 3D CenterNet with fixed random weights whose
activations are as heavy as a real 3D detector's (MONAI RetinaNet / nnU-Net first stages keep
32-64 channels at full resolution), for measuring GPU memory per patch (scripts/device/).

It detects nothing meaningful. Its point is the seed's curve: at 512x512x192, 48 fp32 channels
at full resolution are 9.7 GB per tensor; the CPU dry run of scripts/device/check.sh measured a
bound of 285 bytes per window voxel (about 14 GB for that volume in one window, a third of it
in 512x512x64 Z tiles), with identical detections in halo mode. The GPU figures are the check's. Built with the `onnx`
package alone (no torch), byte for byte reproducible:

    pip install onnx==1.19.1 numpy
    python3 training/make_heavy_model.py

Architecture (NCDHW), every conv 3x3x3 with padding 1 unless noted:
    conv(1->48) relu, conv(48->48) relu,                     full resolution
    conv(48->96, stride 2) relu, conv(96->96) relu, conv(96->96) relu,   half resolution
    heads (1x1x1): heatmap = sigmoid(conv(96->1)), size = |conv(96->3)|, offset = sigmoid(conv(96->3)).
Receptive field 3 + 2 + 2 + 4 + 4 = 15 voxels (radius 7), total stride 2; 0.69 M weights.
"""
import hashlib
import json
import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from make_test_model import INPUT, ROOT, checked_model  # noqa: E402

OUT = os.path.join(ROOT, "assets", "models", "tessera-test-heavy")
rng = np.random.default_rng(20261203)


def conv(name, x, cin, cout, k, stride, nodes, inits, bias=0.0, gain=1.0):
    w = rng.normal(0.0, gain * np.sqrt(2.0 / (cin * k**3)), size=(cout, cin, k, k, k)).astype(np.float32)
    b = np.full((cout,), bias, dtype=np.float32)
    inits += [numpy_helper.from_array(w, name + ".w"), numpy_helper.from_array(b, name + ".b")]
    nodes.append(
        helper.make_node(
            "Conv", [x, name + ".w", name + ".b"], [name], name=name,
            kernel_shape=[k, k, k], strides=[stride] * 3, pads=[k // 2] * 6,
        )
    )
    return name


def main():
    nodes, inits = [], []
    x = "ct"
    for i, (cin, cout, stride) in enumerate([(1, 48, 1), (48, 48, 1), (48, 96, 2), (96, 96, 1), (96, 96, 1)]):
        c = conv(f"c{i + 1}", x, cin, cout, 3, stride, nodes, inits)
        x = f"r{i + 1}"
        nodes.append(helper.make_node("Relu", [c], [x]))
    h = conv("h_heat", x, 96, 1, 1, 1, nodes, inits, bias=-2.0, gain=4.0)
    nodes.append(helper.make_node("Sigmoid", [h], ["heatmap"]))
    s = conv("h_size", x, 96, 3, 1, 1, nodes, inits, bias=4.0)
    nodes.append(helper.make_node("Abs", [s], ["size"]))
    o = conv("h_off", x, 96, 3, 1, 1, nodes, inits)
    nodes.append(helper.make_node("Sigmoid", [o], ["offset"]))
    dims_out = lambda c: [1, c, "d", "h", "w"]  # noqa: E731
    graph = helper.make_graph(
        nodes,
        "tessera-test-heavy",
        [helper.make_tensor_value_info("ct", TensorProto.FLOAT, [1, 1, "D", "H", "W"])],
        [
            helper.make_tensor_value_info("heatmap", TensorProto.FLOAT, dims_out(1)),
            helper.make_tensor_value_info("size", TensorProto.FLOAT, dims_out(3)),
            helper.make_tensor_value_info("offset", TensorProto.FLOAT, dims_out(3)),
        ],
        inits,
    )
    data = checked_model(graph).SerializeToString()
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "model.onnx"), "wb") as f:
        f.write(data)
    card = {
        "name": "tessera-test-heavy",
        "version": "1",
        "purpose": "GPU memory measurements only: fixed random weights, activations as heavy as a real 3D detector's. It finds nothing meaningful.",
        "model_file": "model.onnx",
        "sha256": hashlib.sha256(data).hexdigest(),
        "output_family": "centernet",
        "input": INPUT,
        "target_spacing_mm": None,
        "stride": 2,
        "receptive_field_voxels": 15,
        "outputs": {
            "heatmap": {"name": "heatmap", "meaning": "centre probability, sigmoid, 1 channel"},
            "size": {"name": "size", "meaning": "box size in input voxels, channels x, y, z"},
            "offset": {"name": "offset", "meaning": "sub-cell centre offset in [0, 1) output cells, channels x, y, z"},
        },
        "recommended_patch": [512, 512, 64],
        "default_score_threshold": 0.5,
        "training": {"recipe": "training/make_heavy_model.py", "data": "none (random weights, seed 20261203)"},
        "metrics": None,
    }
    with open(os.path.join(OUT, "model.json"), "w") as f:
        json.dump(card, f, indent=2)
        f.write("\n")
    params = sum(int(np.prod(numpy_helper.to_array(t).shape)) for t in inits)
    print(f"wrote {OUT}/model.onnx ({len(data)} bytes, {params} weights) and model.json")


if __name__ == "__main__":
    main()
