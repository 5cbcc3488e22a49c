#!/usr/bin/env bash
# GPT training-step speed and memory on the CPU: levers against PyTorch and
# against levers' own hand-written GPT of the commit before models were made
# of modules (LEVERS_BASE_COMMIT, built beside this one), same model (GPT-2
# architecture, 4 layers x 128, 4 heads, context 128, byte vocabulary: 0.84M
# parameters), same batch (16 x 128 tokens: the bytes of Moby-Dick for levers
# and PyTorch, random ids for the base and a second levers run), same thread
# count, measured in one run, alternating so machine noise hits all.
#
#   bash bench/cpu_step.sh [rounds]     (default 3 rounds; the median is reported)
#
# Installs Debian's python3-torch and OpenBLAS (a real BLAS, as PyTorch users
# have) if missing; nothing else here needs them. Debian's torch takes whatever
# libblas.so.3 it finds: the peer runs with both OpenBLAS builds (pthreads,
# the system default, and OpenMP), each with and without flushing subnormal
# floats to zero (torch.set_flush_denormal; levers' CPU threads do), and the
# fastest is reported.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
rounds=${1:-3}
. "$root/bench/install_peers.sh"
. "$root/bench/base_build.sh"
install_peers python3-torch libopenblas0-pthread libopenblas0-openmp
bash "$root/scripts/setup.sh" bench
build=${LEVERS_BUILD:-$root/build}
base=$(base_build "$LEVERS_BASE_COMMIT" "${LEVERS_BASE_BUILD:-$root/build-base}")

out=$(mktemp -d)
. "$root/bench/book_ids.sh"
book_bytes "$out/bytes.json"
# levers and PyTorch on the book's bytes; levers on random ids too, as the base
# (which takes no --ids) steps on them: it is set against that run.
for threads in 1 2; do
    for round in $(seq "$rounds"); do
        "$base" --threads "$threads" >>"$out/base-$threads.jsonl"
        "$build/bench/bench_gpt_step" --threads "$threads" --ids "$out/bytes.json" >>"$out/levers-$threads.jsonl"
        "$build/bench/bench_gpt_step" --threads "$threads" >>"$out/random-$threads.jsonl"
        # OpenBLAS's pthreads build keeps its own pool: without OPENBLAS_NUM_THREADS
        # it takes every core whatever torch.set_num_threads says.
        for variant in pthread openmp; do
            for flush in 0 1; do
                OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads \
                    LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-$variant \
                    /usr/bin/python3 "$root/bench/gpt_step.py" --threads "$threads" --blas "openblas-$variant" \
                    --flush-denormal "$flush" --ids "$out/bytes.json" >>"$out/torch-$threads.jsonl"
            done
        done
    done
done

/usr/bin/python3 - "$out" "$LEVERS_BASE_COMMIT" <<'PY'
import json, statistics, sys, pathlib, platform, subprocess
out = pathlib.Path(sys.argv[1])
def load(name):
    return [json.loads(l) for l in (out / name).read_text().splitlines()]
cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"], capture_output=True, text=True).stdout.strip()
torch_info = load("torch-1.jsonl")[0]
def best_peer(rows):
    # per BLAS build, the median over rounds; then the faster build
    builds = {}
    for r in rows:
        builds.setdefault(r["blas_build"], []).append(r)
    meds = {b: statistics.median(r["tokens_per_second"] for r in rs) for b, rs in builds.items()}
    b = max(meds, key=meds.get)
    return b, [r for r in rows if r["blas_build"] == b], meds
print(f"machine: {cpu}, {platform.machine()}, {subprocess.run(['nproc'], capture_output=True, text=True).stdout.strip()} cores")
print(f"peer: {torch_info['impl']}, {'; '.join(torch_info['blas'])}, matmul 1024^3 {torch_info['matmul_gflops_1024']:.0f} GFLOP/s")
print(f"model: {torch_info['parameters']} parameters, {torch_info['tokens_per_step']} tokens per step")
print(f"base: levers at {sys.argv[2]} (the hand-written GPT)")
print()
print("| threads | levers tok/s (book) | levers tok/s (random ids) | base tok/s (random ids) | levers / base | PyTorch tok/s (book) | levers / PyTorch | levers step ms | PyTorch step ms | levers peak RSS MB | PyTorch peak RSS MB | PyTorch BLAS (tok/s of each) |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for t in (1, 2):
    lv, rn, bs = load(f"levers-{t}.jsonl"), load(f"random-{t}.jsonl"), load(f"base-{t}.jsonl")
    build, pt, meds = best_peer(load(f"torch-{t}.jsonl"))
    med = lambda rows, k: statistics.median(r[k] for r in rows)
    l_tps, r_tps, b_tps, p_tps = (med(lv, "tokens_per_second"), med(rn, "tokens_per_second"), med(bs, "tokens_per_second"),
                                  med(pt, "tokens_per_second"))
    print(f"| {t} | {l_tps:.0f} | {r_tps:.0f} | {b_tps:.0f} | {r_tps / b_tps:.2f}x | {p_tps:.0f} | {l_tps / p_tps:.2f}x | "
          f"{med(lv, 'median_step_ms'):.1f} | {med(pt, 'median_step_ms'):.1f} | {med(lv, 'peak_rss_mb'):.0f} | "
          f"{med(pt, 'peak_rss_mb'):.0f} | {build} ({', '.join(f'{b} {v:.0f}' for b, v in meds.items())}) |")
lv, bs = load("levers-1.jsonl")[0], load("base-1.jsonl")[0]
print()
print(f"levers memory: parameters+gradients+AdamW moments {lv['model_state_mb']:.1f} MB, "
      f"activations {lv['activations_mb']:.1f} MB (base {bs['activations_mb']:.1f} MB), "
      f"sum {lv['model_state_mb'] + lv['activations_mb']:.1f} MB; peak RSS {lv['peak_rss_mb']:.1f} MB for the "
      f"whole process (base {bs['peak_rss_mb']:.1f} MB)")
PY
rm -rf "$out"
