#!/usr/bin/env bash
# Batched generation against one sequence at a time, on the bench's Llama
# shape (8 layers x 512, 8 heads over 2 key-value heads, vocabulary 32,000;
# random weights), 16 completions of 128 tokens, in one process each way:
# for 16 prompts of 32 to 95 tokens of Moby-Dick (Llama 2's tokenizer)
# greedily (both ways must make the same tokens), and as GRPO asks them, 2
# prompts x 8 completions sampled at temperature 1.
#
#   bash bench/batch_generate.sh [threads]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
threads=${1:-2}
bash "$root/scripts/setup.sh" bench
. "$root/bench/book_ids.sh"
build=${LEVERS_BUILD:-$root/build}
ids=$(mktemp)
trap 'rm -f "$ids"' EXIT
book_ids "$build" "$ids"
{
    "$build/bench/bench_batch_generate" --ids "$ids" --threads "$threads" --completions 16 --new 128
    "$build/bench/bench_batch_generate" --ids "$ids" --threads "$threads" --completions 16 --group 8 --new 128 \
        --temperature 1
} | python3 -c '
import json, sys
print("| completions | threads | batched tokens/s | one at a time tokens/s | batched / one at a time | same tokens |")
print("|---|---|---|---|---|---|")
for r in map(json.loads, sys.stdin):
    what = "16 prompts, greedy" if r["group"] == 1 else "%d prompts x %d, temperature %g" % (
        r["completions"] // r["group"], r["group"], r["temperature"])
    same = ("yes" if r["same_tokens"] else "NO") if r["temperature"] == 0 else "(sampled)"
    print("| %s, %d tokens each | %d | %.1f | %.1f | %.2fx | %s |" % (what, r["new_tokens"], r["threads"],
          r["batched_tokens_per_s"], r["one_at_a_time_tokens_per_s"], r["speedup"], same))
'
