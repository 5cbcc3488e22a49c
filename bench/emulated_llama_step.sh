#!/usr/bin/env bash
# The work one Llama training step asks of a GPU, counted on the emulated
# GPU (tests/emulated/stats.cpp): kernel launches, cuBLAS/cuBLASLt
# products, copies, memsets and cudaMalloc calls per steady step (a run of 5
# steps less a run of 3, halved), and the bytes the GPU was asked for in
# the whole 5-step run (the memory pool's high-water mark), through `recipe
# run fine_tune --set model=DIR --set lora_r=0 --device cuda` (every weight
# trained). The model is Llama-shaped but small enough for the emulated GPU
# (bench/llama_dir.py: 2 layers x 128, 2 query heads of 64 over 1 key-value
# head, MLP 352, Llama 2's tokenizer and vocabulary of 32,000; batch 2 x 128):
# in f32 (attention written out: the GPUs' fused kernel is bf16's), in bf16
# with the fused attention, and in bf16 with it turned off
# (LEVERS_FUSED_ATTENTION=0).
#
#   bash bench/emulated_llama_step.sh      (a CUDA build with the emulated suite; needs the set-up's tokenizers)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${LEVERS_BUILD:-$root/build}
data=${LEVERS_DATA:-${XDG_DATA_HOME:-$HOME/.local/share}/levers}
[ -f "$data/tokenizers/.complete-4" ] || { echo "needs the tokenizers: bash scripts/setup.sh test" >&2; exit 2; }
ninja -C "$build" recipe tests/emulated/liblevers_cuda_emulated.so >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
python3 "$root/bench/llama_dir.py" "$work/llama" "$data/tokenizers/llama2" --context 128
export LEVERS_LEDGER_DIR=$work/ledger XDG_CONFIG_HOME=$work/config ASAN_OPTIONS=detect_leaks=0
args=(run fine_tune --set model="$work/llama" --set lora_r=0 --set context=128 --set batch_size=2 --set lr=1e-4
      --set eval_every=1000 --set eval_batches=1 --set checkpoint_every=0 --set corpus="$root/README.md" --device cuda)
count() {  # NAME STEPS PRECISION FUSED: the counts of one run into NAME-STEPS.json
    local name=$1 steps=$2 precision=$3 fused=$4
    LEVERS_FUSED_ATTENTION=$fused LEVERS_EMULATED_STATS=$work/$name-$steps.json \
        bash "$root/tests/emulated/on_emulated_gpu.sh" "$build" "$build/recipe" "${args[@]}" --set steps="$steps" --precision "$precision" \
        --out "$work/$name-$steps" >"$work/$name-$steps.log" 2>&1 ||
        { echo "$name ($steps steps) failed:"; tail -n 20 "$work/$name-$steps.log"; exit 1; }
}
for steps in 3 5; do
    count f32 "$steps" f32 1
    count bf16-fused "$steps" bf16 1
    count bf16-written-out "$steps" bf16 0
done
python3 - "$work" <<'PY'
import json, pathlib, sys
work = pathlib.Path(sys.argv[1])
keys = ["kernel_launches", "blas_products", "copies", "memsets", "cuda_mallocs"]
def runs(name):
    return {s: json.loads((work / f"{name}-{s}.json").read_text().splitlines()[-1]) for s in (3, 5)}
names = ["f32", "bf16-fused", "bf16-written-out"]
print("per steady Llama step on the emulated GPU (2 layers x 128, heads 2 x 64 over 1, vocabulary 32,000, batch 2 x 128)")
print()
print("| what | " + " | ".join(names) + " |")
print("|---|" + "---|" * len(names))
r = {n: runs(n) for n in names}
for k in keys:
    print(f"| {k} per step | " + " | ".join(f"{(r[n][5][k] - r[n][3][k]) / 2:g}" for n in names) + " |")
print("| MiB asked of the GPU in 5 steps | " + " | ".join(f"{r[n][5]['cuda_malloc_bytes'] / 2**20:.1f}" for n in names) + " |")
PY
