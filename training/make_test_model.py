#!/usr/bin/env python3
"""Writes assets/models/tessera-test-tiny: a small CenterNet-style 3D CNN with fixed random
weights, for the tiling engine's tests (bit-exact halo stitching, events, cancel).

It detects nothing meaningful; the shipped detector is trained by this folder's recipe. Built
with the `onnx` package alone (no torch), so anyone can rebuild it byte for byte:

    pip install onnx==1.19.1 numpy
    python3 training/make_test_model.py

Architecture (NCDHW, D = z, H = y, W = x), every conv 3x3x3 with padding 1 unless noted:
    conv(1->4) relu, conv(4->8, stride 2) relu, conv(8->8) relu,
    heads (1x1x1): heatmap = sigmoid(conv(8->1)), size = conv(8->3), offset = sigmoid(conv(8->3)).
Receptive field 9 voxels (radius 4), total stride 2.

Also writes assets/models/tessera-test-seg (see `write_seg_model`) and
assets/models/tessera-test-rescore (see `write_rescore_model`).
"""
import hashlib
import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
sys.path.insert(0, HERE)
from tessera_train.fp16 import to_fp16  # noqa: E402  (onnx and numpy only)
OUT = os.path.join(ROOT, "assets", "models", "tessera-test-tiny")
rng = np.random.default_rng(20261202)
WEIGHTS = []
# The input both test models take, as their cards describe it.
INPUT = {
    "name": "ct",
    "layout": "NCDHW",
    "hu_window": [-1000.0, 400.0],
    "normalisation": "clip HU to hu_window, then (hu - lo) / (hi - lo): air is 0",
    # Trained on DICOM's own voxel order; a NIfTI or MetaImage study is flipped to it.
    "orientation": "LPS",
}


def conv(name, x, cin, cout, k, stride, nodes, inits, bias=0.0, gain=1.0):
    w = rng.normal(0.0, gain * np.sqrt(2.0 / (cin * k**3)), size=(cout, cin, k, k, k)).astype(np.float32)
    b = np.full((cout,), bias, dtype=np.float32)
    WEIGHTS.append((name, w, b))
    inits += [numpy_helper.from_array(w, name + ".w"), numpy_helper.from_array(b, name + ".b")]
    pad = k // 2
    nodes.append(
        helper.make_node(
            "Conv", [x, name + ".w", name + ".b"], [name], name=name,
            kernel_shape=[k, k, k], strides=[stride] * 3, pads=[pad] * 6,
        )
    )
    return name


