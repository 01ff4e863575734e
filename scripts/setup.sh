#!/usr/bin/env bash
# Prepares a fresh machine for Tessera, idempotently; the README's two commands call it.
#   - checks the Rust toolchain;
#   - fetches ONNX Runtime 1.31.1 (the CPU library from the PyPI wheel: no CDN is needed)
#     into .runtime/onnxruntime/, where the tessera binary looks for it;
#   - with --gpu, also the GPU build (onnxruntime-gpu: CUDA and TensorRT providers) into
#     .runtime/onnxruntime-gpu/ and the CUDA 13 / cuDNN 9 libraries from their PyPI wheels
#     into .runtime/onnxruntime-gpu/cuda/ (about 1.6 GB; tessera preloads them for --device cuda).
# Re-running it does nothing once everything is in place.
set -euo pipefail

gpu=0
for arg in "$@"; do
  case "$arg" in
    --gpu) gpu=1 ;;
    *) printf 'setup: unknown option %s (only --gpu)\n' "$arg" >&2; exit 2 ;;
  esac
done

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ort_version="1.31.1"
runtime_dir="$root/.runtime/onnxruntime"
lib="$runtime_dir/libonnxruntime.so.$ort_version"

say() { printf 'setup: %s\n' "$*" >&2; }

if ! command -v cargo >/dev/null 2>&1; then
  say "cargo not found: install Rust (https://rustup.rs), then run this again"
  exit 1
fi

if [ -f "$lib" ] && { [ "$gpu" = 0 ] || [ -f "$root/.runtime/onnxruntime-gpu/cuda/.complete" ]; }; then
  exit 0
fi

case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) platform=x86_64 ;;
  Linux-aarch64) platform=aarch64 ;;
  *) say "automatic ONNX Runtime set-up supports Linux x86_64/aarch64 only; set ORT_DYLIB_PATH to your libonnxruntime $ort_version"; exit 1 ;;
esac

python=""
for candidate in python3 python; do
  if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -m pip --version >/dev/null 2>&1; then
    python="$candidate"; break
  fi
done
if [ -z "$python" ]; then
  say "python3 with pip is needed once, to fetch ONNX Runtime from PyPI (e.g. apt-get install python3-pip)"
  exit 1
fi

# The libraries inside are the same for every CPython tag; pin one so any local Python works.
pip_platform=(--only-binary=:all: --python-version 3.12 --implementation cp --abi cp312
  --platform "manylinux_2_28_$platform" --platform "manylinux_2_27_$platform"
  --platform "manylinux_2_17_$platform")

# fetch PACKAGE DEST FILE...: unpack onnxruntime/capi/FILE from the PACKAGE wheel into DEST.
fetch() {
  local package="$1" dest="$2"; shift 2
  local wheels="$root/.runtime/wheels"
  mkdir -p "$wheels" "$dest"
  "$python" -m pip download --quiet --no-deps "${pip_platform[@]}" -d "$wheels" "$package==$ort_version"
  local wheel
  wheel="$(ls "$wheels"/"${package//-/_}"-"$ort_version"-*.whl | head -n 1)"
  "$python" - "$wheel" "$dest" "$@" <<'PY'
import os, sys, zipfile
wheel, dest, names = sys.argv[1], sys.argv[2], sys.argv[3:]
with zipfile.ZipFile(wheel) as z:
    for name in names:
        member = next(m for m in z.namelist() if m.endswith("capi/" + name))
        tmp = os.path.join(dest, name + ".part")
        with z.open(member) as src, open(tmp, "wb") as out:
            out.write(src.read())
        os.chmod(tmp, 0o755)
        os.replace(tmp, os.path.join(dest, name))
PY
  rm -rf "$wheels"
}

if [ ! -f "$lib" ]; then
  say "fetching ONNX Runtime $ort_version from PyPI (onnxruntime wheel, CPU)"
  fetch onnxruntime "$runtime_dir" "libonnxruntime.so.$ort_version"
  say "ONNX Runtime $ort_version ready: $lib"
fi

if [ "$gpu" = 1 ] && [ ! -f "$root/.runtime/onnxruntime-gpu/cuda/.complete" ]; then
  gpu_dir="$root/.runtime/onnxruntime-gpu"
  say "fetching the GPU build of ONNX Runtime $ort_version (onnxruntime-gpu wheel)"
  fetch onnxruntime-gpu "$gpu_dir" "libonnxruntime.so.$ort_version" libonnxruntime_providers_shared.so \
    libonnxruntime_providers_cuda.so libonnxruntime_providers_tensorrt.so
  say "fetching CUDA 13 and cuDNN 9 from PyPI (the onnxruntime-gpu [cuda,cudnn] extras, ~1.6 GB)"
  # These wheels are py3-none-manylinux: this machine's own pip picks the right ones.
  "$python" -m pip install --quiet --upgrade --no-compile --only-binary=:all: --target "$gpu_dir/cuda" \
    "nvidia-cuda-runtime~=13.0" "nvidia-cuda-nvrtc~=13.0" "nvidia-cufft~=12.0" "nvidia-curand~=10.0" \
    "nvidia-cublas~=13.0" "nvidia-cudnn-cu13~=9.0"
  touch "$gpu_dir/cuda/.complete"
  say "GPU runtime ready in $gpu_dir (the NVIDIA driver itself must be installed on the machine)"
fi
