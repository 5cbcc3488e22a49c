#!/usr/bin/env bash
# Gemma 3's sliding layers against its global ones: a 4,096-position
# training step's attention (forward and backward) with a 512-key window
# against the whole causal context, at Gemma 3 1B's layer shape (4 query
# heads, 1 key-value head of 256), 2 threads, alternated, median of 5. The
# target: the sliding layer at <= 0.3x the global one's time.
#
#   bash bench/sliding_window.sh
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/scripts/setup.sh" bench
build=${LEVERS_BUILD:-$root/build}
"$build/bench/bench_sliding_window" --time 4096 --window 512 --threads 2 --steps 5 | python3 -c '
import json, sys
rows = {r["kind"]: r for r in map(json.loads, sys.stdin)}
g, s = rows["global"], rows["sliding"]
print("| layer | keys a query sees | step attention (ms) |")
print("|---|---|---|")
print("| global | up to %d | %.0f |" % (g["time"], g["median_step_ms"]))
print("| sliding | up to %d | %.0f |" % (s["window"], s["median_step_ms"]))
print("sliding / global: %.2fx (target <= 0.30x)" % (s["median_step_ms"] / g["median_step_ms"]))
'
