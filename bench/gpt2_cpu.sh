#!/usr/bin/env bash
# GPT-2 124M's shape on the CPU (12 layers x 768, 12 heads, vocabulary
# 50257, context 256, batch 4 = 1,024 tokens per step of Moby-Dick through
# GPT-2's tokenizer, random ids for the base and a second levers run): one training step
# (forward, backward, clipping, AdamW) of levers against PyTorch with
# OpenBLAS (both of its builds; the faster reported) and against levers'
# hand-written GPT of LEVERS_BASE_COMMIT, at 1 and 2 threads, alternating in
# one run: tokens/s, step time, peak memory and the ratios.
#
#   bash bench/gpt2_cpu.sh [rounds]     (default 1 round of 3 timed steps after 1 untimed: ~20 minutes)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
rounds=${1:-1}
. "$root/bench/install_peers.sh"
. "$root/bench/base_build.sh"
install_peers python3-torch libopenblas0-pthread libopenblas0-openmp
bash "$root/scripts/setup.sh" bench
build=${LEVERS_BUILD:-$root/build}
base=$(base_build "$LEVERS_BASE_COMMIT" "${LEVERS_BASE_BUILD:-$root/build-base}")
shape=(--layers 12 --heads 12 --embd 768 --block 256 --vocab 50257 --batch 4 --steps 3 --warmup 1)

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
. "$root/bench/book_ids.sh"
book_gpt2_ids "$build" "$out/ids.json"
# levers and PyTorch on the book's GPT-2 tokens; levers on random ids too, as
# the base (which takes no --ids) steps on them: it is set against that run.
for round in $(seq "$rounds"); do
    for threads in 1 2; do
        "$base" --threads "$threads" "${shape[@]}" >>"$out/base-$threads.jsonl"
        "$build/bench/bench_gpt_step" --threads "$threads" "${shape[@]}" --ids "$out/ids.json" >>"$out/levers-$threads.jsonl"
        "$build/bench/bench_gpt_step" --threads "$threads" "${shape[@]}" >>"$out/random-$threads.jsonl"
        for variant in pthread openmp; do
            for flush in 0 1; do
                OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads \
                    LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-$variant \
                    /usr/bin/python3 "$root/bench/gpt_step.py" --threads "$threads" --blas "openblas-$variant" \
                    --flush-denormal "$flush" "${shape[@]}" --ids "$out/ids.json" >>"$out/torch-$threads.jsonl"
            done
        done
    done
done

/usr/bin/python3 - "$out" "$LEVERS_BASE_COMMIT" <<'PY'
import json, pathlib, statistics, sys
out = pathlib.Path(sys.argv[1])
load = lambda name: [json.loads(l) for l in (out / name).read_text().splitlines()]
med = lambda rows, k: statistics.median(r[k] for r in rows)
info = load("torch-1.jsonl")[0]
print(f"GPT-2 124M shape: {info['parameters']} parameters, {info['tokens_per_step']} tokens per step; "
      f"peer {info['impl']}, {'; '.join(info['blas'])}; base: levers at {sys.argv[2]}")
print()
print("| threads | levers tok/s (book) | levers tok/s (random ids) | base tok/s (random ids) | levers / base | PyTorch tok/s (book) | "
      "levers / PyTorch | levers step s | PyTorch step s | levers peak GB | base peak GB | PyTorch peak GB | PyTorch variant (tok/s of each) |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for t in (1, 2):
    lv, rn, bs, rows = load(f"levers-{t}.jsonl"), load(f"random-{t}.jsonl"), load(f"base-{t}.jsonl"), load(f"torch-{t}.jsonl")
    builds = {}
    for r in rows:
        builds.setdefault(r["blas_build"], []).append(r)
    speeds = {name: med(r, "tokens_per_second") for name, r in builds.items()}
    best = max(speeds, key=speeds.get)
    pt = builds[best]
    l, r, b, p = med(lv, "tokens_per_second"), med(rn, "tokens_per_second"), med(bs, "tokens_per_second"), speeds[best]
    variants = ", ".join(f"{name} {v:.0f}" for name, v in speeds.items())
    print(f"| {t} | {l:.0f} | {r:.0f} | {b:.0f} | {r / b:.2f}x | {p:.0f} | {l / p:.2f}x | {med(lv, 'median_step_ms') / 1e3:.2f} | "
          f"{med(pt, 'median_step_ms') / 1e3:.2f} | {med(lv, 'peak_rss_mb') / 1024:.2f} | "
          f"{med(bs, 'peak_rss_mb') / 1024:.2f} | {med(pt, 'peak_rss_mb') / 1024:.2f} | {best} ({variants}) |")
PY
