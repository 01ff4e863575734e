#!/usr/bin/env bash
# The main job: set up (once), build, and open the built-in demo study.
# Extra arguments go to tessera (e.g. `./scripts/demo.sh info --json`).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
cd "$root"
exec cargo run --quiet --release -p tessera -- "$@"
