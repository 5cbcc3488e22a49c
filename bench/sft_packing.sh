#!/usr/bin/env bash
# sft with packing against without, on the chat demonstration's model and
# data: the books' conversations (scripts/books_chat.py) read by the small
# Llama pretrain_llama makes (Llama 3's tokenizer, vocabulary 128,256). The
# same rows per step either way (8 of 256 tokens, the model's context): packed, a row holds
# several conversations, each attending within itself; unpacked, one
# conversation and padding. Throughput counts the real (non-padding) tokens
# a step trains on; the runs alternate, and the median is reported.
#
#   bash bench/sft_packing.sh [rounds] [steps]     (default 3 rounds of 40 steps each)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
rounds=${1:-3}
steps=${2:-40}
bash "$root/scripts/setup.sh" bench
build=${LEVERS_BUILD:-$root/build}
data=${LEVERS_DATA:-${XDG_DATA_HOME:-$HOME/.local/share}/levers}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cd "$out"

# The demonstration's model; its weights do not change the time of a step.
"$build/recipe" run pretrain_llama --set steps=1 --set eval_every=0 --set sample_tokens=0 >/dev/null
for round in $(seq "$rounds"); do
    for packing in true false; do
        "$build/recipe" run sft --set model=runs/pretrain_llama/latest/model --set data="$data/chat/books_chat.jsonl" \
            --set lora_r=0 --set context=256 --set batch_size=8 --set packing=$packing --set steps="$steps" \
            --set log_every="$steps" --set eval_every=0 --set checkpoint_every=0 --threads 2 \
            | tail -n 1 >>"$out/$packing.jsonl"
    done
done

python3 - "$out" "$steps" <<'PY'
import json, pathlib, platform, statistics, subprocess, sys
out, steps = pathlib.Path(sys.argv[1]), int(sys.argv[2])
cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"], capture_output=True, text=True).stdout.strip()
print(f"machine: {cpu}, {platform.machine()}, 2 threads; {steps} steps of 8 rows x 256 tokens per run")
print()
print("| packing | real tokens/s (median) | runs |")
print("|---|---|---|")
rate = {}
for packing in ("true", "false"):
    runs = [json.loads(l)["items_per_second"] for l in (out / f"{packing}.jsonl").read_text().splitlines()]
    rate[packing] = statistics.median(runs)
    print(f"| {packing} | {rate[packing]:.0f} | {', '.join(f'{r:.0f}' for r in runs)} |")
print()
print(f"packing / one conversation per row: {rate['true'] / rate['false']:.2f}x")
PY
