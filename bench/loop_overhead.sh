#!/usr/bin/env bash
# The training loop's fixed cost per step (clipping, AdamW over the model's
# tensors, the schedule, progress lines, a metrics row a step) on the user
# project's small models, on real Fashion-MNIST batches: the CNN (16
# channels, 20,490 parameters), the residual MLP at width 24 (20,506) and at
# its recipe's width 256 (336,650), on one thread (bench_loop_overhead: the
# micro-step alone, a hand-written loop, train_loop, and train_loop around a
# micro-step that only returns its loss, alternating).
#
#   bash bench/loop_overhead.sh [rounds]     (default 5 rounds of 300 steps; medians are reported)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
rounds=${1:-5}
bash "$root/scripts/setup.sh" bench
build=${LEVERS_BUILD:-$root/build}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for model in cnn mlp_20k mlp; do
    "$build/bench/bench_loop_overhead" --model "$model" --rounds "$rounds" | tail -n 1 >>"$out"
done
/usr/bin/python3 - "$out" <<'PY'
import json, sys
print("| model | parameters | batch | micro-step ms | hand-written loop ms | train_loop ms | fixed cost µs (hollow train_loop) | share of the step | train_loop - micro-step µs | train_loop - hand-written µs |")
print("|---|---|---|---|---|---|---|---|---|---|")
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(f"| {r['model']} | {r['parameters']:,} | {r['batch']} | {r['step_ms']:.3f} | {r['manual_ms']:.3f} | {r['loop_ms']:.3f} | "
          f"{r['fixed_us']:.1f} | {100 * r['fixed_share']:.1f}% | {r['difference_us']:.1f} | {r['framework_us']:.1f} |")
PY
