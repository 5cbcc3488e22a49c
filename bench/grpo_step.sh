#!/usr/bin/env bash
# Where a GRPO step's time goes, on the CPU: `recipe run grpo` on the Llama
# shape of bench/llama_step.sh (8 layers x 512, 8 query heads over 2
# key-value heads, MLP 1376, vocabulary 32,000; random weights,
# bench/llama_dir.py, Llama 2's tokenizer), LoRA rank 8 and beta 0.04 (the
# reference: the base with its adapters off), 2 prompts of 250 characters
# of Moby-Dick (60 to 100 tokens) x 8 answers of 128 tokens per step (random
# weights never stop early), num_iterations 2 (the old policy's
# log-probabilities scored too).
# Reports each step's generation, reference (and old policy) scoring and
# update from metrics.jsonl, the median over the steps that generated after
# the first.
#
#   bash bench/grpo_step.sh [steps] [threads]     (default 5 steps, 2 threads)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
steps=${1:-5}
threads=${2:-2}
bash "$root/scripts/setup.sh" build
build=${LEVERS_BUILD:-$root/build}
data=${LEVERS_DATA:-${XDG_DATA_HOME:-$HOME/.local/share}/levers}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 "$root/bench/llama_dir.py" "$work/llama" "$data/tokenizers/llama2" --vocab 32000 --hidden 512 --layers 8 \
    --heads 8 --kv-heads 2 --intermediate 1376 --context 512 >/dev/null
# Prompts: stretches of Moby-Dick, 250 characters each, as text.
python3 - "$data/books/mobydick.txt" "$work/prompts.jsonl" <<'PY'
import json, sys
text = " ".join(open(sys.argv[1], encoding="utf-8").read()[20000:60000].split())
with open(sys.argv[2], "w") as out:
    for i in range(32):
        piece = text[i * 1000:i * 1000 + 250]
        out.write(json.dumps({"prompt": piece, "answer": "Ishmael"}) + "\n")
PY
"$build/recipe" run grpo --threads "$threads" --out "$work/run" --set model="$work/llama" \
    --set prompts="$work/prompts.jsonl" --set rewards=contains --set num_generations=8 --set batch_size=2 \
    --set max_completion_length=128 --set beta=0.04 --set num_iterations=2 --set steps="$steps" \
    --set checkpoint_every=0 >"$work/log" 2>&1 || { cat "$work/log"; exit 1; }
grep -m1 "^prompts" "$work/log"
python3 - "$work/run/metrics.jsonl" "$threads" <<'PY'
import json, statistics, subprocess, sys
rows = [r for r in map(json.loads, open(sys.argv[1])) if r["kind"] == "train"]
generated = [r for r in rows[1:] if r["time/generate_s"] > 0]
updates = [r for r in rows[1:]]
med = lambda rs, k: statistics.median(r[k] for r in rs)
cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"], capture_output=True,
                     text=True).stdout.strip()
print(f"machine: {cpu}, {sys.argv[2]} threads; {len(generated)} generating steps after the first, "
      f"{len(updates)} updates")
gen, ref, upd = med(generated, "time/generate_s"), med(generated, "time/reference_s"), med(updates, "time/update_s")
tokens = med(generated, "completions/mean_length") * 16
total = gen + ref + upd
print("| part | seconds | share of a generating step |")
print("|---|---|---|")
print(f"| generation (16 answers, {tokens:.0f} tokens, together through the KV cache) | {gen:.2f} | {gen / total:.0%} |")
print(f"| reference and old policy (two forwards without gradients) | {ref:.2f} | {ref / total:.0%} |")
print(f"| update (forward, backward; the optimizer step not included) | {upd:.2f} | {upd / total:.0%} |")
print(f"generation: {tokens / gen:.0f} tokens/s")
PY
