#!/usr/bin/env bash
# Data-parallel scaling on the CPU: the pretrain recipe (0.84M-parameter GPT,
# batch 16 x 128 per rank) on 1 and 2 ranks of one thread each, the same
# per-rank batch, with each rank's training time split into computing,
# communication not hidden by overlap, and waiting for the other rank (plus the
# communication that ran hidden behind backward). Extra arguments go to both
# runs, e.g. --set bucket_mb=1 for buckets smaller than the 3.4 MB of gradients.
#
#   bash bench/cpu_scaling.sh [steps [recipe options...]]     (default 150 steps)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
steps=${1:-150}
shift || true
bash "$root/scripts/setup.sh" bench
build=${LEVERS_BUILD:-$root/build}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for ranks in 1 2; do
    "$build/recipe" run pretrain --gpus "$ranks" --threads 1 --output rank0 --set steps="$steps" \
        --set log_every="$steps" --set eval_every=0 --set eval_batches=1 --set sample_tokens=0 "$@" \
        | tail -n 1 >"$out/$ranks.json"
done
python3 - "$out" <<'PY'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
rows = {r: json.loads((out / f"{r}.json").read_text()) for r in (1, 2)}
base = rows[1]["tokens_per_second"]
print("| ranks | tokens/s | speedup | efficiency | compute s | communication s (not hidden) | waiting s | hidden communication s |")
print("|---|---|---|---|---|---|---|---|")
for r, d in rows.items():
    t = d["time_split"]
    speedup = d["tokens_per_second"] / base
    print(f"| {r} | {d['tokens_per_second']:.0f} | {speedup:.2f}x | {speedup / r:.0%} | {t['compute_s']:.2f} | "
          f"{t['communication_s']:.2f} | {t['waiting_s']:.2f} | {t['hidden_communication_s']:.2f} |")
PY
