#!/usr/bin/env bash
# Data-parallel training on CPU ranks: levers (`recipe run pretrain --gpus N`)
# against PyTorch DDP (Debian's python3-torch, started by torchrun, gloo) with
# the same GPT (4 layers x 128, context 128, bytes), the same batch per rank
# (16 x 128), one thread per rank, at 1 and 2 ranks; alternating, `rounds`
# times, medians reported. Throughput is over the steps after a warm-up.
#
#   bash bench/ddp_peer.sh [steps [rounds]]      (default 60 steps, 2 rounds)
#
# Installs python3-torch and OpenBLAS if missing (the peer, as its users have
# it); torch's BLAS is OpenBLAS's OpenMP build with one thread per rank.
# Debian's torch 1.13 torchrun fails without --redirects/--tee set.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
steps=${1:-60}
rounds=${2:-2}
warmup=10
. "$root/bench/install_peers.sh"
install_peers python3-torch libopenblas0-openmp
bash "$root/scripts/setup.sh" bench
build=${LEVERS_BUILD:-$root/build}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export LEVERS_LEDGER_DIR=$work/ledger

for round in $(seq "$rounds"); do
    for ranks in 1 2; do
        "$build/recipe" run pretrain --gpus "$ranks" --threads 1 --output rank0 --out "$work/levers-$ranks-$round" \
            --set steps=$((steps + warmup)) --set eval_every=0 --set sample_tokens=0 --set checkpoint_every=0 \
            --set log_every=1000 >/dev/null
        OMP_NUM_THREADS=1 LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp \
            /usr/bin/python3 -m torch.distributed.run --standalone --nproc_per_node "$ranks" \
            --redirects 1 --tee 1 "$root/bench/ddp_peer.py" --steps "$steps" --warmup "$warmup" 2>/dev/null \
            | grep -o '{.*}' >>"$work/torch-$ranks.jsonl"
    done
done

/usr/bin/python3 - "$work" "$rounds" "$warmup" <<'PY'
import csv, json, statistics, sys, pathlib, subprocess
work, rounds, warmup = pathlib.Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
def levers(ranks, rnd):
    rows = list(csv.DictReader(open(work / f"levers-{ranks}-{rnd}" / "metrics.csv")))
    a, b = rows[warmup - 1], rows[-1]  # from the end of the warm-up
    return (float(b["items"]) - float(a["items"])) / (float(b["wall_s"]) - float(a["wall_s"]))
cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"],
                     capture_output=True, text=True).stdout.strip()
print(f"{cpu}, {subprocess.run(['nproc'], capture_output=True, text=True).stdout.strip()} cores; one thread per rank")
print("| ranks | levers tok/s | PyTorch DDP (gloo) tok/s | levers / PyTorch |")
print("|---|---|---|---|")
for ranks in (1, 2):
    l = statistics.median(levers(ranks, r) for r in range(1, rounds + 1))
    t = statistics.median(json.loads(x)["tokens_per_second"] for x in open(work / f"torch-{ranks}.jsonl"))
    print(f"| {ranks} | {l:.0f} | {t:.0f} | {l / t:.2f}x |")
PY
