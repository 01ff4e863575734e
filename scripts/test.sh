#!/usr/bin/env bash
# The whole test suite: set up (once), then formatting, lints, and every test in the workspace.
# Tests that need ../shared/data fail in CI (CI=true) when it is missing, and say so elsewhere.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
cd "$root"
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
cargo test --workspace
