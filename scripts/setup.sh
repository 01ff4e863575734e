#!/usr/bin/env bash
# Prepares a fresh machine for Tessera, idempotently; the README's two commands call it.
#   - checks the Rust toolchain;
#   - fetches ONNX Runtime 1.31.1 (the CPU library from the PyPI wheel: no CDN is needed)
#     into .runtime/onnxruntime/, where the tessera binary looks for it.
# Re-running it does nothing once everything is in place.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ort_version="1.31.1"
runtime_dir="$root/.runtime/onnxruntime"
lib="$runtime_dir/libonnxruntime.so.$ort_version"

say() { printf 'setup: %s\n' "$*" >&2; }

if ! command -v cargo >/dev/null 2>&1; then
  say "cargo not found: install Rust (https://rustup.rs), then run this again"
  exit 1
fi

if [ -f "$lib" ]; then
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

say "fetching ONNX Runtime $ort_version from PyPI (onnxruntime wheel, CPU)"
wheels="$root/.runtime/wheels"
mkdir -p "$wheels" "$runtime_dir"
# The library inside is the same for every CPython tag; pin one so any local Python works.
"$python" -m pip download --quiet --no-deps --only-binary=:all: \
  --python-version 3.12 --implementation cp --abi cp312 \
  --platform "manylinux_2_28_$platform" --platform "manylinux_2_27_$platform" \
  --platform "manylinux_2_17_$platform" \
  -d "$wheels" "onnxruntime==$ort_version"

wheel="$(ls "$wheels"/onnxruntime-"$ort_version"-*.whl | head -n 1)"
"$python" - "$wheel" "$runtime_dir" "$ort_version" <<'PY'
import os, sys, zipfile
wheel, dest, version = sys.argv[1:4]
name = f"libonnxruntime.so.{version}"
with zipfile.ZipFile(wheel) as z:
    member = next(m for m in z.namelist() if m.endswith("capi/" + name))
    tmp = os.path.join(dest, name + ".part")
    with z.open(member) as src, open(tmp, "wb") as out:
        out.write(src.read())
    os.chmod(tmp, 0o755)
    os.replace(tmp, os.path.join(dest, name))
PY
rm -rf "$wheels"
say "ONNX Runtime $ort_version ready: $lib"
