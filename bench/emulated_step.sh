#!/usr/bin/env bash
# The work one GPT training step asks of a GPU, counted on the emulated GPU
# (tests/emulated/stats.cpp): kernel launches, cuBLAS/cuBLASLt products,
# copies, memsets, and cudaMalloc calls and bytes, per steady step (a run of
# 5 steps less a run of 3, halved), for levers now against LEVERS_BASE_COMMIT
# (the hand-written GPU engine), in f32 and bf16 (attention fused: head size
# 64), through `recipe run pretrain --device cuda`. The base's emulated GPU
# gets the same counting files as this tree's.
#
#   bash bench/emulated_step.sh      (a CUDA build with the emulated suite; ~10 minutes the first time)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$root/bench/base_build.sh"
build=${LEVERS_BUILD:-$root/build}
ninja -C "$build" recipe tests/emulated/liblevers_cuda_emulated.so >/dev/null
base_dir=${LEVERS_BASE_EMULATED:-$root/build-base-emulated}
if [ ! -x "$base_dir/build/tests/emulated/recipe_emulated" ] && [ ! -f "$base_dir/build/tests/emulated/liblevers_cuda_emulated.so" ]; then
    echo "[bench] building the emulated GPU's recipe of $LEVERS_BASE_COMMIT in $base_dir" >&2
    rm -rf "$base_dir" && mkdir -p "$base_dir/src"
    git -C "$root" archive "$LEVERS_BASE_COMMIT" | tar -x -C "$base_dir/src"
    for f in stats.cpp include/emulated_gpu.hpp cuda_runtime.cpp cublas.cpp; do
        cp "$root/tests/emulated/$f" "$base_dir/src/tests/emulated/$f"
    done
    sed -i "s/'cublas.cpp', 'nccl.cpp',/'cublas.cpp', 'nccl.cpp', 'stats.cpp',/" "$base_dir/src/tests/emulated/meson.build"
    meson setup "$base_dir/build" "$base_dir/src" --buildtype=release -Dgpu_archs=90 >"$base_dir/setup.log" 2>&1 ||
        { cat "$base_dir/setup.log"; exit 1; }
    # Commits before the emulated GPU ran the plain `recipe` built a sanitized copy of it.
    targets=(recipe tests/emulated/liblevers_cuda_emulated.so)
    ninja -C "$base_dir/build" -t targets all | grep -q '^tests/emulated/recipe_emulated:' && targets=(tests/emulated/recipe_emulated)
    ninja -C "$base_dir/build" "${targets[@]}" >"$base_dir/ninja.log" 2>&1 || { tail -n 30 "$base_dir/ninja.log"; exit 1; }
fi
# The base's recipe on its emulated GPU, and this tree's.
if [ -x "$base_dir/build/tests/emulated/recipe_emulated" ]; then
    base_recipe=("$base_dir/build/tests/emulated/recipe_emulated")
else
    base_recipe=(bash "$root/tests/emulated/on_emulated_gpu.sh" "$base_dir/build" "$base_dir/build/recipe")
fi
levers_recipe=(bash "$root/tests/emulated/on_emulated_gpu.sh" "$build" "$build/recipe")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
export LEVERS_LEDGER_DIR=$work/ledger XDG_CONFIG_HOME=$work/config ASAN_OPTIONS=detect_leaks=0
args=(run pretrain --set lr=0.01 --set warmup=1 --set n_layer=2 --set n_embd=64 --set n_head=1 --set block_size=32
      --set batch_size=2 --set eval_every=1000 --set sample_tokens=0 --set checkpoint_every=0 --set corpus="$root/README.md"
      --device cuda)
count() {  # NAME STEPS PRECISION COMMAND...: the counts of one run into NAME-STEPS-PRECISION.json
    local name=$1 steps=$2 precision=$3
    shift 3
    LEVERS_EMULATED_STATS=$work/$name-$steps-$precision.json "$@" "${args[@]}" --set steps="$steps" \
        --precision "$precision" >"$work/$name-$steps-$precision.log" 2>&1 ||
        { echo "$name ($steps steps, $precision) failed:"; tail -n 20 "$work/$name-$steps-$precision.log"; exit 1; }
}
for precision in f32 bf16; do
    for steps in 3 5; do
        count base "$steps" "$precision" "${base_recipe[@]}"
        count levers "$steps" "$precision" "${levers_recipe[@]}"
    done
done
python3 - "$work" "$LEVERS_BASE_COMMIT" <<'PY'
import json, pathlib, sys
work = pathlib.Path(sys.argv[1])
keys = ["kernel_launches", "blas_products", "copies", "memsets", "cuda_mallocs", "cuda_malloc_bytes"]
def per_step(name, precision):
    runs = {s: json.loads((work / f"{name}-{s}-{precision}.json").read_text().splitlines()[-1]) for s in (3, 5)}
    return {k: (runs[5][k] - runs[3][k]) / 2 for k in keys}
print(f"per steady GPT step on the emulated GPU (2 layers x 64, batch 2 x 32): levers against {sys.argv[2]}")
print()
print("| precision | what | base | levers |")
print("|---|---|---|---|")
for precision in ("f32", "bf16"):
    base, now = per_step("base", precision), per_step("levers", precision)
    for k in keys:
        print(f"| {precision} | {k} | {base[k]:g} | {now[k]:g} |")
PY
