#!/usr/bin/env bash
# Fuzzes what reads user files, SECONDS per target (default 60): the DICOM reader (bytes ->
# series -> volume), NIfTI and MetaImage volumes, the model card, det.json and SR files. Needs a nightly toolchain; installs
# cargo-fuzz from crates.io when missing. Seeds: the committed regression inputs, the shipped
# model cards and, when ../shared/data is there, real slices (only their first 64 KiB are
# used: -max_len). Corpora, logs and crash inputs stay in fuzz/ (ignored by git); a crash found
# here becomes a file in tests/fuzz-regressions/<target>/, which CI replays on stable.
#
#   ./scripts/fuzz.sh 1200                  # 20 minutes per target
#   ./scripts/fuzz.sh 1200 dicom_series     # one target
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
seconds="${1:-60}"
targets=(dicom_series model_card det_json sr_file nifti_file metaimage_file)
[ $# -gt 1 ] && targets=("${@:2}")

if ! cargo +nightly --version >/dev/null 2>&1; then
  echo "fuzz: needs a nightly toolchain: rustup toolchain install nightly" >&2
  exit 2
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  echo "fuzz: installing cargo-fuzz (once)..." >&2
  cargo install cargo-fuzz --locked || exit 2
fi

data="${TESSERA_DATA_DIR:-$root/../shared/data}"
for t in "${targets[@]}"; do
  mkdir -p "fuzz/corpus/$t" "fuzz/artifacts/$t" fuzz/logs
  cp -n tests/fuzz-regressions/"$t"/* "fuzz/corpus/$t/" 2>/dev/null
done
mkdir -p fuzz/corpus/model_card fuzz/corpus/dicom_series
for m in assets/models/*/model.json; do cp -n "$m" "fuzz/corpus/model_card/$(basename "$(dirname "$m")").json"; done
if [ -d "$data" ]; then
  # A few real slices of each real series (and the odd files around them).
  find "$data" -type f \( -name '*.dcm' -o -name 'I*' \) | sort | awk 'NR % 20 == 1' | head -40 |
    while read -r f; do cp -n "$f" "fuzz/corpus/dicom_series/real-$(echo "$f" | md5sum | cut -c1-12)"; done
else
  echo "fuzz: $data is missing: seeding without real slices" >&2
fi

summary=()
status=0
for t in "${targets[@]}"; do
  echo "fuzz: [$t] $seconds s" >&2
  log="fuzz/logs/$t.log"
  cargo +nightly fuzz run "$t" "fuzz/corpus/$t" -- \
    -max_total_time="$seconds" -max_len=65536 -rss_limit_mb=2048 -timeout=20 \
    -artifact_prefix="fuzz/artifacts/$t/" -print_final_stats=1 >"$log" 2>&1
  code=$?
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  crashes=$(find "fuzz/artifacts/$t" -type f | wc -l)
  summary+=("$t: ${runs:-?} executions, $crashes crash input(s), exit $code (log: $log)")
  [ "$code" -ne 0 ] || [ "$crashes" -ne 0 ] && status=1
done
printf 'fuzz: %s\n' "${summary[@]}" >&2
exit "$status"
