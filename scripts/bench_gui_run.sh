#!/usr/bin/env bash
# The viewer's detection run against the CLI's on one study, same settings (the shipped
# detector's defaults: its recommended patch, halo, all cores, rescoring on), each in a fresh
# process, alternating, best of N. Prints both run times (start of the run to its report, as
# each reports it), the processes' wall times, and the ratios. By hand only, never in CI.
#
#   scripts/bench_gui_run.sh [STUDY] [N]     (default: ../shared/data/lidc/LIDC-IDRI-0003, 3)
#
# Needs a display: when DISPLAY is unset the viewer runs under Xvfb (xvfb-run, Mesa llvmpipe).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
study="${1:-$root/../shared/data/lidc/LIDC-IDRI-0003}"
repeat="${2:-3}"
bin="$root/target/release/tessera"
[ -d "$study" ] || { echo "bench_gui_run: no study at $study" >&2; exit 1; }
"$root/scripts/setup.sh"
cargo build --release -p tessera --manifest-path "$root/Cargo.toml" >&2

display=()
if [ -z "${DISPLAY:-}" ]; then
  command -v xvfb-run >/dev/null || { echo "bench_gui_run: no DISPLAY and no xvfb-run (apt install xvfb)" >&2; exit 1; }
  display=(xvfb-run -a -s "-screen 0 1600x1000x24")
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

now() { date +%s.%N; }
best() { sort -g | head -1; }

for i in $(seq "$repeat"); do
  t0=$(now)
  "$bin" detect "$study" --out "$work/cli.json" --force >/dev/null 2>"$work/cli.log"
  t1=$(now)
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["stats"]["elapsed_s"])' \
    "$work/cli.json" >>"$work/cli_run"
  echo "$t1 - $t0" | bc >>"$work/cli_wall"

  t0=$(now)
  "${display[@]}" "$bin" view "$study" --run --screenshot "$work/view.png" 2>"$work/view.log"
  t1=$(now)
  # "tessera view: info: run #1 ... finished: 8 detection(s) in 45.2 s, peak ..."
  run_s=$(sed -n 's/.*finished: .* detection(s) in \([0-9.]*\) s.*/\1/p' "$work/view.log" | tail -1)
  [ -n "$run_s" ] || { echo "bench_gui_run: the viewer reported no finished run:" >&2; cat "$work/view.log" >&2; exit 1; }
  echo "$run_s" >>"$work/view_run"
  echo "$t1 - $t0" | bc >>"$work/view_wall"
  printf 'round %s: cli run %.1f s, viewer run %.1f s\n' "$i" "$(tail -1 "$work/cli_run")" "$run_s"
done

cli_run=$(best <"$work/cli_run"); view_run=$(best <"$work/view_run")
cli_wall=$(best <"$work/cli_wall"); view_wall=$(best <"$work/view_wall")
printf '%s, best of %s, %s cores\n' "$study" "$repeat" "$(nproc)"
printf '  run:     cli %6.1f s   viewer %6.1f s   viewer/cli %.3f\n' \
  "$cli_run" "$view_run" "$(echo "$view_run / $cli_run" | bc -l)"
printf '  process: cli %6.1f s   viewer %6.1f s   viewer/cli %.3f (viewer: window, load, screenshot)\n' \
  "$cli_wall" "$view_wall" "$(echo "$view_wall / $cli_wall" | bc -l)"
