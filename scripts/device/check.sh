#!/usr/bin/env bash
# The GPU check, run on the device machine (scripts/device/README.md) in one call of at most
# 8 minutes, after the parts of device-pack/ have arrived. Writes under $OUT (8 files at
# most come back): check.log (everything printed), summary.md, results.tar.gz (det.json
# files, sweep reports, memory models, logs) and env.txt.
#
#   scripts/device/check.sh             on the GPU machine
#   scripts/device/check.sh --cpu-only  the dry run here: the same steps on the CPU, smaller
#
# Steps: join and unpack the parts; environment (driver, GPU, CUDA/cuDNN wheels); `tessera
# runtime --gpu`; LIDC-IDRI-0001 with the shipped detector on CPU and on cuda:0 (halo:
# identical detections expected), fp16 on cuda:0 (drift reported); `tessera sweep` on
# cuda:0 with NVML peak memory per patch for the shipped detector (LIDC-0001) and for
# tessera-test-heavy on a 512x512x192 phantom (the seed's curve: whole volume against Z
# tiles, identical detections); with a packed RetinaNet (DEVICE_RETINANET), the seed's
# patches 512x512x192, x104, x80, x64 on MONAI's lung nodule architecture.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
cpu_only=0
[ "${1:-}" = "--cpu-only" ] && cpu_only=1
out="${OUT:-$root/device-out}"
mkdir -p "$out"
work="${DEVICE_WORK:-/tmp/tessera-device}"
results="$work/results"
rm -rf "$work"
mkdir -p "$work/unpacked" "$results"
exec > >(tee "$out/check.log") 2>&1
started=$SECONDS
step() { printf '\n== [%d s] %s\n' $((SECONDS - started)) "$*"; }
summary() { printf '%s\n' "$*" >>"$out/summary.md"; }
: >"$out/summary.md"

step "join and unpack device-pack/p*"
if ! (cd device-pack && sha256sum -c --quiet SHA256SUMS 2>/dev/null || sha256sum -c --quiet p*/SHA256SUMS); then
  echo "check: a part is missing or damaged (device-pack/p*/part against SHA256SUMS)"
  exit 3
fi
# xz through Python's lzma: the image may lack the xz tool, never Python.
cat device-pack/p*/part | python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.stdin.buffer), sys.stdout.buffer)' |
  tar -x -C "$work/unpacked" || { echo "check: cannot unpack the parts"; exit 3; }
tessera="$work/unpacked/bin/tessera"
chmod +x "$tessera"
export ORT_DYLIB_PATH="$work/unpacked/ort/libonnxruntime.so.1.31.1"
lidc="$work/unpacked/lidc/LIDC-IDRI-0001"

# The CUDA provider finds CUDA 13 and cuDNN 9 in the image's nvidia-* pip packages.
libs=$(python3 - <<'PY'
import glob, os, site
roots = site.getsitepackages() + [site.getusersitepackages()]
dirs = sorted({d for r in roots for d in glob.glob(os.path.join(r, "nvidia", "*", "lib"))})
print(":".join(dirs))
PY
)
export LD_LIBRARY_PATH="$work/unpacked/ort:${libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

step "environment"
{
  date -u
  uname -a
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv 2>&1 || echo "no nvidia-smi"
  python3 -m pip list 2>/dev/null | grep -Ei '^(nvidia|onnx|torch) ' || true
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  "$tessera" --version
} | tee "$out/env.txt"

device=cuda:0
gpu_flag=(--gpu)
if [ "$cpu_only" = 1 ]; then
  device=cpu
  gpu_flag=()
fi
step "tessera runtime ${gpu_flag[*]}"
"$tessera" runtime "${gpu_flag[@]}"
summary "runtime: exit $?"

# A run: name, then detect's arguments. Its progress lines (time and memory per window, NVML
# on the GPU: what the viewer's gauge shows) go to results/NAME.log.
run() {
  local name=$1
  shift
  /usr/bin/time -f "$name: %e s wall" "$tessera" detect "$@" \
    --out "$results/$name.json" 2>"$results/$name.log"
  local code=$?
  tail -2 "$results/$name.log"
  summary "- $name: exit $code, $(tail -1 "$results/$name.log")"
  return $code
}

