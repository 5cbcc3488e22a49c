#!/usr/bin/env bash
# The head and loss over Llama 3's vocabulary (128,256 tokens) for 2,048
# positions of width 512: in chunks (what the Llama family's loss does)
# against the logits materialised whole, in one process, at 2 threads: the
# step's time (forward + backward, median of 3) and the storage pool's peak
# (weights and their gradient included: 250 MB each).
#
#   bash bench/chunked_loss.sh
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/scripts/setup.sh" bench
build=${LEVERS_BUILD:-$root/build}
"$build/bench/bench_chunked_loss" --rows 2048 --hidden 512 --vocab 128256 --threads 2 --steps 3 | python3 -c '
import json, sys
rows = {r["way"]: r for r in map(json.loads, sys.stdin)}
m, c = rows["materialised"], rows["chunked"]
print("| way | step (ms) | logits held (MB) | pool peak (MB) | loss |")
print("|---|---|---|---|---|")
for r in (m, c):
    print("| %s | %.0f | %.0f | %.0f | %.6f |" % (r["way"], r["median_step_ms"], r["logits_held_mb"], r["peak_pool_mb"], r["loss"]))
print("chunked / materialised: time %.2fx, pool peak %.2fx, saved %.0f MB" % (
    c["median_step_ms"] / m["median_step_ms"], c["peak_pool_mb"] / m["peak_pool_mb"], m["peak_pool_mb"] - c["peak_pool_mb"]))
'
