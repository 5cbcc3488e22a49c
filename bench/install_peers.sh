# Sourced by the benchmarks: install_peers PACKAGE... installs the Debian
# packages of a peer (PyTorch, Open MPI, OpenBLAS) that are missing. Only
# benchmarks install peers; the set-up and CI never do.
install_peers() {
    local sudo="" need=() p
    [ "$(id -u)" = 0 ] || sudo=sudo
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
    done
    [ ${#need[@]} -eq 0 ] && return 0
    echo "[bench] installing ${need[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${need[@]}" >/dev/null
}

# torch_builds THREADS OUT SCRIPT ARG...: runs the PyTorch peer SCRIPT with
# each OpenBLAS build (pthreads, OpenMP), each with and without flushing
# subnormals to zero, on THREADS threads, its JSON rows appended to OUT; the
# reports take the fastest, as PyTorch's users would pick it.
torch_builds() {
    local threads=$1 out=$2 script=$3 variant flush
    shift 3
    for variant in pthread openmp; do
        for flush in 0 1; do
            OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads \
                LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-$variant \
                /usr/bin/python3 "$script" "$@" --threads "$threads" --blas "openblas-$variant" \
                --flush-denormal "$flush" >>"$out"
        done
    done
}
