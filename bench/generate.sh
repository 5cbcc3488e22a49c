#!/usr/bin/env bash
# Generation on the bench's Llama shape (8 layers x 512, 8 heads over 2
# key-value heads, vocabulary 32,000; random weights): 32 tokens greedily
# after prompts of 32, 128 and 480 tokens, with the KV cache (the prompt
# once, then one position per step) against recomputing the whole prefix
# each step, at 2 threads, in one process; both ways must make the same tokens.
#
#   bash bench/generate.sh
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/scripts/setup.sh" bench
build=${LEVERS_BUILD:-$root/build}
"$build/bench/bench_generate" --threads 2 --new 32 --prompts 32,128,480 | python3 -c '
import json, sys
print("| prompt | new tokens | KV cache tokens/s | recomputing tokens/s | cache / recomputing | same tokens |")
print("|---|---|---|---|---|---|")
for r in map(json.loads, sys.stdin):
    print("| %d | %d | %.1f | %.1f | %.1fx | %s |" % (r["prompt"], r["new_tokens"], r["cached_tokens_per_s"],
          r["recomputed_tokens_per_s"], r["speedup"], "yes" if r["same_tokens"] else "NO"))
'
