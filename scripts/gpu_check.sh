#!/usr/bin/env bash
# The GPU check, for an NVIDIA machine (driver installed, PyPI reachable once for the set-up):
#   1. the CUDA provider loads, with CUDA 13 / cuDNN 9 from their PyPI wheels (setup.sh --gpu);
#   2. the same detections on CUDA as on CPU, within the parity tolerance, per patch;
#   3. the NVML gauge: the GPU's name and this process's GPU memory per run (det.json stats);
#   4. peak GPU memory per patch: a sweep on cuda:0, with its report and memory model.
# Usage: scripts/gpu_check.sh [OUT_DIR] [MODEL_DIR]   (defaults: gpu-check/, the test model)
# Everything it prints is also in OUT_DIR. It never runs in CI (no GPU there).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-$root/gpu-check}"
model="${2:-$root/assets/models/tessera-test-tiny}"
patches="${GPU_CHECK_PATCHES:-512x512x160,512x512x64,256x256x64}"
# CUDA and CPU kernels add in different orders: scores agree to about 1e-4, not bit for bit.
score_tol="${GPU_CHECK_SCORE_TOL:-1e-3}"

cd "$root"
"$root/scripts/setup.sh" --gpu
cargo build --quiet --release -p tessera
tessera="$root/target/release/tessera"
mkdir -p "$out"
exec > >(tee "$out/gpu_check.log") 2>&1

echo "== driver"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || echo "nvidia-smi not available"
echo "== runtime"
"$tessera" runtime --gpu

status=0
for patch in ${patches//,/ }; do
  single=()
  [ "$patch" = "512x512x160" ] && single=(--allow-single-pass)
  echo "== patch $patch: cpu, then cuda:0"
  "$tessera" detect --model "$model" --patch "$patch" "${single[@]}" --device cpu --out "$out/cpu-$patch.json"
  "$tessera" detect --model "$model" --patch "$patch" "${single[@]}" --device cuda:0 --out "$out/cuda-$patch.json"
  python3 - "$out/cuda-$patch.json" <<'PY' || true
import json, sys
s = json.load(open(sys.argv[1]))["stats"]
print(f"NVML gauge: {s['device_name']}: peak {s['peak_memory_bytes'] / 2**20:.0f} MiB ({s['memory_source']}), host peak {s['host_peak_memory_bytes'] / 2**20:.0f} MiB, inference {s['inference_s']:.2f} s")
PY
  if ! "$tessera" parity "$out/cpu-$patch.json" "$out/cuda-$patch.json" --score-tol "$score_tol" > "$out/parity-$patch.md"; then
    status=1
  fi
  head -n 14 "$out/parity-$patch.md"
done

echo "== sweep on cuda:0"
"$tessera" sweep --model "$model" --device cuda:0 --memory-budget 16GiB --out "$out/sweep-cuda"
exit "$status"
