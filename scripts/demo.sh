#!/usr/bin/env bash
# The main job: set up (once), build, and open the built-in demo study.
# Extra arguments go to tessera (e.g. `./scripts/demo.sh info --json`, or
# `./scripts/demo.sh view --run --screenshot shot.png` to run, save a picture and exit; on a
# machine without a display that runs under Xvfb).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$root/scripts/setup.sh"
cd "$root"
if [ ! -x target/release/tessera ]; then
  echo "demo: building tessera (release). The first build compiles about 500 crates: roughly 8 minutes on 2 cores; later builds take seconds." >&2
fi
cargo build --release -p tessera
# Without a display, a screenshot run (`view --run --screenshot FILE`) gets a virtual one
# (Xvfb, with Mesa's software renderer), installed once when it can be.
display=()
if [ -z "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ] && [[ " $* " == *" --screenshot "* ]]; then
  command -v xvfb-run >/dev/null || "$root/scripts/apt_install.sh" demo xvfb
  if command -v xvfb-run >/dev/null; then
    # Xvfb's default screen (1280x1024) is narrower than the viewer's 1500x950 window.
    display=(xvfb-run -a -s "-screen 0 1600x1000x24")
  fi
fi
echo "demo: starting ${display[*]:+${display[*]} }target/release/tessera $*" >&2
exec "${display[@]}" target/release/tessera "$@"
