#!/usr/bin/env bash
# The whole test suite: set up (once), then formatting, lints, and every test in the workspace.
# Tests that need ../shared/data fail in CI (CI=true) when it is missing, and say so elsewhere.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
cd "$root"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
set +e
cargo test --workspace 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
# One closing line for the whole workspace (cargo prints one per test binary, the last of
# which is often an empty doc-test run).
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "workspace: %d passed, %d failed\n", p, f }' "$log"
exit "$status"
