#!/usr/bin/env bash
# A Llama-shaped training step on the CPU against the same model in PyTorch,
# in one run: 8 layers x 512, 8 query heads over 2 key-value heads, MLP
# 1376, vocabulary 32,000, 2 sequences of 512 tokens of Moby-Dick through
# Llama 2's tokenizer (bench/book_ids.sh), the same on both sides; forward, the loss over
# the vocabulary, backward and AdamW (bench_model_steps --model llama: levers'
# decoder with its fused kernels; bench/model_steps.py --model llama: the
# model as Hugging Face's LlamaForCausalLM computes it, in PyTorch 1.13), at
# 1 and 2 threads, alternating; the median step, the peak resident memory.
#
#   bash bench/llama_step.sh [rounds]     (default 1 round of 3 timed steps each)
#
# Installs Debian's python3-torch and OpenBLAS if missing; the peer runs with
# both OpenBLAS builds (pthreads, OpenMP), each with and without flushing
# subnormals to zero, and the fastest is reported (as bench/cpu_step.sh does).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
rounds=${1:-1}
. "$root/bench/install_peers.sh"
install_peers python3-torch libopenblas0-pthread libopenblas0-openmp
bash "$root/scripts/setup.sh" bench
build=${LEVERS_BUILD:-$root/build}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

. "$root/bench/book_ids.sh"
book_ids "$build" "$out/ids.json"

# Both sides on the book's tokens; levers on synthetic ids too (the same
# positions, ids i·7919 + 13 mod 32000), to show whether the step depends on its input.
for round in $(seq "$rounds"); do
    for threads in 1 2; do
        "$build/bench/bench_model_steps" --model llama --threads "$threads" --steps 3 --ids "$out/ids.json" \
            >>"$out/levers-$threads.jsonl"
        "$build/bench/bench_model_steps" --model llama --threads "$threads" --steps 3 >>"$out/synthetic-$threads.jsonl"
        torch_builds "$threads" "$out/torch-$threads.jsonl" "$root/bench/model_steps.py" --model llama --steps 3 \
            --ids "$out/ids.json"
    done
done

/usr/bin/python3 - "$out" <<'PY'
import json, pathlib, platform, statistics, subprocess, sys
out = pathlib.Path(sys.argv[1])
load = lambda name: [json.loads(l) for l in (out / name).read_text().splitlines()]
cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"], capture_output=True, text=True).stdout.strip()
print(f"machine: {cpu}, {platform.machine()}, {subprocess.run(['nproc'], capture_output=True, text=True).stdout.strip()} cores")
print()
print("| threads | levers tokens/s | PyTorch tokens/s | levers / PyTorch | levers step ms | PyTorch step ms | levers peak RSS MB | PyTorch peak RSS MB | PyTorch BLAS (each build's tokens/s) |")
print("|---|---|---|---|---|---|---|---|---|")
for t in (1, 2):
    lv = load(f"levers-{t}.jsonl")
    builds = {}
    for r in load(f"torch-{t}.jsonl"):
        builds.setdefault(r["blas_build"], []).append(r)
    meds = {b: statistics.median(r["per_second"] for r in rs) for b, rs in builds.items()}
    best = max(meds, key=meds.get)
    pt = builds[best]
    med = lambda rs, k: statistics.median(r[k] for r in rs)
    print(f"| {t} | {med(lv, 'per_second'):.0f} | {med(pt, 'per_second'):.0f} | {med(lv, 'per_second') / med(pt, 'per_second'):.2f}x | "
          f"{med(lv, 'median_step_ms'):.0f} | {med(pt, 'median_step_ms'):.0f} | {med(lv, 'peak_rss_mb'):.0f} | {med(pt, 'peak_rss_mb'):.0f} | "
          f"{best} ({', '.join(f'{b} {v:.0f}' for b, v in meds.items())}) |")
print()
for t in (1, 2):
    real, synthetic = load(f"levers-{t}.jsonl"), load(f"synthetic-{t}.jsonl")
    med = lambda rs: statistics.median(r["median_step_ms"] for r in rs)
    print(f"levers at {t} thread(s): {med(real):.0f} ms a step on the book's tokens, {med(synthetic):.0f} ms on synthetic ids "
          f"({med(synthetic) / med(real):.2f}x)")
PY
