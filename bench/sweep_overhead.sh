#!/usr/bin/env bash
# Sweep overhead: K equal cells run by `recipe sweep` on K slots against one
# such cell run alone, both timed from the shell (process start to exit, data
# loading included). Equal cells: classify with K seeds, one thread each. K is
# the cores of this machine unless given; a K above the cores measures sharing
# cores, not levers.
#
#   bash bench/sweep_overhead.sh [K [steps]]      (default: cores, 3000 steps)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cells=${1:-$(nproc)}
steps=${2:-3000}
bash "$root/scripts/setup.sh" bench
build=${LEVERS_BUILD:-$root/build}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export LEVERS_LEDGER_DIR=$work/ledger LEVERS_CPU_SLOTS=$cells
cd "$work"
now() { date +%s.%N; }

t0=$(now)
"$build/recipe" run classify --threads 1 --set steps="$steps" --set log_every="$steps" --out one >/dev/null
t1=$(now)
seeds=$(seq -s, 1 "$cells")
"$build/recipe" sweep classify --grid seed="$seeds" --set steps="$steps" --set log_every="$steps" --out sweep \
    >sweep.log
t2=$(now)
python3 - "$t0" "$t1" "$t2" "$cells" sweep/sweep.json <<'PY'
import json, sys
t0, t1, t2 = map(float, sys.argv[1:4])
cells = int(sys.argv[4])
rows = json.load(open(sys.argv[5]))
one, sweep = t1 - t0, t2 - t1
slowest = max(r["seconds"] for r in rows)
print(f"one cell alone:              {one:6.2f} s")
print(f"{cells} cells on {cells} slots:         {sweep:6.2f} s  = {sweep / one:.3f}x one cell (target <= 1.05x)")
print(f"  slowest cell inside it:    {slowest:6.2f} s  (cells sharing memory bandwidth: {slowest / one:.3f}x)")
print(f"  sweep's own overhead:      {sweep - slowest:6.2f} s  (spawning, scheduling, the report)")
PY
