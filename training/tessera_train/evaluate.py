"""Measure the exported model through the real pipeline (`tessera detect`) and record the
metrics in its card: FROC/CPM on held-out phantoms, and the LIDC-IDRI readers' nodules. The
default thresholds are chosen on separate validation phantoms.

Usage: python -m tessera_train.evaluate --tessera BIN --work DIR --shared ../shared/data --model DIR
"""

import argparse
import json
import os
import subprocess
from pathlib import Path

import numpy as np

from . import config, data

FROC_THRESHOLD = 0.05  # low, so the curve reaches 8 FP per scan


def detect(tessera, series: Path, model: Path, out: Path, rescore: bool = True,
           keep_outside: bool = False, coarse: bool = True):
    """`tessera detect` at the FROC threshold, cached in `out` while the model files (the
    detector's, and the rescoring stage's when it runs) and the coarse pass's settings are the
    ones that made it. The card's coarse pass runs (as by default) unless `coarse=False`
    (`--no-coarse-pass`): the card's metrics are the model's with it."""
    card = json.loads((model / "model.json").read_text())
    stage = card.get("rescore") if rescore else None
    # The files and the card's settings that made the run (det.json records only the hashes).
    wanted = json.dumps([card["sha256"], stage and stage["sha256"],
                         stage and stage.get("scale_above_voxels"),
                         coarse and card.get("coarse_pass")])
    key = out.with_name(out.name + ".key")
    if out.is_file() and key.is_file() and key.read_text() == wanted:
        return json.loads(out.read_text())
    cmd = [str(tessera), "detect", str(series), "--model", str(model),
           "--score-threshold", str(FROC_THRESHOLD), "--out", str(out)]
    cmd += ([] if rescore else ["--no-rescore"]) + (["--keep-outside-lungs"] if keep_outside else [])
    cmd += [] if coarse else ["--no-coarse-pass"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    key.write_text(wanted)
    return json.loads(out.read_text())


def evaluate(tessera, flag: str, pairs, extra=()) -> dict:
    cmd = [str(tessera), "evaluate", "--json", *extra]
    for det, target in pairs:
        cmd += [flag, f"{det}={target}"]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def lidc_case(tessera, shared: Path, work: Path, model: Path, case: str, threshold: float,
              eval_dir: Path, rescore: bool):
    """The case's table from `tessera evaluate --cases` on a run that keeps what lies outside
    the lungs (flagged): every reader mark (readers, size, best score, its rank and box, hit or
    miss) and every unmarked detection at the threshold with its place. The default run
    (outside dropped) counts the false positives a user sees: it is a run of its own, since the
    stage rescores the best `candidates` of what is left after the drop, not of everything."""
    series = shared / "lidc" / case
    det_path = eval_dir / f"{case}.det.json"
    det = detect(tessera, series, model, det_path, rescore)
    kept = eval_dir / f"{case}.kept.det.json"
    detect(tessera, series, model, kept, rescore, keep_outside=True)
    table = evaluate(tessera, "--lidc", [(kept, series)],
                     ["--cases", "--threshold", str(threshold)])["cases"][0]["table"]
    nodules = [{"readers": r["marked"]["readers"],
                "diameter_mm": round(r["marked"]["target"]["diameter_mm"], 1),
                "center_lps_mm": [round(v, 1) for v in r["marked"]["target"]["center_lps_mm"]],
                "best_score": round(r["best"][0], 4) if r["best"] else None,
                "rank": r["best"][1] if r["best"] else None,
                "box_mm": [round(v, 1) for v in r["best_size_mm"]] if r["best_size_mm"] else None,
                "found_at_default_threshold": r["hit"]} for r in table["nodules"]]
    false_positives = [{"score": round(f["score"], 4), "rank": f["rank"],
                        "center_lps_mm": [round(v, 1) for v in f["center_lps_mm"]],
                        "box_mm": [round(v, 1) for v in f["size_mm"]],
                        "lungs": "outside" if f["outside_lungs"] else "inside"}
                       for f in table["false_positives"]]
    in_default_run = sum(1 for d in det["detections"] if d["score"] >= threshold and not any(
        np.linalg.norm(np.subtract(d["center_lps_mm"], r["marked"]["target"]["center_lps_mm"]))
        <= max(r["marked"]["target"]["diameter_mm"] / 2, 5.0) for r in table["nodules"]))
    return det_path, {"case": case, "threshold": threshold, "nodules": nodules,
                      "false_positives_with_outside_kept": false_positives,
                      "false_positives_at_default_threshold": in_default_run,
                      "seconds_end_to_end_tessera_detect": round(det["stats"]["elapsed_s"], 2)}


def hits_a_nodule(detection: dict, truth: dict) -> bool:
    """A phantom hit as `tessera evaluate` counts it: the centre lies inside a nodule."""
    return any(np.linalg.norm(np.subtract(detection["center_lps_mm"], n["center_lps_mm"]))
               <= n["diameter_mm"] / 2 for n in truth["nodules"])


def scored_detections(pairs) -> list:
    """`(score, is a false positive)` of every detection in the (run, truth) pairs."""
    scored = []
    for det_path, truth_path in pairs:
        det = json.loads(Path(det_path).read_text())
        truth = json.loads(Path(truth_path).read_text())
        scored += [(d["score"], not hits_a_nodule(d, truth)) for d in det["detections"]]
    return scored


def operating_threshold(pairs, fp_per_scan: float = 1.0) -> float:
    """The lowest threshold on a 0.05 grid with at most `fp_per_scan` false positives per
    phantom (a hit: centre inside a nodule, as `tessera evaluate` counts it)."""
    scored = scored_detections(pairs)
    for t in np.arange(0.05, 1.0, 0.05):
        fps = sum(1 for score, fp in scored if fp and score >= t)
        if fps / max(len(pairs), 1) <= fp_per_scan:
            return round(float(t), 2)
    return 0.95


def calibrate_memory(tessera, work: Path, model: Path) -> dict:
    """`tessera sweep` on the demo study (each patch in its own process): the upper bound
    `peak - baseline - held <= fixed + per_voxel * window voxels` of each pass on this CPU,
    with the points it was fitted on, for plans and `--memory-budget`."""
    out = work / "sweep"
    if not (out / "memory_model.json").is_file():
        subprocess.run([str(tessera), "sweep", "--model", str(model), "--out", str(out)],
                       check=True, stdout=subprocess.DEVNULL)
    fit = json.loads((out / "memory_model.json").read_text())
    return {"cpu": {
        **fit["model"],
        "measured_on": f"tessera sweep on the demo study (512x512x160 at 0.7/0.7/2.0 mm): "
                       f"each pass's process peak RSS (the main windows; the coarse pass after "
                       f"them) above what the process held when the run started and what the "
                       f"pass holds for the study (the main maps; the coarse grid and maps on "
                       f"top), allocator {fit['allocator']} with glibc's mmap threshold pinned "
                       f"at 128 KiB, {os.cpu_count()} CPU threads, "
                       f"{fit['model']['calibration_runs']} patch sizes; an upper bound over "
                       f"the points; stages_bytes: the most the steps after the passes "
                       f"(decoding, the lung field, the rescoring stage, the boxes) needed above "
                       f"the baseline, the main maps and the lung field, plus the spread "
                       f"between runs or 1 % of it, whichever is more",
        "points": fit["points"],
    }}


def arguments(with_masses: bool = False):
    """The command line of the steps that run the `tessera` binary on a model (the stage's
    training also takes `--with-masses`)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--tessera", required=True)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--shared", type=Path, required=True)
    ap.add_argument("--model", type=Path, required=True)
    if with_masses:
        ap.add_argument("--with-masses", action="store_true",
                        help="train on the mass phantoms too, the cube scaled for large ones")
    return ap.parse_args()


def phantom_runs(args, table, tag: str, run_dir: Path, rescore: bool):
    """`tessera detect` on each phantom of `table` (cached in `run_dir`): (run, truth) pairs."""
    run_dir.mkdir(parents=True, exist_ok=True)
    pairs = []
    for series, _ in data.make_phantoms(args.tessera, args.work, table, tag):
        det = run_dir / f"{series.name}.det.json"
        detect(args.tessera, series, args.model, det, rescore)
        pairs.append((det, series / "truth.json"))
    return pairs


def series_of(table) -> list:
    return [f"seeds {r.start}-{r.stop - 1}, {size} at {sp} mm, {n} nodules"
            f"{f' and {m[0]} masses' if m else ''}, noise {noise} HU"
            for r, size, sp, n, noise, *m in table]


def measure(args, eval_dir: Path, rescore: bool):
    """Held-out FROC and the LIDC cases through `tessera detect` (with or without the card's
    rescoring stage, runs cached in `eval_dir`). Returns the metrics and the default threshold:
    the lowest with at most one false positive per validation phantom."""
    validation = phantom_runs(args, config.VALIDATION_PHANTOMS, "validation",
                              eval_dir / "validation", rescore)
    threshold = operating_threshold(validation)
    pairs = phantom_runs(args, config.HELD_OUT_PHANTOMS, "held-out", eval_dir, rescore)
    froc = evaluate(args.tessera, "--phantom", pairs)
    missed = [h for h in froc["hits"] if h[2] is None or h[2] < threshold]
    false_positives = sum(1 for score, fp in scored_detections(pairs) if fp and score >= threshold)
    validation_froc = evaluate(args.tessera, "--phantom", validation)
    stage = "with the rescoring stage" if rescore else "detector alone (--no-rescore)"
    metrics = {
        "measured_with": f"tessera detect (halo tiling, default patch, CPU), {stage}, "
                         "with the card's coarse pass when it has one, "
                         "then tessera evaluate",
        "default_score_threshold": f"{threshold}: the lowest on a 0.05 grid with at most "
                                   "1 false positive per validation phantom",
        "validation_phantoms": {
            "use": "choosing the default threshold only; never trained on",
            "scans": validation_froc["scans"], "nodules": validation_froc["targets"],
            "series": series_of(config.VALIDATION_PHANTOMS),
            "cpm": round(validation_froc["cpm"], 4),
        },
        "held_out_phantoms": {
            "scans": froc["scans"], "nodules": froc["targets"],
            "series": series_of(config.HELD_OUT_PHANTOMS),
            "froc_fp_per_scan": [0.125, 0.25, 0.5, 1, 2, 4, 8],
            "froc_sensitivity": [round(s, 4) for s in froc["sensitivity"]],
            "cpm": round(froc["cpm"], 4),
            "found_at_default_threshold": froc["targets"] - len(missed),
            "false_positives_per_scan_at_default_threshold":
                round(false_positives / max(len(pairs), 1), 3),
            "missed_at_default_threshold": [
                {"scan": Path(h[0]).name, "diameter_mm": round(h[1]["diameter_mm"], 1),
                 "best_score": h[2]} for h in missed],
        },
    }
    lidc = []
    lidc_pairs = []
    for case in config.LIDC_CASES:
        if not (args.shared / "lidc" / case).is_dir():
            print(f"warning: {case} is missing under {args.shared}: no LIDC metrics")
            continue
        det_path, result = lidc_case(args.tessera, args.shared, args.work, args.model, case,
                                     threshold, eval_dir, rescore)
        lidc.append(result)
        lidc_pairs.append((det_path, args.shared / "lidc" / case))
    if lidc:
        lidc_froc = evaluate(args.tessera, "--lidc", lidc_pairs)
        metrics["lidc_idri"] = {
            "note": "The two cases' backgrounds were used in training with inserted nodules; "
                    "their readers' nodules were masked out of the loss, never positives.",
            "cases": lidc,
            "froc_targets": "nodules >= 3 mm outlined by >= 3 of 4 readers",
            "froc_sensitivity": [round(s, 4) for s in lidc_froc["sensitivity"]],
            "cpm": round(lidc_froc["cpm"], 4),
        }
    return metrics, threshold


def main():
    args = arguments()
    card_path = args.model / "model.json"
    card = json.loads(card_path.read_text())
    alone, threshold = measure(args, args.work / "eval" / "detector", rescore=False)
    card["default_score_threshold"] = threshold
    if "rescore" in card:
        metrics, card["rescore"]["default_score_threshold"] = measure(args, args.work / "eval",
                                                                      rescore=True)
        metrics["detector_alone"] = {
            "default_score_threshold": threshold,
            "held_out_cpm": alone["held_out_phantoms"]["cpm"],
            "held_out_froc_sensitivity": alone["held_out_phantoms"]["froc_sensitivity"],
            "lidc_cpm": alone.get("lidc_idri", {}).get("cpm"),
            "lidc_false_positives_at_default_threshold": [
                c["false_positives_at_default_threshold"]
                for c in alone.get("lidc_idri", {}).get("cases", [])],
        }
    else:
        metrics = alone
    from . import large  # it uses this module's functions
    metrics["large_lesions"] = large.measure(
        args, args.work / "eval" / ("" if "rescore" in card else "detector"),
        "rescore" in card, card.get("rescore", card)["default_score_threshold"])
    card["metrics"] = metrics
    if not card.get("memory"):  # a fresh export: calibrate (kept otherwise, as committed)
        card["memory"] = calibrate_memory(args.tessera, args.work, args.model)
    tmp = card_path.with_name(".model.json.tmp")
    tmp.write_text(json.dumps(card, indent=2) + "\n")
    os.replace(tmp, card_path)
    print(json.dumps(metrics, indent=2))


if __name__ == "__main__":
    main()
