#!/usr/bin/env bash
# Installs tessera for the current user, runnable from anywhere and independent of this
# checkout (which can then move or go):
#   PREFIX/bin/tessera                      the binary (a release build, made here if needed)
#   PREFIX/lib/tessera/onnxruntime/         ONNX Runtime (fetched by ./scripts/setup.sh)
#   PREFIX/lib/tessera/onnxruntime-gpu/     its GPU build, with --gpu (from setup.sh --gpu)
#   PREFIX/lib/tessera/models/              the shipped detector (test models stay here)
# The binary finds its runtime and models there, from its own location.
#
#   ./scripts/install.sh                    # into ~/.local (add ~/.local/bin to PATH)
#   ./scripts/install.sh --prefix /opt/tessera
#   ./scripts/install.sh --binary target/debug/tessera --prefix DIR   # a binary built already
# Re-running it replaces what it installed, and nothing else.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
say() { printf 'install: %s\n' "$*" >&2; }

prefix="$HOME/.local"
binary=""
gpu=0
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix="${2:?--prefix needs a folder}"; shift 2 ;;
    --binary) binary="${2:?--binary needs a file}"; shift 2 ;;
    --gpu) gpu=1; shift ;;
    *) say "unknown option $1 (--prefix DIR, --binary FILE, --gpu)"; exit 2 ;;
  esac
done

if [ "$gpu" = 1 ]; then "$root/scripts/setup.sh" --gpu; else "$root/scripts/setup.sh"; fi
if [ -z "$binary" ]; then
  say "building the release binary (cargo build --release -p tessera)"
  (cd "$root" && cargo build --release -p tessera)
  binary="$root/target/release/tessera"
fi
[ -x "$binary" ] || { say "$binary is not an executable file"; exit 1; }

mkdir -p "$prefix/bin" "$prefix/lib/tessera"
prefix="$(cd "$prefix" && pwd)"
# copy_dir FROM TO: TO replaced as a whole, through a temporary copy beside it, so that an
# interrupted install leaves the old folder or the new one, never half of one.
copy_dir() {
  local tmp="$2.installing.$$"
  rm -rf "$tmp"
  cp -R "$1" "$tmp"
  rm -rf "$2"
  mv "$tmp" "$2"
}
runtimes=(onnxruntime)
[ "$gpu" = 1 ] && runtimes+=(onnxruntime-gpu)
for runtime in "${runtimes[@]}"; do
  copy_dir "$root/.runtime/$runtime" "$prefix/lib/tessera/$runtime"
done
models_tmp="$prefix/lib/tessera/models.installing.$$"
rm -rf "$models_tmp"
mkdir -p "$models_tmp"
for model in "$root"/assets/models/*/; do
  name="$(basename "$model")"
  case "$name" in *test*) continue ;; esac
  cp -R "$model" "$models_tmp/$name"
done
rm -rf "$prefix/lib/tessera/models"
mv "$models_tmp" "$prefix/lib/tessera/models"
install -m 755 "$binary" "$prefix/bin/tessera.installing.$$"
mv "$prefix/bin/tessera.installing.$$" "$prefix/bin/tessera"

say "installed $prefix/bin/tessera with ONNX Runtime and the shipped models in $prefix/lib/tessera"
case ":$PATH:" in
  *":$prefix/bin:"*) ;;
  *) say "add $prefix/bin to PATH (e.g. export PATH=\"$prefix/bin:\$PATH\")" ;;
esac
