"""Large lesions: for every lesion of 20 mm or more on the held-out mass phantoms, and every
reader nodule of 10 mm or more on the LIDC cases, the best detection whose centre lies in it:
its score (and the detector's own), its rank in the run, and its box against the lesion's size.

Usage: python -m tessera_train.large --tessera BIN --work DIR --shared ../shared/data --model DIR
"""

import json
from pathlib import Path

import numpy as np

from . import config, data, evaluate

PHANTOM_MIN_MM = 20.0
LIDC_MIN_MM = 10.0


def best_inside(det: dict, centre, diameter_mm: float):
    """(rank from 1, detection) of the best-scored detection with its centre in the lesion."""
    ranked = sorted(det["detections"], key=lambda d: -d["score"])
    for rank, d in enumerate(ranked, 1):
        if np.linalg.norm(np.subtract(d["center_lps_mm"], centre)) <= diameter_mm / 2:
            return rank, d
    return None, None


def row(scan: str, lesion: dict, det: dict) -> dict:
    rank, best = best_inside(det, lesion["center_lps_mm"], lesion["diameter_mm"])
    out = {"scan": scan, "diameter_mm": round(lesion["diameter_mm"], 1), "rank": rank,
           "score": None, "detector_score": None, "box_mean_side_mm": None}
    if best is not None:
        out.update(score=round(best["score"], 3),
                   detector_score=round(best.get("detector_score", best["score"]), 3),
                   box_mean_side_mm=round(float(np.mean(best["size_mm"])), 1))
    return out


def summary(rows: list, threshold: float) -> dict:
    """How many are found at the threshold, and the box's mean side over the lesion's
    diameter (median and range over the found ones)."""
    found = [r for r in rows if r["score"] is not None and r["score"] >= threshold]
    ratios = [r["box_mean_side_mm"] / r["diameter_mm"] for r in found]
    return {"lesions": len(rows), "found_at_default_threshold": len(found),
            "box_over_diameter_median": round(float(np.median(ratios)), 2) if ratios else None,
            "box_over_diameter_range": [round(min(ratios), 2), round(max(ratios), 2)]
            if ratios else None}


def measure(args, eval_dir: Path, rescore: bool, threshold: float) -> dict:
    pairs = evaluate.phantom_runs(args, config.HELD_OUT_MASSES, "held-out-masses",
                                  eval_dir / "masses", rescore)
    rows = []
    for det_path, truth_path in pairs:
        det = json.loads(Path(det_path).read_text())
        truth = json.loads(Path(truth_path).read_text())
        rows += [row(Path(det_path).name.split(".")[0], n, det) for n in truth["nodules"]
                 if n["diameter_mm"] >= PHANTOM_MIN_MM]
    lidc_rows = []
    for case in config.LIDC_CASES:
        series = args.shared / "lidc" / case
        if not series.is_dir():
            print(f"warning: {series} is missing: no LIDC rows")
            continue
        det = evaluate.detect(args.tessera, series, args.model, eval_dir / f"{case}.det.json",
                              rescore)
        npy = data.resampled_lidc(args.tessera, args.shared, args.work, case)
        sidecar = json.loads(npy.with_suffix(".json").read_text())
        lidc_rows += [{**row(case, n, det), "readers": n["readers"]}
                      for n in sidecar["lidc_nodules"] if n["diameter_mm"] >= LIDC_MIN_MM]
    return {"threshold": threshold,
            "phantoms": {"series": evaluate.series_of(config.HELD_OUT_MASSES),
                         "lesions_from_mm": PHANTOM_MIN_MM, **summary(rows, threshold),
                         "rows": rows},
            "lidc_idri": {"lesions_from_mm": LIDC_MIN_MM, **summary(lidc_rows, threshold),
                          "rows": lidc_rows}}


def main():
    args = evaluate.arguments()
    card = json.loads((args.model / "model.json").read_text())
    result = {
        "detector_alone": measure(args, args.work / "eval" / "detector", False,
                                  card["default_score_threshold"]),
    }
    if "rescore" in card:
        result["rescored"] = measure(args, args.work / "eval", True,
                                     card["rescore"]["default_score_threshold"])
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
