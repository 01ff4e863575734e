#!/usr/bin/env bash
# Packs what the GPU check needs on the device machine into device-pack/ (ignored by git):
# the release `tessera` (stripped), ONNX Runtime 1.31.1's GPU libraries (from PyPI's
# onnxruntime-gpu wheel: the main library, the shared and the CUDA provider) and
# LIDC-IDRI-0001 (from ../shared/data) and, with DEVICE_RETINANET=DIR, a converted MONAI
# RetinaNet (the seed's network), as one tar | xz stream split into parts p0, p1, ...
# of at most 50 MiB, so that each device call carries one (a call carries 64 MiB at most,
# with the working tree). The device image has CUDA 13 and cuDNN 9 as pip packages, so only
# ONNX Runtime's own libraries travel. See scripts/device/README.md for the calls.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
pack="$root/device-pack"
stage="$pack/stage"
data="${TESSERA_DATA_DIR:-$root/../shared/data}"
part_bytes="${DEVICE_PART_BYTES:-50M}"

rm -rf "$pack"
mkdir -p "$stage/bin" "$stage/ort" "$stage/lidc" "$pack/wheel"

echo "pack: [1/4] release build of tessera (a few minutes the first time)" >&2
cargo build --release -p tessera
strip -o "$stage/bin/tessera" target/release/tessera

echo "pack: [2/4] ONNX Runtime GPU libraries from the onnxruntime-gpu 1.31.1 wheel" >&2
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
  -d "$pack/wheel" onnxruntime-gpu==1.31.1
python3 - "$pack"/wheel/onnxruntime_gpu-*.whl "$stage/ort" <<'PY'
import sys, zipfile, os
wheel, out = sys.argv[1], sys.argv[2]
wanted = ("libonnxruntime.so.1.31.1", "libonnxruntime_providers_shared.so", "libonnxruntime_providers_cuda.so")
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        base = os.path.basename(name)
        if base in wanted:
            with z.open(name) as src, open(os.path.join(out, base), "wb") as dst:
                dst.write(src.read())
missing = [w for w in wanted if not os.path.exists(os.path.join(out, w))]
if missing:
    sys.exit(f"pack: the wheel lacks {missing}")
PY
rm -rf "$pack/wheel"

echo "pack: [3/4] LIDC-IDRI-0001 (CUDA vs CPU parity on a real CT)" >&2
if [ -d "$data/lidc/LIDC-IDRI-0001" ]; then
  cp -r "$data/lidc/LIDC-IDRI-0001" "$stage/lidc/"
  cp "$data/lidc/ATTRIBUTION"* "$stage/lidc/" 2>/dev/null || true
else
  echo "pack: $data/lidc/LIDC-IDRI-0001 is missing: the check will skip the real-CT parity" >&2
fi

# The seed's own architecture: a MONAI bundle converted by training/monai_bundle/convert.py
# (lung_nodule_ct_detection with --random-weights: 84 MB, two more parts).
if [ -n "${DEVICE_RETINANET:-}" ]; then
  if [ -f "$DEVICE_RETINANET/model.json" ]; then
    echo "pack: [3b] the RetinaNet model in $DEVICE_RETINANET" >&2
    mkdir -p "$stage/models"
    cp -r "$DEVICE_RETINANET" "$stage/models/retinanet"
  else
    echo "pack: DEVICE_RETINANET=$DEVICE_RETINANET has no model.json" >&2
    exit 2
  fi
fi

echo "pack: [4/4] one xz stream, split into parts of $part_bytes" >&2
tar -C "$stage" -cf - . | xz -6 -T0 | split -b "$part_bytes" -d -a 1 - "$pack/part-"
rm -rf "$stage"
n=0
for part in "$pack"/part-*; do
  mkdir -p "$pack/p$n"
  mv "$part" "$pack/p$n/part"
  n=$((n + 1))
done
(cd "$pack" && sha256sum p*/part > SHA256SUMS && cp SHA256SUMS "p$((n - 1))/")
du -h "$pack"/p*/part >&2
echo "pack: $n part(s); carry device-pack/p0 ... device-pack/p$((n - 1)), one per call (scripts/device/README.md)" >&2
