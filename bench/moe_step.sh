#!/usr/bin/env bash
# A mixture of experts' training step on the CPU against PyTorch, in one run:
# the Llama shape of bench/llama_step.sh with each MLP a Mixtral block of 8
# experts of 688, top 2, the load-balancing loss at 0.02 (bench_moe_step,
# bench/moe_step.cpp; it also times the dense model of the same active
# parameters, MLP 1376, alternating with the mixture), and PyTorch computing
# the same mixture from the same weights as transformers' Mixtral does, a
# loop over the experts with index_add_ (bench/moe_step.py); two sequences of
# 512 tokens of Moby-Dick (Llama 2's tokenizer); at 1 and 2 threads; the
# median step.
#
#   bash bench/moe_step.sh [steps]     (default 3 timed steps of each)
#
# Installs Debian's python3-torch and OpenBLAS if missing; the peer runs with
# both OpenBLAS builds (pthreads, OpenMP), each with and without flushing
# subnormals to zero, and the fastest is reported (as bench/llama_step.sh does).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
steps=${1:-3}
. "$root/bench/install_peers.sh"
install_peers python3-torch libopenblas0-pthread libopenblas0-openmp
bash "$root/scripts/setup.sh" bench
. "$root/bench/book_ids.sh"
build=${LEVERS_BUILD:-$root/build}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
book_ids "$build" "$out/ids.json"
for threads in 1 2; do
    "$build/bench/bench_moe_step" --ids "$out/ids.json" --threads "$threads" --steps "$steps" --save "$out/mixtral" \
        >>"$out/levers.jsonl"
    torch_builds "$threads" "$out/torch-$threads.jsonl" "$root/bench/moe_step.py" --model "$out/mixtral" \
        --ids "$out/ids.json" --steps "$steps"
    rm -rf "$out/mixtral"
done

/usr/bin/python3 - "$out" "$root/bench" <<'PY'
import sys
sys.path.insert(0, sys.argv[2])
from summary import machine, rows
out = sys.argv[1]
print(machine())
print()
print("| threads | levers MoE step ms | PyTorch MoE step ms | levers / PyTorch speed | levers dense step ms (same active parameters) | MoE / dense time | first loss levers, PyTorch | PyTorch BLAS |")
print("|---|---|---|---|---|---|---|---|")
levers = rows(f"{out}/levers.jsonl")
for r in levers:
    t = r["threads"]
    best = min(rows(f"{out}/torch-{t}.jsonl"), key=lambda x: x["median_step_ms"])
    print(f"| {t} | {r['moe_step_ms']:.0f} | {best['median_step_ms']:.0f} | {best['median_step_ms'] / r['moe_step_ms']:.2f}x | "
          f"{r['dense_step_ms']:.0f} | {r['moe_vs_dense_time']:.2f}x | {r['first_loss']:.4f}, {best['first_loss']:.4f} | "
          f"{best['blas_build']} |")
r = levers[-1]
print()
print(f"mixture: {r['moe_parameters'] / 1e6:.1f} M parameters, {r['moe_active_parameters'] / 1e6:.1f} M active a token "
      f"(dense: {r['dense_parameters'] / 1e6:.1f} M); busiest expert {r['busiest_expert_tokens']} tokens of a layer's "
      f"{r['tokens']} (an even share {r['even_share_tokens']})")
PY
