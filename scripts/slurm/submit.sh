#!/usr/bin/env bash
# Submits a Tessera batch as a Slurm job array: one task per study of MANIFEST, at most
# PARALLEL at once, each with the memory the model's plan predicts for the largest study
# (`tessera batch --array-spec`), GPUS GPUs and CPUS cores. Prints sbatch's job id.
#
#   scripts/slurm/submit.sh [--parallel P] [--gpus G] [--cpus C] [--model DIR] MANIFEST DIR \
#     [-- DETECT OPTIONS]
#
# TESSERA names the binary (default: tessera on PATH). Extra sbatch options: SBATCH_* variables
# (e.g. SBATCH_PARTITION=gpu), which sbatch reads itself.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tessera="${TESSERA:-tessera}"
parallel=8
gpus=1
cpus=4
model=()
while [ $# -gt 0 ]; do
  case "$1" in
    --parallel) parallel="$2"; shift 2 ;;
    --gpus) gpus="$2"; shift 2 ;;
    --cpus) cpus="$2"; shift 2 ;;
    --model) model=(--model "$2"); shift 2 ;;
    *) break ;;
  esac
done
usage="usage: submit.sh [--parallel P] [--gpus G] [--cpus C] [--model DIR] MANIFEST DIR [-- DETECT OPTIONS]"
manifest="${1:?$usage}"
out="${2:?$usage}"
shift 2
[ "${1:-}" = "--" ] && shift
# Also makes DIR the batch's folder (its marker), before any task or log is in it.
spec="$("$tessera" batch "$manifest" --out "$out" --array-spec "${model[@]}" -- "$@")"
studies="$(sed -n 's/^studies=//p' <<<"$spec")"
mem_mib="$(sed -n 's/^mem_mib=//p' <<<"$spec")"
options=(--parsable --array="0-$((studies - 1))%$parallel" --cpus-per-task="$cpus")
[ -n "$mem_mib" ] && options+=(--mem="${mem_mib}M")
[ "$gpus" -gt 0 ] && options+=(--gres="gpu:$gpus")
mkdir -p "$out/logs"
sbatch "${options[@]}" --chdir "$PWD" --output "$out/logs/slurm-%A_%a.log" \
  --export=ALL,TESSERA="$tessera" \
  "$here/tessera-array.sbatch" "$manifest" "$out" "${model[@]}" -- "$@"
