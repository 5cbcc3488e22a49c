#!/bin/bash
# Two nodes on one machine: two network namespaces joined by a veth pair,
# each node's ranks in a mount namespace of their own with a private
# /dev/shm, so nothing crosses between the nodes but the network. Two CPU
# ranks per node, started by hand with torchrun's variables:
#   - every collective, awkward lengths and roots included, gives what it must;
#   - pretrain's 4-rank result is within 1e-6 of 4 ranks on one node;
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
[ "$(id -u)" = 0 ] || { echo "skipped: two nodes in network namespaces need root"; exit 77; }
[ -e "$(dirname "$recipe")/liblevers_gloo.so" ] ||
    { echo "skipped: this build has no Gloo backend (libgloo-dev was missing when it was configured)"; exit 77; }
command -v ip >/dev/null && command -v unshare >/dev/null ||
    { echo "skipped: needs ip (iproute2) and unshare (util-linux)"; exit 77; }

tag=lv$$
a=${tag}a b=${tag}b
net=10.$((200 + $$ % 50)).$(($$ / 50 % 250))
port=$((29700 + $$ % 200))
work=$(mktemp -d)
cleanup() {
    pkill -9 -f -- "$work/" 2>/dev/null || true
    ip netns del "$a" 2>/dev/null || true
    ip netns del "$b" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
if ! ip netns add "$a" 2>"$work/err"; then
    echo "skipped: cannot make a network namespace here: $(cat "$work/err")"
    exit 77
fi
ip netns add "$b"
ip link add "${tag}x" type veth peer name "${tag}y"
ip link set "${tag}x" netns "$a"
ip link set "${tag}y" netns "$b"
ip -n "$a" addr add "$net.1/24" dev "${tag}x"
ip -n "$b" addr add "$net.2/24" dev "${tag}y"
for ns in "$a" "$b"; do ip -n "$ns" link set lo up; done
ip -n "$a" link set "${tag}x" up
ip -n "$b" link set "${tag}y" up

tiny=(--threads 1 --set n_layer=1 --set n_embd=16 --set n_head=2 --set block_size=16 --set batch_size=2
      --set eval_batches=2 --set sample_tokens=0 --set warmup=2 --set log_every=10)

# node NS INDEX RUN ARGS...: the node's two ranks in their own /dev/shm, in the background.
# Each rank's output goes to RUN/rankN.out and its pid to RUN/pidN; when both have
# ended, what is left in the node's /dev/shm is counted into RUN/shm_left.INDEX.
node() {
    local ns=$1 index=$2 run=$3
    shift 3
    mkdir -p "$run"
    ip netns exec "$ns" unshare --mount --propagation private bash -c '
        mount -t tmpfs tmpfs /dev/shm
        index=$1 run=$2 master=$3 port=$4
        shift 4
        for local in 0 1; do
            rank=$((index * 2 + local))
            RANK=$rank WORLD_SIZE=4 LOCAL_RANK=$local LOCAL_WORLD_SIZE=2 MASTER_ADDR=$master MASTER_PORT=$port \
                "$@" >"$run/rank$rank.out" 2>&1 &
            echo $! >"$run/pid$rank"
        done
        wait
        ls -A /dev/shm | wc -l >"$run/shm_left.$index"
    ' node "$index" "$run" "$net.1" "$port" "$@" &
    echo $! >"$run/node$index"
}

# Waits for both nodes of RUN, at most SECONDS; prints how long they took.
wait_nodes() {
    local run=$1 limit=$2 start=$SECONDS
    for i in 0 1; do
        local pid; pid=$(cat "$run/node$i")
        while kill -0 "$pid" 2>/dev/null; do
            [ $((SECONDS - start)) -le "$limit" ] || { echo "the nodes of $run did not end within $limit s"; return 1; }
            sleep 0.05
        done
    done
}

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
for i in 0 1; do node "$([ $i = 0 ] && echo "$a" || echo "$b")" $i "$run" "$test_recipes" run collectives \
    --threads 1 --out "$run/dir"; done
wait_nodes "$run" 120 || { cat "$run"/rank*.out; exit 1; }
grep -q '"ok":true' "$run/rank0.out" || { echo "a collective across the nodes went wrong:"; cat "$run"/rank*.out; exit 1; }
nothing_left "$run"

# 1. The result of two nodes against one node's four ranks.
one=$work/one
"$recipe" run pretrain --gpus 4 "${tiny[@]}" --set steps=40 --out "$one" >"$work/one.out" 2>&1 ||
    { cat "$work/one.out"; exit 1; }
run=$work/same
for i in 0 1; do node "$([ $i = 0 ] && echo "$a" || echo "$b")" $i "$run" "$recipe" run pretrain "${tiny[@]}" \
    --set steps=40 --out "$run/dir"; done
wait_nodes "$run" 120 || { cat "$run"/rank*.out; exit 1; }
for r in 0 1 2 3; do
    grep -q '"steps":40' "$run/rank0.out" || { echo "rank $r did not finish:"; cat "$run/rank$r.out"; exit 1; }
done
grep -q 'joined through shared memory within 2 nodes, Gloo (TCP) between them' "$run/rank0.out" ||
    { echo "the job did not join through Gloo between the nodes:"; cat "$run/rank0.out"; exit 1; }
nothing_left "$run"
python3 - "$one/result.json" "$run/dir/result.json" <<'PY'
import json, sys
one, two = (json.load(open(p)) for p in sys.argv[1:])
for key in ("loss", "val_loss"):
    error = abs(two[key] - one[key]) / abs(one[key])
    print(f"{key}: one node {one[key]!r}, two nodes {two[key]!r}, relative difference {error:.2e}")
    if error > 1e-6:
        sys.exit(f"two nodes differ from one in {key} by {error:.2e} (limit 1e-6)")
PY

# 2. kill -9 of a rank on the other node (rank 3, node 1) ends the whole job within 5 s.
run=$work/kill
for i in 0 1; do node "$([ $i = 0 ] && echo "$a" || echo "$b")" $i "$run" "$recipe" run pretrain "${tiny[@]}" \
    --set steps=1000000 --out "$run/dir"; done
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
for i in 0 1; do node "$([ $i = 0 ] && echo "$a" || echo "$b")" $i "$run" "$recipe" run pretrain "${tiny[@]}" \
    --set steps=1000000 --timeout 5 --out "$run/dir"; done
until_training "$run/rank0.out"
ip -n "$b" link set "${tag}y" down
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
