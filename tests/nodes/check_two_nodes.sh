#!/bin/bash
# Two nodes on one machine: two network namespaces joined by a veth pair,
# each node's ranks in a mount namespace of their own with a private
# /dev/shm, so nothing crosses between the nodes but the network. Two CPU
# ranks per node, started by hand with torchrun's variables:
#   - every collective, awkward lengths and roots included, gives what it must;
#   - pretrain's 4-rank result is within 1e-6 of 4 ranks on one node, with
#     data parallelism and with ZeRO-2;
#   - kill -9 of a rank on the other node ends the whole job within 5 s,
#     naming the rank and its node;
#   - a node whose link goes down (its veth taken down mid-run) is named
#     within the collective timeout;
#   - after each, no rank is left running and no segment on either node.
#
#   check_two_nodes.sh RECIPE_BIN TEST_RECIPES_BIN
# Needs root and network namespaces (skipped, saying so, without them).
set -euo pipefail
recipe=$1 test_recipes=$2
source "$(dirname "$0")/../needs_data.sh"
needs_data books
[ -e "$(dirname "$recipe")/liblevers_gloo.so" ] ||
    { echo "skipped: this build has no Gloo backend (libgloo-dev was missing when it was configured)"; exit 77; }

source "$(dirname "$0")/two_nodes.sh"
trap remove_two_nodes EXIT
make_two_nodes || exit 77
work=$nodes_work

tiny=(--threads 1 --set n_layer=1 --set n_embd=16 --set n_head=2 --set block_size=16 --set batch_size=2
      --set eval_batches=2 --set sample_tokens=0 --set warmup=2 --set log_every=10)

nothing_left() {
    local run=$1
    if pgrep -f -- "$run/" >/dev/null; then echo "ranks of $run are still running:"; pgrep -af -- "$run/"; return 1; fi
    for i in 0 1; do
        [ "$(cat "$run/shm_left.$i")" = 0 ] || { echo "node $i kept a shared-memory segment after $run"; return 1; }
    done
}

until_training() {
    local out=$1 start=$SECONDS
    until grep -q '^step ' "$out" 2>/dev/null; do
        [ $((SECONDS - start)) -le 60 ] || { echo "the job did not start training:"; cat "$out"; return 1; }
        sleep 0.05
    done
}

# 0. Every collective across the nodes (the test recipes' own checks, each rank against the sums it knows).
run=$work/collectives
on_both_nodes "$run" 2 "$test_recipes" run collectives \
    --threads 1 --out "$run/dir"
wait_nodes "$run" 120 || { cat "$run"/rank*.out; exit 1; }
grep -q '"ok":true' "$run/rank0.out" || { echo "a collective across the nodes went wrong:"; cat "$run"/rank*.out; exit 1; }
nothing_left "$run"

# 1. The result of two nodes against one node's four ranks.
one=$work/one
"$recipe" run pretrain --gpus 4 "${tiny[@]}" --set steps=40 --out "$one" >"$work/one.out" 2>&1 ||
    { cat "$work/one.out"; exit 1; }
run=$work/same
on_both_nodes "$run" 2 "$recipe" run pretrain "${tiny[@]}" \
    --set steps=40 --out "$run/dir"
wait_nodes "$run" 120 || { cat "$run"/rank*.out; exit 1; }
for r in 0 1 2 3; do
    grep -q '"steps":40' "$run/rank0.out" || { echo "rank $r did not finish:"; cat "$run/rank$r.out"; exit 1; }
done
grep -q 'joined through shared memory within 2 nodes, Gloo (TCP) between them' "$run/rank0.out" ||
    { echo "the job did not join through Gloo between the nodes:"; cat "$run/rank0.out"; exit 1; }
nothing_left "$run"
python3 "$(dirname "$0")/within_1e6.py" "$one/result.json" "$run/dir/result.json" "torchrun's variables"

# 1b. ZeRO-2 across the nodes (reduce-scatter and the parameters' all-gather through Gloo) against the same.
run=$work/zero2
on_both_nodes "$run" 2 "$recipe" run pretrain "${tiny[@]}" \
    --set steps=40 --set zero=2 --set bucket_mb=0.01 --out "$run/dir"
wait_nodes "$run" 120 || { cat "$run"/rank*.out; exit 1; }
grep -q '"steps":40' "$run/rank0.out" || { echo "ZeRO-2 across the nodes did not finish:"; cat "$run"/rank*.out; exit 1; }
nothing_left "$run"
python3 "$(dirname "$0")/within_1e6.py" "$one/result.json" "$run/dir/result.json" "ZeRO-2 across the nodes"

# 2. kill -9 of a rank on the other node (rank 3, node 1) ends the whole job within 5 s.
run=$work/kill
on_both_nodes "$run" 2 "$recipe" run pretrain "${tiny[@]}" \
    --set steps=1000000 --out "$run/dir"
until_training "$run/rank0.out"
kill -9 "$(cat "$run/pid3")"
start=$(date +%s.%N)
wait_nodes "$run" 5 || { cat "$run"/rank*.out; exit 1; }
echo "kill -9 of rank 3 on node 1: the job ended in $(echo "$(date +%s.%N) - $start" | bc) s"
grep -q 'rank 3 (pid [0-9]*) exited' "$run/rank2.out" && grep -q 'node 1 (ranks 2-3)' "$run/rank2.out" ||
    { echo "rank 2 did not name rank 3 and its node:"; cat "$run/rank2.out"; exit 1; }
grep -q 'Gloo' "$run/rank0.out" || { echo "rank 0 did not say its node lost the other:"; cat "$run/rank0.out"; exit 1; }
grep -h '^error' "$run"/rank*.out
nothing_left "$run"

# 3. The link to node 1 goes down: named within the collective timeout (5 s here).
run=$work/link
on_both_nodes "$run" 2 "$recipe" run pretrain "${tiny[@]}" \
    --set steps=1000000 --timeout 5 --out "$run/dir"
until_training "$run/rank0.out"
ip -n "$node_b" link set "$node_link_b" down
start=$(date +%s.%N)
wait_nodes "$run" 15 || { cat "$run"/rank*.out; exit 1; }
echo "link of node 1 down: the job ended in $(echo "$(date +%s.%N) - $start" | bc) s"
for r in 0 2; do
    grep -q 'did not answer within 5000 ms' "$run/rank$r.out" ||
        { echo "rank $r did not name the lost link:"; cat "$run/rank$r.out"; exit 1; }
done
grep -h '^error' "$run"/rank*.out
nothing_left "$run"
echo "two nodes: same result, a killed rank and a lost link both end the job, nothing left behind"
