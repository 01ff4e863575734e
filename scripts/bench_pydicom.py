#!/usr/bin/env python3
"""Reference figure for `tessera bench load`: pydicom + numpy reading a folder into a volume.

Same job as Tessera's loader: read every file, keep CT images, sort by position along the
slice normal, apply rescale slope/intercept, stack into one array. One warm-up run, then the
median of --repeat runs. Needs `pip install pydicom numpy` (not part of the project's set-up).

    python3 scripts/bench_pydicom.py ../shared/data/lidc/LIDC-IDRI-0001 --repeat 7
"""
import argparse
import os
import statistics
import time

import numpy as np
import pydicom


def load(folder):
    slices = []
    for root, _, names in os.walk(folder):
        for name in names:
            try:
                ds = pydicom.dcmread(os.path.join(root, name))
            except Exception:
                continue
            if "PixelData" in ds and "ImagePositionPatient" in ds:
                slices.append(ds)
    iop = np.array(slices[0].ImageOrientationPatient, dtype=float)
    normal = np.cross(iop[:3], iop[3:])
    slices.sort(key=lambda d: float(np.dot(normal, np.array(d.ImagePositionPatient, dtype=float))))
    volume = np.stack(
        [d.pixel_array.astype(np.int16) * int(d.RescaleSlope) + int(d.RescaleIntercept) for d in slices]
    )
    return volume


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("folder")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    load(args.folder)
    times = []
    for _ in range(args.repeat):
        t = time.perf_counter()
        volume = load(args.folder)
        times.append(time.perf_counter() - t)
    median = statistics.median(times)
    print(
        f"pydicom {pydicom.__version__} + numpy {np.__version__}: {volume.shape[::-1]} (x, y, z) "
        f"median of {len(times)}: {median * 1e3:.1f} ms, {median * 1e3 / volume.shape[0]:.3f} ms/slice"
    )


if __name__ == "__main__":
    main()