def checked_model(graph):
    """The graph as an opset-17, IR-8 model, checked."""
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="tessera")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def main():
    nodes, inits = [], []
    x = conv("c1", "ct", 1, 4, 3, 1, nodes, inits)
    nodes.append(helper.make_node("Relu", [x], ["r1"]))
    x = conv("c2", "r1", 4, 8, 3, 2, nodes, inits)
    nodes.append(helper.make_node("Relu", [x], ["r2"]))
    x = conv("c3", "r2", 8, 8, 3, 1, nodes, inits)
    nodes.append(helper.make_node("Relu", [x], ["r3"]))
    h = conv("h_heat", "r3", 8, 1, 1, 1, nodes, inits, bias=-1.0, gain=6.0)
    nodes.append(helper.make_node("Sigmoid", [h], ["heatmap"]))
    s = conv("h_size", "r3", 8, 3, 1, 1, nodes, inits, bias=4.0)
    nodes.append(helper.make_node("Abs", [s], ["size"]))
    o = conv("h_off", "r3", 8, 3, 1, 1, nodes, inits)
    nodes.append(helper.make_node("Sigmoid", [o], ["offset"]))

    dims_in = [1, 1, "D", "H", "W"]
    dims_out = lambda c: [1, c, "d", "h", "w"]  # noqa: E731
    graph = helper.make_graph(
        nodes,
        "tessera-test-tiny",
        [helper.make_tensor_value_info("ct", TensorProto.FLOAT, dims_in)],
        [
            helper.make_tensor_value_info("heatmap", TensorProto.FLOAT, dims_out(1)),
            helper.make_tensor_value_info("size", TensorProto.FLOAT, dims_out(3)),
            helper.make_tensor_value_info("offset", TensorProto.FLOAT, dims_out(3)),
        ],
        inits,
    )
    model = checked_model(graph)
    os.makedirs(OUT, exist_ok=True)
    data = model.SerializeToString()
    with open(os.path.join(OUT, "model.onnx"), "wb") as f:
        f.write(data)
    data16 = to_fp16(model).SerializeToString()
    with open(os.path.join(OUT, "model_fp16.onnx"), "wb") as f:
        f.write(data16)
    card = {
        "name": "tessera-test-tiny",
        "version": "1",
        "purpose": "Engine tests only: fixed random weights. It finds nothing meaningful.",
        "model_file": "model.onnx",
        "sha256": hashlib.sha256(data).hexdigest(),
        "variants": {"fp16": {"model_file": "model_fp16.onnx", "sha256": hashlib.sha256(data16).hexdigest()}},
        "output_family": "centernet",
        "input": INPUT,
        "target_spacing_mm": None,
        "stride": 2,
        "receptive_field_voxels": 9,
        "outputs": {
            "heatmap": {"name": "heatmap", "meaning": "nodule centre probability, sigmoid, 1 channel"},
            "size": {"name": "size", "meaning": "box size in input voxels, channels x, y, z"},
            "offset": {"name": "offset", "meaning": "sub-cell centre offset in [0, 1) output cells, channels x, y, z"},
        },
        "recommended_patch": [64, 64, 32],
        "default_score_threshold": 0.3,
        "training": {"recipe": "training/make_test_model.py", "data": "none (random weights, seed 20261202)"},
        "metrics": None,
    }
    with open(os.path.join(OUT, "model.json"), "w") as f:
        json.dump(card, f, indent=2)
        f.write("\n")
    print(f"wrote {OUT}/model.onnx ({len(data)} bytes), model_fp16.onnx ({len(data16)} bytes) and model.json")


def write_seg_model():
    """`tessera-test-seg`: the `segmentation` output family for the engine's tests. One fixed
    5x5x5 centre-minus-surround filter and a sigmoid: dense blobs in air (nodules, vessel
    cross-sections) light up. Receptive field 5, stride 1; no randomness."""
    kernel = np.full((5, 5, 5), -1.0 / 98.0, dtype=np.float32)
    kernel[1:4, 1:4, 1:4] = 1.0 / 27.0
    w = (20.0 * kernel).reshape(1, 1, 5, 5, 5)
    b = np.array([-20.0 * 0.25], dtype=np.float32)
    inits = [numpy_helper.from_array(w, "dog.w"), numpy_helper.from_array(b, "dog.b")]
    nodes = [
        helper.make_node("Conv", ["ct", "dog.w", "dog.b"], ["logit"], kernel_shape=[5, 5, 5], pads=[2] * 6),
        helper.make_node("Sigmoid", ["logit"], ["probability"]),
    ]
    graph = helper.make_graph(
        nodes,
        "tessera-test-seg",
        [helper.make_tensor_value_info("ct", TensorProto.FLOAT, [1, 1, "D", "H", "W"])],
        [helper.make_tensor_value_info("probability", TensorProto.FLOAT, [1, 1, "D", "H", "W"])],
        inits,
    )
    model = checked_model(graph)
    out = os.path.join(ROOT, "assets", "models", "tessera-test-seg")
    os.makedirs(out, exist_ok=True)
    data = model.SerializeToString()
    with open(os.path.join(out, "model.onnx"), "wb") as f:
        f.write(data)
    card = {
        "name": "tessera-test-seg",
        "version": "1",
        "purpose": "Engine tests only: the segmentation output family (connected components).",
        "model_file": "model.onnx",
        "sha256": hashlib.sha256(data).hexdigest(),
        "output_family": "segmentation",
        "input": INPUT,
        "target_spacing_mm": None,
        "stride": 1,
        "receptive_field_voxels": 5,
        "outputs": {"heatmap": {"name": "probability", "meaning": "foreground probability, 1 channel"}},
        "recommended_patch": [64, 64, 32],
        "default_score_threshold": 0.5,
        "training": {"recipe": "training/make_test_model.py", "data": "none (a fixed filter)"},
        "metrics": None,
    }
    with open(os.path.join(out, "model.json"), "w") as f:
        json.dump(card, f, indent=2)
        f.write("\n")
    print(f"wrote {out}/model.onnx ({len(data)} bytes) and model.json")


