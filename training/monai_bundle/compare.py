#!/usr/bin/env python3
"""Tessera's det.json against MONAI's detections (golden.py's JSON), detection by detection.

    python3 training/monai_bundle/compare.py det.json monai/monai_sliding_window.json

Each MONAI detection is paired with the unpaired Tessera detection whose box faces are
nearest (model-grid voxels, both after the card's orientation); a pair is a match when every
face is within --face voxels and the scores within --score. Prints the counts and the largest
differences; exits 0 only when every detection on both sides is matched. The same rule as
tests/tests/retinanet.rs, for runs outside CI (a real study, the ResNet50 model).
"""
import argparse
import json
import sys


def corners(detection):
    box = detection["model_box"]
    c, s = box["center"], box["size"]
    return [c[a] - s[a] / 2 for a in range(3)] + [c[a] + s[a] / 2 for a in range(3)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tessera", help="det.json")
    ap.add_argument("monai", help="golden.py's monai_*.json")
    ap.add_argument("--face", type=float, default=0.1, help="largest face difference, voxels")
    ap.add_argument("--score", type=float, default=1e-4, help="largest score difference")
    args = ap.parse_args()
    ours = [(corners(d), d["score"]) for d in json.load(open(args.tessera))["detections"]]
    theirs = json.load(open(args.monai))["detections"]
    used = [False] * len(ours)
    matched, worst_face, worst_score, unmatched = 0, 0.0, 0.0, []
    for i, t in enumerate(theirs):
        best = None
        for j, (box, _) in enumerate(ours):
            if used[j]:
                continue
            face = max(abs(a - b) for a, b in zip(box, t["box_xyzxyz"]))
            if best is None or face < best[0]:
                best = (face, j)
        if best is None:
            unmatched.append(i)
            continue
        face, j = best
        score = abs(ours[j][1] - t["score"])
        if face <= args.face and score <= args.score:
            used[j] = True
            matched += 1
            worst_face, worst_score = max(worst_face, face), max(worst_score, score)
        elif face <= args.face:
            used[j] = True
            worst_face = max(worst_face, face)
            worst_score = max(worst_score, score)
            unmatched.append(i)
        else:
            unmatched.append(i)
    print(f"Tessera {len(ours)}, MONAI {len(theirs)} detections; {matched} matched "
          f"(faces within {args.face} voxels, scores within {args.score}); largest face difference "
          f"{worst_face:.2e} voxels, largest score difference {worst_score:.2e} (pairs by box)")
    for i in unmatched:
        t = theirs[i]
        print(f"  MONAI detection {i} (score {t['score']:.6f}, box {[round(v, 2) for v in t['box_xyzxyz']]}) unmatched")
    print(f"  Tessera detections without a MONAI pair: {used.count(False)}")
    sys.exit(0 if matched == len(theirs) == len(ours) else 1)


if __name__ == "__main__":
    main()
