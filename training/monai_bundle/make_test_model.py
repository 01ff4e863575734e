#!/usr/bin/env python3
"""Writes assets/models/tessera-test-retinanet: the CI test model of the RetinaNet family.

`test_bundle/configs/inference.json` is a MONAI bundle config with the architecture of
`lung_nodule_ct_detection` (the same anchors, level strides, size_divisible, box selector and
sliding window) on a narrow backbone; `convert.py` converts it exactly as it converts the real
bundle, with seeded weights.

A freshly initialised RetinaNet scores about 0.01 everywhere (the class bias comes from a 0.01
prior) and its box codes are near zero, so a parity test on it would compare nothing, or
compare near-ties that rounding decides. The heads are therefore given wider seeded weights
here (classification N(0, 0.05), bias -2; box regression N(0, 0.02)): scores spread over
0..1 with the image, boxes move off their anchors, and the test bundle's score threshold
(0.55) keeps a few hundred candidates (under every cap) on the parity phantom. It detects nothing meaningful.

    training/.venv/bin/python training/monai_bundle/make_test_model.py
"""
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from convert import convert  # noqa: E402

ROOT = os.path.join(HERE, "..", "..")
OUT = os.path.join(ROOT, "assets", "models", "tessera-test-retinanet")
SEED = 20261207
CLS_STD, CLS_BIAS, BOX_STD = 0.05, -2.0, 0.02


def wider_heads(network):
    g = torch.Generator().manual_seed(SEED + 1)
    with torch.no_grad():
        cls = network.classification_head.cls_logits
        cls.weight.copy_(torch.randn(cls.weight.shape, generator=g) * CLS_STD)
        cls.bias.fill_(CLS_BIAS)
        box = network.regression_head.bbox_reg
        box.weight.copy_(torch.randn(box.weight.shape, generator=g) * BOX_STD)
    return {
        "heads": f"classification weights N(0, {CLS_STD}) and bias {CLS_BIAS}, box regression weights N(0, {BOX_STD}), seed {SEED + 1}: a spread of scores for parity tests",
        "data": "none",
    }


def build_network(bundle_dir=os.path.join(HERE, "test_bundle")):
    """The test model's torch network, made again exactly as `main` made it (for golden.py)."""
    from convert import load_bundle, load_weights

    detector, _ = load_bundle(bundle_dir)
    load_weights(detector.network, bundle_dir, SEED)
    wider_heads(detector.network)
    return detector


def main():
    card, _, _ = convert(
        os.path.join(HERE, "test_bundle"),
        OUT,
        "tessera-test-retinanet",
        seed=SEED,
        adjust=wider_heads,
        purpose="Engine tests only: MONAI's RetinaNet (lung_nodule_ct_detection's anchors, strides and decoding) on a narrow backbone, seeded weights. It finds nothing meaningful.",
        recipe="training/monai_bundle/make_test_model.py",
    )
    print(f"wrote {OUT}: {card['training']['export_check']}")


if __name__ == "__main__":
    main()
