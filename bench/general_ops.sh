#!/usr/bin/env bash
# The general ops (strided tensors, broadcasting, reductions, convolutions,
# attention written from matmul and softmax) measured in one run:
#  - a 64 MiB broadcast add against memcpy, and sums against a plain read of
#    the bytes, on one thread (bench_tensor_ops);
#  - the user's small CNN's training step (on real Fashion-MNIST batches, the
#    same on both sides; the median of 50 steps) and the user's Llama-style
#    block's forward + backward (on random hidden states; 10 steps)
#    (bench_model_steps) against the same models in PyTorch
#    (bench/model_steps.py), at 1 and 2 threads, alternating.
#
#   bash bench/general_ops.sh [rounds]     (default 3 rounds; medians are reported)
#
# Installs Debian's python3-torch and OpenBLAS if missing; the peer runs with
# both OpenBLAS builds (pthreads, OpenMP), each with and without flushing
# subnormals to zero, and the fastest is reported (as bench/cpu_step.sh does).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
rounds=${1:-3}
. "$root/bench/install_peers.sh"
install_peers python3-torch libopenblas0-pthread libopenblas0-openmp
bash "$root/scripts/setup.sh" bench
build=${LEVERS_BUILD:-$root/build}
fashion=${LEVERS_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

for round in $(seq "$rounds"); do
    "$build/bench/bench_tensor_ops" --threads 1 >>"$out/tensor.jsonl"
    for model in cnn llama_block; do
        steps=10
        [ "$model" = cnn ] && steps=50
        for threads in 1 2; do
            "$build/bench/bench_model_steps" --model "$model" --threads "$threads" --steps "$steps" --images "$fashion" \
                >>"$out/levers-$model-$threads.jsonl"
            for variant in pthread openmp; do
                for flush in 0 1; do
                    OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads \
                        LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-$variant \
                        /usr/bin/python3 "$root/bench/model_steps.py" --model "$model" --threads "$threads" \
                        --steps "$steps" --images "$fashion" \
                        --blas "openblas-$variant" --flush-denormal "$flush" >>"$out/torch-$model-$threads.jsonl"
                done
            done
        done
    done
done

/usr/bin/python3 - "$out" <<'PY'
import json, pathlib, platform, statistics, subprocess, sys
out = pathlib.Path(sys.argv[1])
load = lambda name: [json.loads(l) for l in (out / name).read_text().splitlines()]
cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"], capture_output=True, text=True).stdout.strip()
print(f"machine: {cpu}, {platform.machine()}, {subprocess.run(['nproc'], capture_output=True, text=True).stdout.strip()} cores")
print()
print("| op (one thread, 64 MiB of f32) | levers ms | levers GB/s | peer | peer ms | levers' speed / the peer's |")
print("|---|---|---|---|---|---|")
rows = load("tensor.jsonl")
for op in dict.fromkeys(r["op"] for r in rows):
    mine = [r for r in rows if r["op"] == op]
    med = lambda k: statistics.median(r[k] for r in mine)
    print(f"| {op} | {med('ms'):.2f} | {med('gb_per_s'):.1f} | {mine[0]['peer']} | {med('peer_ms'):.2f} | {med('peer_ms') / med('ms'):.2f}x |")
print()
print("| model | threads | levers /s | PyTorch /s | levers / PyTorch | levers step ms | PyTorch step ms | PyTorch BLAS (each build's /s) |")
print("|---|---|---|---|---|---|---|---|")
for model in ("cnn", "llama_block"):
    for t in (1, 2):
        lv = load(f"levers-{model}-{t}.jsonl")
        builds = {}
        for r in load(f"torch-{model}-{t}.jsonl"):
            builds.setdefault(r["blas_build"], []).append(r)
        meds = {b: statistics.median(r["per_second"] for r in rs) for b, rs in builds.items()}
        best = max(meds, key=meds.get)
        pt = builds[best]
        med = lambda rs, k: statistics.median(r[k] for r in rs)
        unit = lv[0]["unit"]
        print(f"| {model} ({lv[0]['batch']} {'images' if unit == 'images' else 'x 256 tokens'}) | {t} | "
              f"{med(lv, 'per_second'):.0f} {unit} | {med(pt, 'per_second'):.0f} | {med(lv, 'per_second') / med(pt, 'per_second'):.2f}x | "
              f"{med(lv, 'median_step_ms'):.1f} | {med(pt, 'median_step_ms'):.1f} | {best} ({', '.join(f'{b} {v:.0f}' for b, v in meds.items())}) |")
PY
