#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: build levers with CUDA, run every GPU test
# (each CUDA op against its CPU version in f32, f64 and bf16; the whole GPT in
# f32 and bf16, LoRA, the MLP), train the shipped recipes on the GPU through
# `recipe run --device cuda` (in f32 and bf16) and the user's small CNN to
# 90% (examples/user_project), and print a summary.
#
#   bash bench/gpu_check.sh             build here (needs scripts/setup.sh's packages)
#   bash bench/gpu_check.sh BUNDLE      run what bench/gpu_bundle.sh packed elsewhere
#
# Then GPT-2 124M training throughput on one GPU in bf16, the target (with
# the fused attention kernel and without), and f32: tokens/s, MFU against
# the GPU's dense peak and each phase's milliseconds, next to PyTorch eager
# (autocast bf16; its explicit attention as levers computes it, and its fused
# scaled_dot_product_attention) where python3 (or $PYTHON) has PyTorch with CUDA.
# Last, each op of a step alone (bench_ops_cuda): its time and its share of
# the GPU's peak FLOP/s or memory bandwidth; and every op of the op list the
# tests check, through the dispatch and autograd as models call them (bench_ops).
# LEVERS_GPU_SANITIZE=1 also runs the GPU tests under compute-sanitizer's memcheck.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export PATH=$PATH:/usr/local/cuda/bin
python=${PYTHON:-python3}
# The libraries levers' programs load: given to them alone (levers below), so
# that PyTorch's python keeps the machine's own libstdc++.
libs=${LD_LIBRARY_PATH:-}
if [ $# -ge 1 ]; then
    bundle=$(realpath "$1")
    [ -x "$bundle/build/tests/levers_gpu_tests" ] || { echo "gpu_check: $1 is not a bundle from bench/gpu_bundle.sh (no build/tests/levers_gpu_tests)"; exit 2; }
    build=$bundle/build
    data=${LEVERS_DATA:-$bundle/data}
    export LEVERS_FASHION_MNIST=${LEVERS_FASHION_MNIST:-$bundle/data/fashion-mnist}
    # The bundle's own liblevers and libraries first: LD_LIBRARY_PATH outranks the programs' $ORIGIN.
    libs=$bundle/build:$bundle/lib${libs:+:$libs}
    built=$(cat "$bundle/built")
    here=$(git -C "$root" log -1 --format='%H' 2>/dev/null || echo unknown)
    [ "$here" = unknown ] || [ "${built%% *}" = "$here" ] ||
        echo "gpu_check: warning: the bundle was built from ${built%% *}, this checkout is $here"
else
    command -v nvcc >/dev/null || { echo "gpu_check: no nvcc: install the CUDA toolkit, or run a bundle (bench/gpu_bundle.sh)"; exit 1; }
    build=${LEVERS_BUILD:-$root/build}
    data=${LEVERS_DATA:-${XDG_DATA_HOME:-$HOME/.local/share}/levers}
    # Only what this check runs is built (GPU machines may have no network: the
    # full set-up, which fetches data, is `bash scripts/setup.sh build`), and a
    # new build only for this GPU's architecture (a quarter of the CUDA compile).
    targets=(tests/levers_gpu_tests recipe tests/user_recipes liblevers_cuda.so bench/bench_gpt_cuda bench/bench_ops_cuda
             bench/bench_ops)
    if [ ! -f "$build/build.ninja" ]; then
        archs=()
        cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1 | tr -d '.' || true)
        [ -n "$cap" ] && archs=(-Dgpu_archs="$cap")
        meson setup "$build" "$root" --buildtype=release "${archs[@]}" >/dev/null
    fi
    ninja -C "$build" "${targets[@]}" >/dev/null || ninja -C "$build" "${targets[@]}"
    [ -x "$build/tests/levers_gpu_tests" ] || { echo "gpu_check: this build has no CUDA (was nvcc on PATH when it was configured?)"; exit 1; }
    built="$(git -C "$root" log -1 --format='%H' 2>/dev/null || echo unknown) $(nvcc --version | sed -n 's/.*release \([^,]*\).*/nvcc \1/p')"
