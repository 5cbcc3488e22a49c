#!/usr/bin/env bash
# `recipe run pretrain`, then `recipe run fine_tune` (LoRA on the frozen
# pretrained model), on emulated GPUs against the CPU, same settings and
# seed, on one GPU, on two (two ranks, each a process with its own
# emulated GPU, gradients averaged through the emulated NCCL while backward
# runs) and, for pretrain, on two "nodes" started by hand: in f32 a GPU run must end at the CPU's loss and validation loss
# (1e-5 relative; pretrain also samples the same text); in bf16 (pretrain's
# attention fused: head size 64) within 2% of them. ZeRO-1 and 2 in bf16
# (each rank keeping the f32 master values of its shard only) must end at
# DDP's loss, and their sharded checkpoints resume on two GPUs without ZeRO
# and on one. Then sft (a Llama over a small tokenizer with a chat template,
# tests/fixtures/tiny_tokenizer, made by pretrain_llama on the CPU, fine-tuned on
# conversations packed into rows: documents, positions restarting, the loss
# on the answers only) likewise, on one GPU and two, dpo on pairs of its answers
# (LoRA, the base as the reference) and grpo on its questions (answers sampled
# together through the KV cache, the same as the CPU's in f32) on one GPU,
# and a tiny SmolLM3, Gemma 2, Gemma 3, Phi-3, Mixtral and Qwen3-MoE in bf16
# (the two mixtures on two GPUs with ZeRO-2 too), each lowering its validation loss. Whole runs: data,
# training loop, AdamW and clipping on the GPU, evaluation, checkpoints,
# sampling. Then a user's own models (examples/user_project: a residual MLP
# with layernorm written as modules, a small CNN, a classifier with an op of
# the user's own) on one GPU (f32, bf16) and two against the CPU, and a
# model using an op no GPU has kernels for, which `--device auto` keeps on
# the CPU with one line. `recipe plan` of pretrain's GPU runs must be within
# 10% of the peaks they measured, and a GPU too small for the batch (the
# emulated GPU's memory limited) must stop the run with the plan's figures
# and what fits. Nothing may be left in /dev/shm by the emulated NCCL.
#
#   check_recipes_on_gpu.sh RECIPE CORPUS USER_RECIPES TEST_RECIPES BACKEND
# The programs open the emulated GPU's sanitized backend library BACKEND as
# LEVERS_CUDA_BACKEND tells them, with the sanitizers' runtimes
# (LEVERS_SANITIZER_RUNTIMES) preloaded; their CPU runs never see either.
# Runs that do not need each other's results go two at a time, each with a
# ledger of its own; every run's time is printed at the end.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../needs_data.sh"
needs_data fashion_mnist  # the user's model; pretrain and fine_tune read CORPUS, sft a tokenizer of the tests'
recipe=$1 backend=$5
on_gpu=(env LD_PRELOAD="${LEVERS_SANITIZER_RUNTIMES:?the sanitizers\' runtimes to preload}" LEVERS_CUDA_BACKEND="$backend")
cpu=("$recipe")
gpu=("${on_gpu[@]}" "$recipe")
user=("${on_gpu[@]}" "$3")
tests=("${on_gpu[@]}" "$4")
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait; rm -rf "$work"' EXIT  # a failed run stops the others
cd "$work"
export XDG_CONFIG_HOME=$work/config
# A text of 8 KB: pretraining scores its whole validation split at the end, each window a forward on the GPU.
head -c 8000 "$2" >corpus.txt
corpus=$work/corpus.txt

small=(--set steps=4 --set lr=0.01 --set warmup=1 --set n_layer=1 --set n_embd=64 --set n_head=1 --set block_size=32
       --set batch_size=2 --set eval_every=2 --set eval_batches=1 --set sample_tokens=8 --set corpus="$corpus")
