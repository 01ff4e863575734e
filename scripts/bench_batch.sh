#!/usr/bin/env bash
# Benchmark (prints figures; not a test): eight phantom studies through `tessera batch` with
# the shipped detector, run one at a time, two at a time (--jobs 2), and, when SLURM_CONF
# names a running cluster, as a Slurm job array of at most two tasks at once
# (scripts/slurm/submit.sh). For each: wall time, the largest study's own peak (det.json), and
# the machine's peak memory in use (MemTotal - MemAvailable, sampled every 0.2 s, minus what
# was in use before).
#
#   ./scripts/bench_batch.sh [WORKDIR]      # TESSERA=path/to/tessera (default: the release build)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="${1:-$(mktemp -d)}"
tessera="${TESSERA:-$root/target/release/tessera}"
[ -x "$tessera" ] || (cd "$root" && cargo build --release -p tessera)
mkdir -p "$work"
echo "study" > "$work/studies.csv"
for seed in $(seq 1 8); do
  [ -d "$work/s$seed" ] || "$tessera" phantom --seed "$seed" --size 256x256x96 --nodules 2 \
    --out "$work/s$seed" >/dev/null 2>&1
  echo "s$seed" >> "$work/studies.csv"
done
used_kib() { awk '/MemTotal/ {t=$2} /MemAvailable/ {a=$2} END {print t - a}' /proc/meminfo; }
# measure NAME COMMAND...: runs it, printing wall time and memory.
measure() {
  local name="$1"; shift
  local before peak_file="$work/.peak" start end
  before="$(used_kib)"
  echo "$before" > "$peak_file"
  ( while :; do u="$(used_kib)"; p="$(cat "$peak_file")"; [ "$u" -gt "$p" ] && echo "$u" > "$peak_file"; sleep 0.2; done ) &
  local sampler=$!
  start="$(date +%s.%N)"
  "$@" >/dev/null 2>&1 || true
  end="$(date +%s.%N)"
  kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null || true
  local study_peak
  study_peak="$(awk -F, 'NR > 1 && $7 > m {m = $7} END {printf "%.2f", m / 1073741824}' "$work/out-$name/summary.csv" 2>/dev/null || echo "?")"
  printf '%-12s wall %6.1f s   largest study peak %s GiB   machine in use +%.2f GiB\n' "$name" \
    "$(echo "$end - $start" | bc)" "$study_peak" "$(echo "($(cat "$peak_file") - $before) / 1048576" | bc -l)"
}
patch=(-- --patch 256x256x64)
rm -rf "$work"/out-*
measure sequential "$tessera" batch "$work/studies.csv" --out "$work/out-sequential" "${patch[@]}"
measure jobs-2 "$tessera" batch "$work/studies.csv" --out "$work/out-jobs-2" --jobs 2 "${patch[@]}"
if [ -n "${SLURM_CONF:-}" ]; then
  array() {
    TESSERA="$tessera" "$root/scripts/slurm/submit.sh" --gpus 0 --cpus 1 --parallel 2 \
      "$work/studies.csv" "$work/out-slurm" "${patch[@]}"
    sleep 2
    while [ -n "$(squeue -h)" ]; do sleep 0.5; done
    "$tessera" batch --summary "$work/out-slurm"
  }
  measure slurm array
else
  echo "slurm        not run: set SLURM_CONF to a running cluster's slurm.conf"
fi
echo "($(nproc) cores; studies 256x256x96 phantoms, shipped detector, patch 256x256x64)"