fi
export LEVERS_FASHION_MNIST=${LEVERS_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
# cuBLAS and NCCL are the machine's own: where the loader does not find them
# (NCCL from pip, a toolkit outside /usr/local/cuda), look in the usual places.
levers() { LD_LIBRARY_PATH=$libs "$@"; }
for lib in $(levers ldd "$build/tests/levers_gpu_tests" "$build/liblevers_cuda.so" | awk '/=> not found/ { print $1 }' | sort -u); do
    found=$( { "$python" -c 'import nvidia, os; print(*[os.path.join(p, d, "lib") for p in nvidia.__path__ for d in os.listdir(p)], sep="\n")' 2>/dev/null || true
               ls -d /usr/local/cuda*/lib64 /usr/local/cuda*/targets/*/lib /usr/lib/x86_64-linux-gnu /opt/*/lib 2>/dev/null; } |
             while read -r dir; do [ -e "$dir/$lib" ] && { echo "$dir"; break; }; done || true)
    if [ -n "$found" ]; then
        echo "gpu_check: $lib from $found"; libs=$found${libs:+:$libs}
    else
        echo "gpu_check: $lib not found on this machine (cuBLAS comes with the CUDA toolkit, NCCL as libnccl2 or pip's nvidia-nccl-cu13)"; exit 1
    fi
done
# What was measured, for the record: the commit, the toolkit, the GPUs.
echo "gpu_check: levers $built"
if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=index,name,memory.total,driver_version --format=csv,noheader
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
status=0
# Every step has a time limit (a kernel that hangs must not eat the machine's
# time) and a failure does not stop the steps after it: one run shows all.
levers timeout 180 "$build/tests/levers_gpu_tests" || status=$?
if [ "$status" -eq 0 ]; then echo "gpu_check: every GPU test passed (skipped ones mean no GPU was visible)"; else echo "gpu_check: GPU tests FAILED (exit $status)"; fi
if [ "$status" -ne 0 ]; then
    # A fault on the GPU poisons every later test case of its process: each
    # case again in a process of its own says which ones fail by themselves.
    echo "gpu_check: the GPU tests again, one test case per process:"
    count=$(levers "$build/tests/levers_gpu_tests" --count 2>&1 | sed -n 's/.*passing the current filters: \([0-9]*\).*/\1/p')
    for i in $(seq 1 "${count:-0}"); do
        out=$(levers timeout 60 "$build/tests/levers_gpu_tests" --first="$i" --last="$i" --duration=true 2>&1) && rc=0 || rc=$?
        name=$(echo "$out" | sed -n 's/^[0-9.e-]* s: //p' | head -n 1)
        if [ "$rc" -eq 0 ]; then
            echo "  ok     $i: $name"
        else
            echo "  FAILED $i: $name"; echo "$out" | grep -E "ERROR|worst difference|what\(\)|failed" | head -n 8 | sed 's/^/      /'
        fi
    done
fi
if [ "${LEVERS_GPU_SANITIZE:-0}" = 1 ]; then  # out-of-bounds and misaligned accesses that leave the values right
    # Memory errors only: NCCL probes kernels its build has no image for on this GPU (on an H200 it reported
    # four cudaFuncGetAttributes errors), which memcheck counts as errors; levers checks each CUDA call it makes.
    if levers timeout 300 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 3 \
        "$build/tests/levers_gpu_tests" >"$work/sanitizer.log" 2>&1; then
        echo "gpu_check: compute-sanitizer memcheck: no errors"
    else
        echo "gpu_check: compute-sanitizer memcheck FAILED:"; grep -m 40 -E "=========|error" "$work/sanitizer.log" || tail -n 40 "$work/sanitizer.log"; status=1
    fi
fi
if ! nvidia-smi -L >/dev/null 2>&1; then
    echo "gpu_check: no GPU visible here: GPU tests skipped, throughput not measured"
    exit "$status"
fi

# The recipes on the GPU, as users run them (a few steps each), where their
# data is here: the books (scripts/setup.sh fetches them) and Fashion-MNIST.
runs=$work/runs; mkdir -p "$runs"
jobs=()
if [ -f "$data/books/.complete" ]; then
    jobs+=("pretrain --set steps=30 --set sample_tokens=40" "pretrain --set steps=30 --set sample_tokens=40 --precision bf16")
else
    echo "gpu_check: pretrain not run: no books in $data (bash scripts/setup.sh build fetches them; LEVERS_DATA points elsewhere)"
fi
if [ -d "$LEVERS_FASHION_MNIST" ]; then
    jobs+=("classify --set steps=200" "classify --set steps=200 --precision bf16")
else
    echo "gpu_check: classify not run: no Fashion-MNIST (apt-get install dataset-fashion-mnist)"
fi
for i in "${!jobs[@]}"; do
    job=${jobs[$i]}
    if LEVERS_DATA=$data levers timeout 120 "$build/recipe" run $job --device cuda --out "$runs/$i" >"$runs/$i.out" 2>&1; then
        echo "gpu_check: recipe run $job --device cuda: $(tail -n 1 "$runs/$i.out" | cut -c1-200)"
    else
        echo "gpu_check: recipe run $job --device cuda FAILED:"; tail -n 20 "$runs/$i.out"; status=1
    fi
done

# The user's small CNN (examples/user_project, general ops only) trained to
# the end on the GPU, f32 and bf16: at least 90% of the test images, as on
# the CPU (the emulated GPU checks its steps against the CPU's, but at a few
# images a second it cannot train it to the end).
if [ -d "$LEVERS_FASHION_MNIST" ]; then
    for precision in f32 bf16; do
        out=$runs/cnn-$precision.out
        if levers timeout 600 "$build/tests/user_recipes" run fashion_cnn --device cuda --precision "$precision" \
                --out "$runs/cnn-$precision" >"$out" 2>&1 &&
            "$python" -c 'import json, sys; sys.exit(json.loads(sys.argv[1])["final_test_accuracy"] < 0.90)' "$(tail -n 1 "$out")"; then
            echo "gpu_check: the user's CNN on the GPU ($precision): $(tail -n 1 "$out" | cut -c1-200)"
        else
            echo "gpu_check: the user's CNN on the GPU ($precision) FAILED (under 90%, or no result):"; tail -n 20 "$out"; status=1
        fi
    done
fi

# GPT-2 124M (12 x 768, context 1024, batch 8) training throughput: levers in
# bf16 and f32, then PyTorch eager with the same model, batch and precision.
gpt2=(--layers 12 --heads 12 --embd 768 --block 1024 --vocab 50257 --batch 8 --steps 10 --warmup 3)
ratio() { "$python" -c 'import json, sys; l, t = json.loads(sys.argv[1]), json.loads(sys.argv[2]); print("%.2fx" % (l["tokens_per_second"] / t["tokens_per_second"]))' "$1" "$2"; }
has_torch=0
"$python" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null && has_torch=1
# The same 13 steps at full scale must also agree: bf16 with and without the
# fused attention, and bf16 against f32 (the same seed and tokens).
# same_loss WHAT JSON_A JSON_B TOLERANCE: says whether the two runs' losses agree (a mismatch fails the check).
same_loss() {
    local verdict
    if verdict=$("$python" -c 'import json, sys; a, b = json.loads(sys.argv[1])["loss"], json.loads(sys.argv[2])["loss"]; ok = abs(a - b) <= float(sys.argv[3]) * abs(b); print(("agree" if ok else "DISAGREE") + " (%.4f vs %.4f)" % (a, b)); sys.exit(0 if ok else 1)' "$2" "$3" "$4"); then
        echo "gpu_check: $1 $verdict"
    else
        echo "gpu_check: $1 $verdict"; status=1
    fi
}
declare -A losses=()
for precision in bf16 f32; do
    levers_json=$(levers timeout 120 "$build/bench/bench_gpt_cuda" "${gpt2[@]}" --precision "$precision") || { echo "gpu_check: bench_gpt_cuda --precision $precision FAILED"; status=1; continue; }
    echo "levers $precision: $levers_json"
    losses[$precision]=$levers_json
    if [ "$precision" = bf16 ]; then  # the same without the fused attention kernel, to see what it brings
        if gemm_json=$(LEVERS_FUSED_ATTENTION=0 levers timeout 120 "$build/bench/bench_gpt_cuda" "${gpt2[@]}" --precision bf16); then
            echo "levers bf16, attention through cuBLAS: $gemm_json"
            same_loss "bf16 losses with and without the fused attention" "$levers_json" "$gemm_json" 0.02
        else
            echo "gpu_check: bench_gpt_cuda with LEVERS_FUSED_ATTENTION=0 FAILED"; status=1
        fi
    fi
    [ "$has_torch" -eq 1 ] || continue
    attentions="explicit"
    [ "$precision" = bf16 ] && attentions="explicit sdpa"
    for attention in $attentions; do
        torch_json=$(timeout 120 "$python" "$root/bench/gpt_step.py" --device cuda --precision "$precision" --attention "$attention" "${gpt2[@]}") || { echo "pytorch $precision ($attention attention) FAILED"; continue; }
        echo "pytorch $precision ($attention attention): $torch_json"
        echo "levers / PyTorch $precision ($attention attention) tokens/s: $(ratio "$levers_json" "$torch_json")"
    done
done
if [ -n "${losses[bf16]:-}" ] && [ -n "${losses[f32]:-}" ]; then
    same_loss "bf16 and f32 losses after the same steps" "${losses[bf16]}" "${losses[f32]}" 0.05
fi
[ "$has_torch" -eq 1 ] || echo "pytorch: not measured (no PyTorch with CUDA for $python on this machine)"
# Each op alone at the same shapes in bf16: where a step's time goes.
echo "gpu_check: each op alone (bf16, GPT-2 124M shapes, batch 8):"
if ops=$(levers timeout 120 "$build/bench/bench_ops_cuda"); then
    echo "$ops"
    if [ -n "${losses[bf16]:-}" ]; then  # the step as measured against the sum of its ops
        "$python" -c 'import json, sys; step, ops = json.loads(sys.argv[1]), json.loads(sys.argv[2].splitlines()[-1]); print("gpu_check: a bf16 step takes %.2f ms; its ops alone sum to %.2f ms" % (step["ms_per_step"], ops["ops_ms_per_step"]))' "${losses[bf16]}" "$ops" || true
    fi
else
    echo "$ops"; echo "gpu_check: bench_ops_cuda FAILED"; status=1
fi
for dtype in f32 bf16; do
    echo "gpu_check: the op list through dispatch and autograd ($dtype, GPT-2 small's shapes, batch 4 x 256):"
    levers timeout 120 "$build/bench/bench_ops" --device cuda --dtype "$dtype" || { echo "gpu_check: bench_ops FAILED"; status=1; }
done
echo "gpu_check: $([ "$status" -eq 0 ] && echo passed || echo FAILED) in ${SECONDS} s"
exit "$status"