RAMP_EDGE = 8


def ramp_weights():
    """The test rescorer's fixed weights `[z, y, x]`: a ramp, different along every axis, so a
    patch cut at the wrong place or in the wrong axis order scores differently."""
    c = np.arange(RAMP_EDGE, dtype=np.float32) - (RAMP_EDGE - 1) / 2
    z, y, x = np.meshgrid(c, c, c, indexing="ij")
    return ((x + 2 * y + 4 * z) / 256).astype(np.float32)


def write_rescore_model():
    """`tessera-test-rescore`: the tiny detector plus a rescoring stage whose score a test can
    compute by hand: p = sigmoid(sum(ramp * patch)) over an 8^3 patch (see `ramp_weights`),
    combined with the detector's score by geometric mean.
    Needs tessera-test-tiny written first (it reuses its detector file)."""
    w = ramp_weights().reshape(1, 1, RAMP_EDGE, RAMP_EDGE, RAMP_EDGE)
    inits = [numpy_helper.from_array(w, "ramp"),
             numpy_helper.from_array(np.array([1, 2, 3, 4], dtype=np.int64), "axes")]
    nodes = [
        helper.make_node("Mul", ["patch", "ramp"], ["weighted"]),
        helper.make_node("ReduceSum", ["weighted", "axes"], ["logit"], keepdims=1),
        helper.make_node("Flatten", ["logit"], ["logit2"], axis=1),
        helper.make_node("Sigmoid", ["logit2"], ["score"]),
    ]
    edge = [RAMP_EDGE] * 3
    graph = helper.make_graph(
        nodes,
        "tessera-test-rescore",
        [helper.make_tensor_value_info("patch", TensorProto.FLOAT, ["N", 1, *edge])],
        [helper.make_tensor_value_info("score", TensorProto.FLOAT, ["N", 1])],
        inits,
    )
    model = checked_model(graph)
    out = os.path.join(ROOT, "assets", "models", "tessera-test-rescore")
    os.makedirs(out, exist_ok=True)
    rescore = model.SerializeToString()
    with open(os.path.join(out, "rescore.onnx"), "wb") as f:
        f.write(rescore)
    with open(os.path.join(OUT, "model.onnx"), "rb") as f:
        detector = f.read()
    with open(os.path.join(out, "model.onnx"), "wb") as f:
        f.write(detector)
    with open(os.path.join(OUT, "model.json")) as f:
        card = json.load(f)
    card.pop("variants")
    card["name"] = "tessera-test-rescore"
    card["purpose"] = "Engine tests only: tessera-test-tiny plus a rescoring stage with a known score."
    card["rescore"] = {
        "model_file": "rescore.onnx",
        "sha256": hashlib.sha256(rescore).hexdigest(),
        "input": "patch",
        "output": "score",
        "patch_voxels": RAMP_EDGE,
        "candidates": 5,
        "candidate_threshold": 0.2,
        "combine": "geometric_mean",
        "default_score_threshold": 0.4,
        "meaning": "sigmoid(sum(ramp * patch)), ramp[z, y, x] = ((x - 3.5) + 2 (y - 3.5) + 4 (z - 3.5)) / 256; final score sqrt(detector score * it)",
        "training": {"recipe": "training/make_test_model.py", "data": "none (fixed weights)"},
    }
    with open(os.path.join(out, "model.json"), "w") as f:
        json.dump(card, f, indent=2)
        f.write("\n")
    print(f"wrote {out}/rescore.onnx ({len(rescore)} bytes), model.onnx and model.json")


if __name__ == "__main__":
    main()
    write_seg_model()
    write_rescore_model()
