#!/usr/bin/env bash
# `recipe plan` against the peak a run measures: for each shape the plan's
# "as configured" peak per rank (traced on shapes alone, before launch) and
# the run's peak_memory_mb (the tensor memory its device held through the
# first step), one step each, as planned / measured. On CPU ranks:
#
#   gpt:        pretrain's default GPT (4 x 128, context 128), batch 16
#   gpt-ckpt:   the same with activation checkpointing, batch 32
#   gpt2:       GPT-2 small's blocks (12 x 768, 12 heads, context 256), batch 4
#   gpt-zero1:  the default GPT on 2 ranks under ZeRO-1, batch 16 per rank
#   gpt2-zero2: GPT-2 small's blocks on 4 ranks under ZeRO-2 (gradients
#               sharded: the buckets backward fills are traced), batch 2
#   llama:      pretrain_llama (Llama 3's tokenizer: a 128K vocabulary), batch 4
#   llama-ckpt: the same with checkpointing, batch 16
#
# and, where this build has the emulated GPU (tests/emulated), pretrain's
# small GPT on it in f32, bf16, on two GPUs under ZeRO-2, and on two in bf16
# under ZeRO-1 and 2 (each rank keeping the f32 masters of its shard). The corpus is 200 KB of one book, so the
# recipes' final evaluation over the validation split stays short.
#
#   bash bench/plan.sh
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
bash "$root/scripts/setup.sh" bench
build=${LEVERS_BUILD:-$root/build}
books=${LEVERS_DATA:-$HOME/.local/share/levers}/books
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
head -c 200000 "$books/mobydick.txt" >"$out/corpus.txt"
one_step=(--set steps=1 --set eval_every=0 --set eval_batches=1 --set sample_tokens=0 --set checkpoint_every=0
          --set corpus="$out/corpus.txt")

# NAME BINARY RECIPE GPUS ARGS...: the plan's peak and the run's, one line of JSON.
measure() {
    local name=$1 bin=$2 recipe=$3 gpus=$4
    shift 4
    local planned
    planned=$("$bin" plan "$recipe" --gpus "$gpus" "$@" "${one_step[@]}" | grep -o 'peak [0-9.]* [MG]iB per rank')
    "$bin" run "$recipe" --gpus "$gpus" --threads 1 --output rank0 --out "$out/$name" "$@" "${one_step[@]}" >/dev/null
    python3 - "$name" "$planned" "$out/$name/result.json" <<'PY'
import json, sys
name, planned, result = sys.argv[1], sys.argv[2].split(), json.load(open(sys.argv[3]))
mib = float(planned[1]) * (1024 if planned[2] == "GiB" else 1)
print(json.dumps({"shape": name, "planned_mib": mib, "measured_mib": max(result["peak_memory_mb"])}))
PY
}

{
    measure gpt "$build/recipe" pretrain 1 --set batch_size=16
    measure gpt-ckpt "$build/recipe" pretrain 1 --set batch_size=32 --set checkpointing=true
    measure gpt2 "$build/recipe" pretrain 1 --set n_layer=12 --set n_embd=768 --set n_head=12 --set block_size=256 \
        --set batch_size=4
    measure gpt-zero1 "$build/recipe" pretrain 2 --set batch_size=16 --set zero=1
    measure gpt2-zero2 "$build/recipe" pretrain 4 --set n_layer=12 --set n_embd=768 --set n_head=12 \
        --set block_size=256 --set batch_size=2 --set zero=2
    measure llama "$build/recipe" pretrain_llama 1 --set batch_size=4
    measure llama-ckpt "$build/recipe" pretrain_llama 1 --set batch_size=16 --set checkpointing=true
    emulated=$build/tests/emulated/liblevers_cuda_emulated.so
    if [[ -f $emulated ]]; then
        on_gpu() { bash "$root/tests/emulated/on_emulated_gpu.sh" "$build" "$build/recipe" "$@"; }
        gpu=(--device cuda --set n_layer=1 --set n_embd=64 --set n_head=1 --set block_size=32 --set batch_size=8)
        measure gpu-f32 on_gpu pretrain 1 "${gpu[@]}"
        measure gpu-bf16 on_gpu pretrain 1 "${gpu[@]}" --precision bf16
        LEVERS_EMULATED_GPUS=2 measure gpu-zero2 on_gpu pretrain 2 "${gpu[@]}" \
            --set zero=2 --set bucket_mb=0.05
        LEVERS_EMULATED_GPUS=2 measure gpu-bf16-zero1 on_gpu pretrain 2 "${gpu[@]}" \
            --precision bf16 --set zero=1 --set bucket_mb=0.05
        LEVERS_EMULATED_GPUS=2 measure gpu-bf16-zero2 on_gpu pretrain 2 "${gpu[@]}" \
            --precision bf16 --set zero=2 --set bucket_mb=0.05
    fi
} >"$out/rows.jsonl"
python3 - "$out/rows.jsonl" <<'PY'
import json, sys
print("| shape | planned MiB | measured MiB | planned / measured |")
print("|---|---|---|---|")
for line in open(sys.argv[1]):
    r = json.loads(line)
    print(f"| {r['shape']} | {r['planned_mib']:.1f} | {r['measured_mib']:.1f} | {r['planned_mib'] / r['measured_mib']:.3f} |")
PY
