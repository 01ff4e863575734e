#!/usr/bin/env bash
# The whole test suite: set up (once), then formatting, lints, and every test in the workspace.
# Tests that need ../shared/data fail in CI (CI=true) when it is missing, and say so elsewhere.
# Each step says what it does and how long it took; the first run builds everything twice
# (clippy checks, tests compile), later runs only what changed.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
started=$SECONDS
step_started=$SECONDS
step() {
  printf 'test: [%s] %s\n' "$1" "$2" >&2
  step_started=$SECONDS
}
took() {
  printf 'test: ... %d s (total %d s)\n' $((SECONDS - step_started)) $((SECONDS - started)) >&2
}

step 1/5 "set-up (ONNX Runtime from PyPI; the test tools from Debian: dcmtk, dicom3tools, dcm2niix, plastimatch, orthanc, slurm-wlm, munge; once)"
"$root/scripts/setup.sh"
"$root/scripts/tools.sh"
took
step 2/5 "formatting (cargo fmt --check)"
cargo fmt --all -- --check
took
step 3/5 "lints (cargo clippy -D warnings; first run: checks about 500 crates, roughly 6 minutes on 2 cores)"
cargo clippy --workspace --all-targets -- -D warnings
took
step 4/5 "building the tests (first run: roughly 8 minutes on 2 cores)"
cargo test --workspace --no-run
took
step 5/5 "running the tests (roughly 4 minutes on 2 cores; the slowest run the shipped detector on real CTs)"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
set +e
cargo test --workspace 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
took
# One closing line for the whole workspace (cargo prints one per test binary, the last of
# which is often an empty doc-test run).
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "workspace: %d passed, %d failed\n", p, f }' "$log"
exit "$status"