if [ -d "$lidc" ]; then
  step "LIDC-IDRI-0001, shipped detector: cpu, then $device (halo), then $device fp16"
  run lidc-cpu "$lidc" --device cpu
  if [ "$cpu_only" = 0 ]; then
    run lidc-cuda "$lidc" --device "$device"
    run lidc-cuda-fp16 "$lidc" --device "$device" --precision fp16
    "$tessera" parity "$results/lidc-cpu.json" "$results/lidc-cuda.json" >"$results/parity-cpu-cuda.md"
    summary "- parity cpu vs cuda fp32 (halo): exit $? (0: identical within tolerance)"
    "$tessera" parity "$results/lidc-cpu.json" "$results/lidc-cuda-fp16.json" --score-tol 0.02 \
      >"$results/parity-cpu-cuda-fp16.md"
    summary "- parity cpu vs cuda fp16 (score tolerance 0.02): exit $?"
  else
    run lidc-cpu-tiled "$lidc" --device cpu --patch 288x288x64
    "$tessera" parity "$results/lidc-cpu.json" "$results/lidc-cpu-tiled.json" >"$results/parity-cpu.md"
    summary "- parity cpu default vs 288x288x64 (halo): exit $?"
  fi
else
  summary "- LIDC-IDRI-0001 not in the pack: real-CT parity skipped"
fi

# The seed's curve with the heavy test model: the whole volume against Z tiles.
size=512x512x192
patches=512x512x128,512x512x64,512x512x32,256x256x64
if [ "$cpu_only" = 1 ]; then
  size=128x128x48
  patches=128x128x32,128x128x24
fi
step "phantom $size for the heavy model"
"$tessera" phantom --size "$size" --spacing 0.7,0.7,1.25 --nodules 4 --seed 5 --out "$work/phantom" >/dev/null
step "sweep: tessera-test-heavy on $device, whole volume and $patches"
"$tessera" sweep "$work/phantom" --model assets/models/tessera-test-heavy --device "$device" \
  --patches "$patches" --out "$results/sweep-heavy" 2>"$results/sweep-heavy.log"
summary "- sweep heavy model on $device: exit $?"
if [ -d "$lidc" ] && [ "$cpu_only" = 0 ]; then
  step "sweep: shipped detector on $device, LIDC-IDRI-0001"
  "$tessera" sweep "$lidc" --device "$device" --out "$results/sweep-nodule" 2>"$results/sweep-nodule.log"
  summary "- sweep shipped detector on $device: exit $?"
fi

# The seed's table on the seed's architecture: MONAI's lung nodule RetinaNet (packed with
# DEVICE_RETINANET), the bundle's own patch 512x512x192 against the seed's Z tiles (x100 is
# x104 here: z must be a multiple of the model's stride 8), constant blending as the bundle's
# sliding window, on a 512x512x256 phantom at the bundle's spacing.
retina="$work/unpacked/models/retinanet"
if [ -f "$retina/model.json" ]; then
  rsize=512x512x256
  rpatches=512x512x192,512x512x104,512x512x80,512x512x64
  if [ "$cpu_only" = 1 ]; then
    rsize=128x128x64
    rpatches=128x128x48,128x128x32
  fi
  step "phantom $rsize at 0.703125,0.703125,1.25 mm for the RetinaNet"
  "$tessera" phantom --size "$rsize" --spacing 0.703125,0.703125,1.25 --nodules 6 --seed 5 --out "$work/phantom-retina" >/dev/null
  step "sweep: the RetinaNet on $device, whole volume and $rpatches"
  "$tessera" sweep "$work/phantom-retina" --model "$retina" --device "$device" \
    --patches "$rpatches" --out "$results/sweep-retinanet" 2>"$results/sweep-retinanet.log"
  summary "- sweep RetinaNet (the seed's architecture) on $device: exit $?"
else
  summary "- no RetinaNet packed (DEVICE_RETINANET): the seed's table on its architecture skipped"
fi

step "pack the results"
for report in "$results"/sweep-*/report.md; do
  [ -f "$report" ] && { summary ""; summary "### $(basename "$(dirname "$report")")"; cat "$report" >>"$out/summary.md"; }
done
tar -C "$results" -czf "$out/results.tar.gz" .
ls -la "$out"
step "done"
