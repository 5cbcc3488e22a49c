#!/usr/bin/env bash
# ZeRO stages 1 and 2 against data parallelism (DDP) on CPU ranks, with the
# pretrain recipe:
#
#   memory: a GPT of 99.8M parameters (12 layers x 832 wide, byte vocabulary,
#     context 64, batch 1 per rank, 2 steps) on 1, 2, 4 and 8 ranks, each
#     stage; per rank: parameters, AdamW's state, the gradients kept between
#     steps (ZeRO-2: the rank's shard), their sum against DDP's, the peak of
#     tensor memory (parameters, gradients and ZeRO-2's buckets, AdamW's
#     state, activations) and of resident memory.
#   speed: the default 0.84M-parameter GPT (batch 16 x 128 per rank) on 2 and
#     4 ranks, DDP, ZeRO-1 and ZeRO-2 alternating within each round; median
#     tokens/s over the rounds, as ratios to DDP.
#
#   bash bench/zero.sh [memory|speed|all] [rounds]     (default all, 3 rounds)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
what=${1:-all}
rounds=${2:-3}
bash "$root/scripts/setup.sh" bench
build=${LEVERS_BUILD:-$root/build}
books=${LEVERS_DATA:-$HOME/.local/share/levers}/books
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# Runs the recipe on $1 ranks with ZeRO stage $2 and the remaining options; the result line goes to stdout.
run() {
    local ranks=$1 zero=$2
    shift 2
    "$build/recipe" run pretrain --gpus "$ranks" --threads 1 --output rank0 --set zero="$zero" \
        --set eval_every=0 --set eval_batches=1 --set sample_tokens=0 --set checkpoint_every=0 "$@" | tail -n 1
}

if [[ $what == memory || $what == all ]]; then
    # 30 KB of text: the final validation pass over its split stays short.
    head -c 30000 "$books/mobydick.txt" >"$out/corpus.txt"
    for ranks in 1 2 4 8; do
        for zero in 0 1 2; do
            [[ $ranks == 1 && $zero != 0 ]] && continue
            run "$ranks" "$zero" --set corpus="$out/corpus.txt" --set n_layer=12 --set n_embd=832 --set n_head=8 \
                --set block_size=64 --set batch_size=1 --set steps=2 --set log_every=1 --set warmup=0 \
                >"$out/mem-$ranks-$zero.json"
        done
    done
    python3 - "$out" <<'PY'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
# Rank 0 also writes model.ckpt at the end (pretrain's finish): the other ranks' resident peak is the step's.
print("| ranks | stage | parameters MB | AdamW state MB | gradients kept MB | state + gradients vs DDP | peak tensor MB | peak RSS MB, rank 0 | peak RSS MB, other ranks (max) | tensor peak vs DDP |")
print("|---|---|---|---|---|---|---|---|---|---|")
for ranks in (1, 2, 4, 8):
    ddp = json.loads((out / f"mem-{ranks}-0.json").read_text())
    for zero in (0, 1, 2):
        f = out / f"mem-{ranks}-{zero}.json"
        if not f.exists():
            continue
        d = json.loads(f.read_text())
        params_mb = d["trainable_parameters"] * 4 / 2**20
        state, grads = max(d["optimizer_state_mb"]), max(d["averaged_gradients_mb"])
        ddp_kept = max(ddp["optimizer_state_mb"]) + max(ddp["averaged_gradients_mb"])
        tensors = max(d["peak_memory_mb"])
        peaks = d["peak_rss_mb"]
        others = f"{max(peaks[1:]):.0f}" if len(peaks) > 1 else "-"
        name = "DDP" if zero == 0 else f"ZeRO-{zero}"
        print(f"| {ranks} | {name} | {params_mb:.0f} | {state:.0f} | {grads:.0f} | {(state + grads) / ddp_kept:.3f} | "
              f"{tensors:.0f} | {peaks[0]:.0f} | {others} | {tensors / max(ddp['peak_memory_mb']):.2f} |")
PY
fi

if [[ $what == speed || $what == all ]]; then
    for ((round = 0; round < rounds; round++)); do
        for ranks in 2 4; do
            for zero in 0 1 2; do
                run "$ranks" "$zero" --set steps=60 --set log_every=60 >"$out/speed-$ranks-$zero-$round.json"
            done
        done
    done
    python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys, pathlib
out, rounds = pathlib.Path(sys.argv[1]), int(sys.argv[2])
tps = lambda r, z: statistics.median(json.loads((out / f"speed-{r}-{z}-{i}.json").read_text())["tokens_per_second"]
                                     for i in range(rounds))
print("| ranks | DDP tok/s | ZeRO-1 tok/s | ZeRO-2 tok/s | ZeRO-1 / DDP | ZeRO-2 / DDP |")
print("|---|---|---|---|---|---|")
for r in (2, 4):
    d, z1, z2 = tps(r, 0), tps(r, 1), tps(r, 2)
    print(f"| {r} | {d:.0f} | {z1:.0f} | {z2:.0f} | {z1 / d:.3f}x | {z2 / d:.3f}x |")
PY
fi
