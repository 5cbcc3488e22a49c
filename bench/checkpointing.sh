#!/usr/bin/env bash
# Activation checkpointing against keeping the activations: one GPT training
# step (forward, backward, clipping, AdamW) with and without --checkpoint,
# alternating within each round, at two shapes: the 4-layer, 128-wide GPT of
# cpu_step.sh (batch 16 x 128) and GPT-2 small's blocks (12 x 768, 12 heads,
# context 256, batch 4, byte vocabulary). Reported: the activations' peak (the
# storage pool's), the process's peak resident memory, and the median step's
# tokens/s, each as a ratio to no checkpointing.
#
#   bash bench/checkpointing.sh [rounds] [threads]     (default 3 rounds, 2 threads)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
rounds=${1:-3}
threads=${2:-2}
bash "$root/scripts/setup.sh" bench
build=${LEVERS_BUILD:-$root/build}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
shapes=("small:--layers 4 --embd 128 --heads 4 --block 128 --batch 16 --vocab 256 --steps 10 --warmup 3"
        "gpt2:--layers 12 --embd 768 --heads 12 --block 256 --batch 4 --vocab 256 --steps 3 --warmup 1")
for ((round = 0; round < rounds; round++)); do
    for shape in "${shapes[@]}"; do
        name=${shape%%:*}
        read -r -a args <<<"${shape#*:}"
        for mode in plain checkpoint; do
            flag=()
            [[ $mode == checkpoint ]] && flag=(--checkpoint)
            "$build/bench/bench_gpt_step" --threads "$threads" "${args[@]}" "${flag[@]}" >>"$out/$name-$mode.jsonl"
        done
    done
done
python3 - "$out" <<'PY'
import json, statistics, sys, pathlib
out = pathlib.Path(sys.argv[1])
def med(name, mode, key):
    rows = [json.loads(l) for l in (out / f"{name}-{mode}.jsonl").read_text().splitlines()]
    return statistics.median(r[key] for r in rows)
print("| shape | activations MB (plain / checkpointed) | ratio | peak RSS MB (plain / checkpointed) | ratio | tok/s (plain / checkpointed) | ratio |")
print("|---|---|---|---|---|---|---|")
for name in ("small", "gpt2"):
    a = [med(name, m, "activations_mb") for m in ("plain", "checkpoint")]
    r = [med(name, m, "peak_rss_mb") for m in ("plain", "checkpoint")]
    t = [med(name, m, "tokens_per_second") for m in ("plain", "checkpoint")]
    print(f"| {name} | {a[0]:.0f} / {a[1]:.0f} | {a[1] / a[0]:.2f} | {r[0]:.0f} / {r[1]:.0f} | {r[1] / r[0]:.2f} | "
          f"{t[0]:.0f} / {t[1]:.0f} | {t[1] / t[0]:.2f}x |")
PY
