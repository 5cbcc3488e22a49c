# Two nodes on one machine, for the tests and benchmarks that need them: two
# network namespaces joined by a veth pair (10.X.Y.1 and .2), each node's
# ranks in a mount namespace of their own with a private /dev/shm, so nothing
# crosses between the nodes but the network. Needs root. Sourced:
#
#   source tests/nodes/two_nodes.sh
#   make_two_nodes || exit 77     # says why not where it cannot (no root, no namespaces)
#   node "$node_a" 0 RUN 2 PROGRAM ARGS...; node "$node_b" 1 RUN 2 PROGRAM ARGS...; wait_nodes RUN 60
#   remove_two_nodes              # also killing what runs from $nodes_work
# Sets node_a, node_b (the namespaces), node_link_b (node 1's end of the link),
# node_master (node 0's address), node_port (a free-ish store port), nodes_work.

make_two_nodes() {
    [ "$(id -u)" = 0 ] || { echo "skipped: two nodes in network namespaces need root"; return 1; }
    command -v ip >/dev/null && command -v unshare >/dev/null ||
        { echo "skipped: needs ip (iproute2) and unshare (util-linux)"; return 1; }
    local tag=lv$$
    node_a=${tag}a node_b=${tag}b node_link_b=${tag}y
    local net=10.$((200 + $$ % 50)).$(($$ / 50 % 250))
    node_master=$net.1 node_port=$((29700 + $$ % 200))
    nodes_work=$(mktemp -d)
    if ! ip netns add "$node_a" 2>"$nodes_work/err"; then
        echo "skipped: cannot make a network namespace here: $(cat "$nodes_work/err")"
        return 1
    fi
    ip netns add "$node_b"
    ip link add "${tag}x" type veth peer name "${tag}y"
    ip link set "${tag}x" netns "$node_a"
    ip link set "${tag}y" netns "$node_b"
    ip -n "$node_a" addr add "$net.1/24" dev "${tag}x"
    ip -n "$node_b" addr add "$net.2/24" dev "${tag}y"
    local ns
    for ns in "$node_a" "$node_b"; do ip -n "$ns" link set lo up; done
    ip -n "$node_a" link set "${tag}x" up
    ip -n "$node_b" link set "${tag}y" up
    node_subnet=$net.0/24
}

remove_two_nodes() {
    [ -n "${nodes_work:-}" ] || return 0
    pkill -9 -f -- "$nodes_work/" 2>/dev/null || true
    ip netns del "$node_a" 2>/dev/null || true
    ip netns del "$node_b" 2>/dev/null || true
    rm -rf "$nodes_work"
}

# node NS INDEX RUN PER_NODE PROGRAM ARGS...: the node's PER_NODE ranks in their own
# /dev/shm, started with torchrun's variables, in the background. Each rank's output
# goes to RUN/rankN.out and its pid to RUN/pidN; when all have ended, what is left in
# the node's /dev/shm is counted into RUN/shm_left.INDEX.
node() {
    local ns=$1 index=$2 run=$3 per=$4
    shift 4
    mkdir -p "$run"
    ip netns exec "$ns" unshare --mount --propagation private bash -c '
        mount -t tmpfs tmpfs /dev/shm
        index=$1 run=$2 master=$3 port=$4 per=$5
        shift 5
        for local in $(seq 0 $((per - 1))); do
            rank=$((index * per + local))
            RANK=$rank WORLD_SIZE=$((2 * per)) LOCAL_RANK=$local LOCAL_WORLD_SIZE=$per MASTER_ADDR=$master \
                MASTER_PORT=$port "$@" >"$run/rank$rank.out" 2>&1 &
            echo $! >"$run/pid$rank"
        done
        wait
        ls -A /dev/shm | wc -l >"$run/shm_left.$index"
    ' node "$index" "$run" "$node_master" "$node_port" "$per" "$@" &
    echo $! >"$run/node$index"
}

# Runs PROGRAM ARGS... as PER_NODE ranks on each of the two nodes, in RUN.
on_both_nodes() {
    local run=$1 per=$2
    shift 2
    node "$node_a" 0 "$run" "$per" "$@"
    node "$node_b" 1 "$run" "$per" "$@"
}

# Waits for both nodes of RUN, at most LIMIT seconds.
wait_nodes() {
    local run=$1 limit=$2 start=$SECONDS i pid
    for i in 0 1; do
        pid=$(cat "$run/node$i")
        while kill -0 "$pid" 2>/dev/null; do
            [ $((SECONDS - start)) -le "$limit" ] || { echo "the nodes of $run did not end within $limit s"; return 1; }
            sleep 0.05
        done
    done
}
