#!/usr/bin/env bash
# The peer report in one command: levers' training against PyTorch DDP on 1
# and 2 CPU ranks (bench/ddp_peer.sh) and levers' shared-memory all-reduce
# against Open MPI's MPI_Allreduce (bench/allreduce.sh), each installing its
# peer if missing. Figures and their history are in bench/README.md.
#
#   bash bench/peers.sh
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
echo "## Training: levers against PyTorch DDP (gloo), one thread per rank"
bash "$root/bench/ddp_peer.sh"
echo
echo "## All-reduce: levers' shared memory against Open MPI"
bash "$root/bench/allreduce.sh"
