#!/usr/bin/env bash
# The main job: set up (once), build, and open the built-in demo study.
# Extra arguments go to tessera (e.g. `./scripts/demo.sh info --json`, or
# `./scripts/demo.sh view --run --screenshot shot.png` to run, save a picture and exit).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
cd "$root"
if [ ! -x target/release/tessera ]; then
  echo "demo: building tessera (release). The first build compiles about 500 crates: roughly 8 minutes on 2 cores; later builds take seconds." >&2
fi
cargo build --release -p tessera
echo "demo: starting target/release/tessera $*" >&2
exec target/release/tessera "$@"