args=(run pretrain --threads 1 "${small[@]}")
emulated_segments() { ls /dev/shm | grep -c '^levers-emulated-nccl-' || true; }
shm_before=$(emulated_segments)
declare -A started=()  # pid -> the run's name, while it runs
run() {  # NAME COMMAND...: in the background, two at a time, its output in NAME.log and its milliseconds in NAME.ms
    local name=$1
    shift
    ((${#started[@]} < 2)) || reap_one
    (
        start=$(date +%s%N)
        LEVERS_LEDGER_DIR=$work/ledger-$name "$@" >"$name.log" 2>&1
        echo $((($(date +%s%N) - start) / 1000000)) >"$name.ms"
    ) &
    started[$!]=$name
}
reap_one() {  # waits for one of the runs started; stops everything at the first that fails
    local pid status=0
    wait -n -p pid "${!started[@]}" || status=$?
    local name=${started[$pid]}
    unset "started[$pid]"
    ((status == 0)) || { echo "$name failed:"; cat "$name.log"; exit 1; }
}
settle() { while ((${#started[@]} > 0)); do reap_one; done; }  # waits for every run started
# Each GPU run against the CPU run of the same recipe and ranks.
run cpu "${cpu[@]}" "${args[@]}" --out "$work/cpu_run"
tune=(run fine_tune --threads 1 --set base="$work/base.ckpt" --set corpus="$corpus" --set steps=4 --set batch_size=2
      --set eval_every=2 --set eval_batches=1 --set checkpoint_every=0)
run f32 "${gpu[@]}" "${args[@]}" --device cuda
run bf16 "${gpu[@]}" "${args[@]}" --device cuda --precision bf16
run cpu_x2 "${cpu[@]}" "${args[@]}" --gpus 2
run f32_x2 env LEVERS_EMULATED_GPUS=2 "${gpu[@]}" "${args[@]}" --gpus 2 --device cuda
run bf16_x2 env LEVERS_EMULATED_GPUS=2 "${gpu[@]}" "${args[@]}" --gpus 2 --device cuda --precision bf16
# ZeRO-2 on the GPUs (buckets small enough for several): AdamW's state and the averaged gradients sharded;
# in bf16 with activation checkpointing too (the recompute records the bf16 compute copies).
zero2=(--gpus 2 --device cuda --set zero=2 --set bucket_mb=0.05)
run f32_x2_zero2 env LEVERS_EMULATED_GPUS=2 "${gpu[@]}" "${args[@]}" "${zero2[@]}"
run bf16_x2_zero2 env LEVERS_EMULATED_GPUS=2 "${gpu[@]}" "${args[@]}" "${zero2[@]}" --precision bf16 \
    --set checkpointing=true --set checkpoint_every=2 --out "$work/bf16_zero2"
# In bf16 ZeRO keeps the f32 master values of each rank's shard only and gathers the bf16 copy: the loss is
# DDP's (bf16_x2_ckpt) to 1e-6, ZeRO-1's too; its checkpoints hold the masters in the shard files, and resume
# on two GPUs without ZeRO to the same loss, on one GPU to bf16's reduction order (one GPU sums the two
# micro-batches' bf16 gradients where two GPUs average them: 2e-6 to 1.1e-5 apart as seen, 1e-4 allowed).
run bf16_x2_ckpt env LEVERS_EMULATED_GPUS=2 "${gpu[@]}" "${args[@]}" --gpus 2 --device cuda --precision bf16 \
    --set checkpointing=true
run bf16_x2_zero1 env LEVERS_EMULATED_GPUS=2 "${gpu[@]}" "${args[@]}" "${zero2[@]}" --set zero=1 --precision bf16 \
    --set checkpointing=true
# sft on a Llama of head size 64 (bf16's attention fused) over a small tokenizer with a chat template, made on the CPU.
run llama_base "${cpu[@]}" run pretrain_llama --threads 1 --set steps=1 --set hidden=64 --set intermediate=96 \
    --set layers=1 --set heads=1 --set kv_heads=1 --set context=64 --set batch_size=1 --set eval_every=0 \
    --set eval_batches=1 --set sample_tokens=0 --set corpus="$corpus" --set tokenizer="$here/../fixtures/tiny_tokenizer" \
    --out "$work/llama_base"
# Tiny models of the families beside Llama (each layer kind: no rotary, sliding and soft-capped, Gemma 3's norms
# and scaled rotary, Phi-3's fused projections, partial rotation and longrope; the mixtures of experts Mixtral and
# Qwen3-MoE), saved with the same tokenizer; sft fine-tunes each in bf16 below.
families=(smollm3 gemma2 gemma3_text phi3 mixtral qwen3_moe)
for type in "${families[@]}"; do
    run "tiny_$type" "$4" run tiny_model --set model_type="$type" --set dir="$work/tiny_$type" \
        --set tokenizer="$here/../fixtures/tiny_tokenizer"
done
# The user's own model, on the GPU against the CPU (the same binary with --device cpu).
fashion=(run fashion --threads 1 --set steps=6 --set width=32 --set depth=1 --set eval_every=6)
run user_cpu "${user[@]}" "${fashion[@]}" --set batch_size=16 --device cpu
run user_f32 "${user[@]}" "${fashion[@]}" --set batch_size=16 --device cuda
run user_bf16 "${user[@]}" "${fashion[@]}" --set batch_size=16 --device cuda --precision bf16
run user_f32_x2 env LEVERS_EMULATED_GPUS=2 "${user[@]}" "${fashion[@]}" --set batch_size=8 --gpus 2 --device cuda
# The user's small CNN (convolutions, pooling: unfold, matmul, reductions) and its
# logistic classifier (its own op written with tensors) likewise.
cnn=(run fashion_cnn --threads 1 --set steps=4 --set warmup=1 --set channels=4 --set eval_every=0 --set test_images=32 --set eval_images=32)
run cnn_cpu "${user[@]}" "${cnn[@]}" --set batch_size=8 --device cpu
run cnn_f32 "${user[@]}" "${cnn[@]}" --set batch_size=8 --device cuda
run cnn_bf16 "${user[@]}" "${cnn[@]}" --set batch_size=8 --device cuda --precision bf16
run cnn_f32_x2 env LEVERS_EMULATED_GPUS=2 "${user[@]}" "${cnn[@]}" --set batch_size=4 --gpus 2 --device cuda
logistic=(run logistic --threads 1 --set steps=20)
run logistic_cpu "${user[@]}" "${logistic[@]}" --device cpu
run logistic_f32 "${user[@]}" "${logistic[@]}" --device cuda
# An op with a CPU kernel only: --device auto trains on the CPU instead of failing, and says why once.
run fallback "${tests[@]}" run cpu_op --threads 1
# The memory plan of pretrain's GPU runs, traced on shapes alone, against the peaks they measured (within 10%:
# the kernels' own scratch buffers are not traced).
run plan_f32 "${gpu[@]}" plan pretrain "${small[@]}" --device cuda
run plan_bf16 "${gpu[@]}" plan pretrain "${small[@]}" --device cuda --precision bf16
run plan_f32_x2 env LEVERS_EMULATED_GPUS=2 "${gpu[@]}" plan pretrain "${small[@]}" --gpus 2 --device cuda
run plan_f32_x2_zero2 env LEVERS_EMULATED_GPUS=2 "${gpu[@]}" plan pretrain "${small[@]}" "${zero2[@]}"
run plan_bf16_x2_zero2 env LEVERS_EMULATED_GPUS=2 "${gpu[@]}" plan pretrain "${small[@]}" "${zero2[@]}" --precision bf16 \
    --set checkpointing=true
run plan_bf16_x2_zero1 env LEVERS_EMULATED_GPUS=2 "${gpu[@]}" plan pretrain "${small[@]}" "${zero2[@]}" --set zero=1 \
    --precision bf16 --set checkpointing=true
settle

# What needs the runs above: fine_tune on pretrain's model, sft on pretrain_llama's, the resumed ZeRO checkpoint.
cp "$work/cpu_run/model.ckpt" base.ckpt
bf16_step2=$work/bf16_zero2/checkpoints/step-00000002.ckpt
[ -f "$bf16_step2.shard-1-of-2" ] || { echo "the bf16 ZeRO-2 run wrote no shard files:"; ls "$work/bf16_zero2/checkpoints"; exit 1; }
run bf16_x2_resumed env LEVERS_EMULATED_GPUS=2 "${gpu[@]}" "${args[@]}" --gpus 2 --device cuda --precision bf16 \
    --set checkpointing=true --resume "$bf16_step2"
run bf16_resumed "${gpu[@]}" "${args[@]}" --device cuda --precision bf16 --set checkpointing=true --resume "$bf16_step2"
# Two "nodes" of one GPU each, as srun or torchrun --nnodes start them: the
# ranks meet at rank 0's TCP store, NCCL carries the gradients and, staged
# through the GPUs, the host collectives.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
settle  # the two ranks run together, meeting at the store
for rank in 1 0; do
    run "f32_nodes.$rank" env RANK=$rank WORLD_SIZE=2 LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR=127.0.0.1 \
        MASTER_PORT=$port "${gpu[@]}" "${args[@]}" --device cuda
done
settle
cp f32_nodes.0.log f32_nodes.log
run cpu_tune "${cpu[@]}" "${tune[@]}"
run f32_tune "${gpu[@]}" "${tune[@]}" --device cuda
run bf16_tune "${gpu[@]}" "${tune[@]}" --device cuda --precision bf16
run cpu_tune_x2 "${cpu[@]}" "${tune[@]}" --gpus 2
run f32_tune_x2 env LEVERS_EMULATED_GPUS=2 "${gpu[@]}" "${tune[@]}" --gpus 2 --device cuda
for i in $(seq 12); do
    printf '{"messages": [{"role": "user", "content": "What is %d plus %d?"}, {"role": "assistant", "content": "%d."}]}\n' \
        "$i" "$((2 * i))" "$((3 * i))"
done >chat.jsonl
sft=(run sft --threads 1 --set model="$work/llama_base/model" --set data="$work/chat.jsonl" --set context=64
     --set batch_size=2 --set steps=3 --set eval_every=3 --set eval_batches=1 --set checkpoint_every=0 --set val_fraction=0.25)
run cpu_sft "${cpu[@]}" "${sft[@]}"
run f32_sft "${gpu[@]}" "${sft[@]}" --device cuda
run bf16_sft "${gpu[@]}" "${sft[@]}" --device cuda --precision bf16
run cpu_sft_x2 "${cpu[@]}" "${sft[@]}" --gpus 2
run f32_sft_x2 env LEVERS_EMULATED_GPUS=2 "${gpu[@]}" "${sft[@]}" --gpus 2 --device cuda
# dpo on the same model (LoRA: its reference the base with the adapters switched off), pairs of answers to the sums.
for i in $(seq 12); do
    printf '{"prompt": [{"role": "user", "content": "What is %d plus %d?"}], "chosen": "%d.", "rejected": "%d."}\n' \
        "$i" "$((2 * i))" "$((3 * i))" "$((3 * i + 2))"
done >pairs.jsonl
dpo=(run dpo --threads 1 --set model="$work/llama_base/model" --set data="$work/pairs.jsonl" --set context=64
     --set batch_size=2 --set steps=3 --set lr=1e-2 --set eval_every=3 --set eval_batches=1 --set checkpoint_every=0
     --set val_fraction=0.25)
run cpu_dpo "${cpu[@]}" "${dpo[@]}"
run f32_dpo "${gpu[@]}" "${dpo[@]}" --device cuda
run bf16_dpo "${gpu[@]}" "${dpo[@]}" --device cuda --precision bf16
# grpo on the same model (LoRA; beta > 0, the reference the base with the adapters off): answers to the sums
# sampled in groups through the KV cache on the GPU, two updates per generated batch (the ratio against the old
# policy's log-probabilities).
for i in $(seq 12); do
    printf '{"prompt": [{"role": "user", "content": "What is %d plus %d?"}], "answer": "%d."}\n' "$i" "$((2 * i))" "$((3 * i))"
done >prompts.jsonl
grpo=(run grpo --threads 1 --set model="$work/llama_base/model" --set prompts="$work/prompts.jsonl" --set rewards=regex
      --set 'reward_regex=[0-9]' --set num_generations=4 --set batch_size=2 --set max_completion_length=6 --set beta=0.04
      --set num_iterations=2 --set steps=4 --set lr=1e-2 --set checkpoint_every=0)
run cpu_grpo "${cpu[@]}" "${grpo[@]}" --out "$work/out_cpu_grpo"
run f32_grpo "${gpu[@]}" "${grpo[@]}" --device cuda --out "$work/out_f32_grpo"
run bf16_grpo "${gpu[@]}" "${grpo[@]}" --device cuda --precision bf16 --out "$work/out_bf16_grpo"
for type in "${families[@]}"; do  # every weight trained (lora_r=0), its validation loss falling on the GPU in bf16
    family_sft=(run sft --threads 1 --set model="$work/tiny_$type" --set data="$work/chat.jsonl" --set context=64
                --set batch_size=2 --set steps=4 --set lr=3e-3 --set lora_r=0 --set eval_every=4 --set eval_batches=1
                --set checkpoint_every=0 --set val_fraction=0.25)
    run "cpu_sft_$type" "${cpu[@]}" "${family_sft[@]}"
    run "bf16_sft_$type" "${gpu[@]}" "${family_sft[@]}" --device cuda --precision bf16
    if [ "$type" = mixtral ] || [ "$type" = qwen3_moe ]; then  # a mixture's experts' state sharded by ZeRO-2
        run "bf16_sft_x2_$type" env LEVERS_EMULATED_GPUS=2 "${gpu[@]}" "${family_sft[@]}" --gpus 2 --device cuda \
            --precision bf16 --set zero=2 --set checkpointing=true
    fi
done
# A GPU too small for the batch asked (the emulated GPU's memory limited): the rank stops with the plan's figures
# and what fits, having written no checkpoint.
run_oom() {
    if LEVERS_EMULATED_GPU_MEMORY=$((40 << 20)) "${gpu[@]}" "${args[@]}" --device cuda --set batch_size=512 \
        --set checkpoint_every=1 --out "$work/oom"; then
        echo "a batch too large for a 40 MiB GPU trained"
        exit 1
    fi
}
run oom run_oom
settle
grep -q "the model uses op 'test_square', which has no cuda kernel in f32; training on the CPU instead" fallback.log ||
    { echo "the model with a CPU-only op did not fall back to the CPU:"; cat fallback.log; exit 1; }
for run in f32 bf16 f32_tune bf16_tune f32_sft bf16_sft f32_dpo bf16_dpo f32_grpo bf16_grpo bf16_sft_smollm3 bf16_sft_gemma2 bf16_sft_gemma3_text bf16_sft_phi3 bf16_sft_mixtral bf16_sft_qwen3_moe user_f32 user_bf16 cnn_f32 cnn_bf16 logistic_f32; do
    grep -q 'on GPU 0 (levers emulated GPU' "$run.log" || { echo "the $run run did not use the emulated GPU:"; cat "$run.log"; exit 1; }
done
for run in f32_x2 bf16_x2 f32_x2_zero2 bf16_x2_zero2 f32_tune_x2 f32_sft_x2 bf16_sft_x2_mixtral bf16_sft_x2_qwen3_moe user_f32_x2 cnn_f32_x2; do
    grep -q '2 ranks on GPUs 0,1 (levers emulated GPU' "$run.log" ||
        { echo "the $run run did not use two emulated GPUs:"; cat "$run.log"; exit 1; }
done
grep -q 'rank 0 of 2 started by torchrun, joined through NCCL' f32_nodes.log ||
    { echo "the two-node run did not join through NCCL:"; cat f32_nodes.log; exit 1; }
for says in "out of memory on the GPU" "The memory plan for this run (1 cuda rank of 40.0 MiB)" \
    "What fits: batch_size=" "--set micro_batch=auto picks"; do
    grep -qF -- "$says" oom.log || { echo "the out-of-memory message lacks '$says':"; cat oom.log; exit 1; }
done
[ -z "$(ls "$work/oom/checkpoints")" ] || { echo "the failed run left checkpoints:"; ls "$work/oom/checkpoints"; exit 1; }
# Tests running beside this one open segments too, for a moment: a leak is one still there a second later.
[ "$(emulated_segments)" -le "$shm_before" ] || sleep 1
[ "$(emulated_segments)" -le "$shm_before" ] || { echo "the emulated NCCL left segments in /dev/shm:"; ls /dev/shm; exit 1; }
echo "each run's seconds (two at a time):"
for f in *.ms; do echo "${f%.ms} $(cat "$f")"; done | sort -k2 -n -r |
    awk '{ printf "  %-20s %6.1f%s", $1, $2 / 1000, NR % 3 ? "" : "\n" } END { if (NR % 3) print "" }'

python3 - <<'PY'
import json, re, sys
def result(name):
    return json.loads(open(name + '.log', 'rb').read().strip().splitlines()[-1])  # the log's sample is raw bytes
failed = False
for run in ('f32', 'bf16', 'f32_x2', 'f32_x2_zero2', 'bf16_x2_zero2', 'bf16_x2_zero1'):
    planned = float(re.search(r'peak ([0-9.]+) MiB per rank', open('plan_' + run + '.log').read()).group(1))
    for measured in result(run)['peak_memory_mb']:
        ok = abs(planned - measured) <= 0.1 * measured
        failed |= not ok
        print(f"plan {run}: {planned:.1f} MiB planned, {measured:.2f} measured {'ok' if ok else 'MORE THAN 10% APART'}")
def within(run, got, reference, ref, key, tolerance):  # got[key] within a relative tolerance of ref[key]
    global failed
    error = abs(got[key] - ref[key]) / abs(ref[key])
    failed |= error > tolerance
    print(f"{run} {key}: {got[key]:.9f}, {reference} {ref[key]:.9f}, relative error {error:.1e} "
          f"({'ok' if error <= tolerance else 'over'} {tolerance:g})")
for suffix, precisions, cpu_run in (('', ('f32', 'bf16'), 'cpu'), ('_x2', ('f32', 'bf16'), 'cpu_x2'),
                                    ('_x2_zero2', ('f32', 'bf16'), 'cpu_x2'),
                                    ('_nodes', ('f32',), 'cpu_x2'), ('_tune', ('f32', 'bf16'), 'cpu_tune'),
                                    ('_tune_x2', ('f32',), 'cpu_tune_x2'), ('_sft', ('f32', 'bf16'), 'cpu_sft'),
                                    ('_sft_x2', ('f32',), 'cpu_sft_x2'), ('_dpo', ('f32', 'bf16'), 'cpu_dpo'),
                                    ('_sft_smollm3', ('bf16',), 'cpu_sft_smollm3'),
                                    ('_sft_gemma2', ('bf16',), 'cpu_sft_gemma2'),
                                    ('_sft_gemma3_text', ('bf16',), 'cpu_sft_gemma3_text'),
                                    ('_sft_phi3', ('bf16',), 'cpu_sft_phi3'),
                                    ('_sft_mixtral', ('bf16',), 'cpu_sft_mixtral'),
                                    ('_sft_qwen3_moe', ('bf16',), 'cpu_sft_qwen3_moe')):
    cpu = result(cpu_run)
    for precision in precisions:
        run, tolerance = precision + suffix, 1e-5 if precision == 'f32' else 0.02
        got = result(run)
        for key in ('loss', 'val_loss'):
            within(run, got, cpu_run, cpu, key, tolerance)
        if precision == 'f32' and got.get('sample') != cpu.get('sample'):
            print(f"{run} sample differs: GPU {got.get('sample')!r}, CPU {cpu.get('sample')!r}")
            failed = True
for run, reference, tolerance in (('bf16_x2_zero2', 'bf16_x2_ckpt', 1e-6), ('bf16_x2_zero1', 'bf16_x2_ckpt', 1e-6),
                                  ('bf16_x2_resumed', 'bf16_x2_zero2', 1e-6), ('bf16_resumed', 'bf16_x2_zero2', 1e-4)):
    for key in ('loss', 'val_loss'):
        within(run, result(run), reference, result(reference), key, tolerance)
def against_cpu(cpu_run, runs, accuracy):  # each run's loss within its tolerance; f32 also the accuracy exactly
    global failed
    cpu = result(cpu_run)
    for run, tolerance in runs:
        got = result(run)
        error = abs(got['loss'] - cpu['loss']) / abs(cpu['loss'])
        ok = error <= tolerance and (tolerance > 1e-5 or got[accuracy] == cpu[accuracy])
        failed |= not ok
        print(f"{run} loss: GPU {got['loss']:.7f}, CPU {cpu['loss']:.7f}, relative error {error:.1e}; {accuracy} "
              f"{got[accuracy]:.4f} against {cpu[accuracy]:.4f} ({'ok' if ok else 'over'} {tolerance:g})")
against_cpu('user_cpu', (('user_f32', 1e-5), ('user_bf16', 0.02), ('user_f32_x2', 1e-5)), 'test_accuracy')
against_cpu('cnn_cpu', (('cnn_f32', 1e-5), ('cnn_bf16', 0.02), ('cnn_f32_x2', 1e-5)), 'final_test_accuracy')
against_cpu('logistic_cpu', (('logistic_f32', 1e-5),), 'train_accuracy')
for run in ('bf16_sft_smollm3', 'bf16_sft_gemma2', 'bf16_sft_gemma3_text', 'bf16_sft_phi3', 'bf16_sft_mixtral',
            'bf16_sft_qwen3_moe', 'bf16_sft_x2_mixtral', 'bf16_sft_x2_qwen3_moe'):  # sft lowers each family's validation loss on the GPU
    before = float(re.search(r'eval step +0 \| val_loss ([0-9.]+)', open(run + '.log').read()).group(1))
    after = result(run)['val_loss']
    failed |= not after < before
    print(f"{run} val_loss: {before:.4f} before, {after:.4f} after ({'ok' if after < before else 'NOT LOWER'})")
def steps(run):  # metrics.jsonl's training rows
    return [r for r in map(json.loads, open(f'out_{run}/metrics.jsonl')) if r['kind'] == 'train']
cpu_grpo = steps('cpu_grpo')
for run in ('f32_grpo', 'bf16_grpo'):  # f32: the same answers and rewards, the loss to 1e-5; bf16: finite, learning
    got, ok = steps(run), True
    for mine, theirs in zip(got, cpu_grpo):
        if run == 'f32_grpo':
            ok &= mine['reward'] == theirs['reward'] and mine['completions/mean_length'] == theirs['completions/mean_length']
            ok &= abs(mine['loss'] - theirs['loss']) <= 1e-5 * (1e-3 + abs(theirs['loss']))
        ok &= all(v == v for k, v in mine.items() if isinstance(v, float))
    ok &= len(got) == len(cpu_grpo) == 4
    failed |= not ok
    print(f"{run}: rewards {[r['reward'] for r in got]}, CPU {[r['reward'] for r in cpu_grpo]}; losses "
          f"{[round(r['loss'], 7) for r in got]}, CPU {[round(r['loss'], 7) for r in cpu_grpo]} ({'ok' if ok else 'APART'})")
fallback = result('fallback')
print(f"fallback: {fallback['steps']} steps on the CPU, loss {fallback['loss']:.4f}")
failed |= fallback['steps'] != 20
sys.exit(1 if failed else 0)
PY
