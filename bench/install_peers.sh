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
