#!/usr/bin/env bash
# Retrains the shipped detector from scratch, with fixed seeds, into assets/models/tessera-nodule.
#   training/train.sh            (about an hour on two CPU cores, measured in parts: about 40
#                                  min for the detector, 20 for the rescoring stage; README.md)
# Steps: a Python venv with requirements.txt, the release `tessera` binary, phantoms and
# resampled volumes (training/.work), training (resumable from .work/checkpoint.pt), ONNX
# export checked against PyTorch, optionally (TESSERA_MASSES=1) a second phase with 20-50 mm
# masses from that export (its own checkpoint-masses.pt) and its export, the rescoring stage (trained on the detector's candidates,
# exported and named in the card), then metrics through `tessera detect` + `tessera evaluate`.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
work="${TESSERA_TRAIN_DIR:-$here/.work}"
shared="${TESSERA_SHARED_DATA:-$root/../shared/data}"
out="$root/assets/models/tessera-nodule"

if [ ! -x "$here/.venv/bin/python" ]; then
    python3 -m venv "$here/.venv"
fi
"$here/.venv/bin/pip" install -q -r "$here/requirements.txt"
"$root/scripts/setup.sh"
cargo build --release -p tessera --manifest-path "$root/Cargo.toml"
tessera="${CARGO_TARGET_DIR:-$root/target}/release/tessera"
mkdir -p "$work"
cd "$here"
py="$here/.venv/bin/python"
"$py" -m tessera_train.data --tessera "$tessera" --work "$work"
"$py" -u -m tessera_train.train --tessera "$tessera" --work "$work" --shared "$shared"
"$py" -m tessera_train.export --work "$work" --out "$out"
# The masses phase is measured but not shipped (README.md, "Large lesions"): TESSERA_MASSES=1
# runs it, and trains the stage on the mass phantoms too.
stage_extra=()
if [ "${TESSERA_MASSES:-0}" = 1 ]; then
    "$py" -u -m tessera_train.train --tessera "$tessera" --work "$work" --shared "$shared" \
        --phase masses --init-onnx "$out/model.onnx"
    "$py" -m tessera_train.export --work "$work" --out "$out" --phase masses
    stage_extra=(--with-masses)
fi
"$py" -u -m tessera_train.rescore --tessera "$tessera" --work "$work" --shared "$shared" \
    --model "$out" "${stage_extra[@]}"
"$py" -m tessera_train.evaluate --tessera "$tessera" --work "$work" --shared "$shared" --model "$out"
echo "done: $out (commit model.onnx, model_fp16.onnx, rescore.onnx and model.json together)"
