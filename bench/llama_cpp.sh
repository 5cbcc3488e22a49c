#!/usr/bin/env bash
# Builds llama.cpp's CPU tools (llama-simple, llama-perplexity, llama-quantize)
# from the source the npm package node-llama-cpp ships (a git bundle), into
# the data directory, once. Prints the folder holding the binaries.
#   bash bench/llama_cpp.sh        (LLAMA_CPP_VERSION picks the npm release)
set -euo pipefail
version=${LLAMA_CPP_VERSION:-3.21.1}
data=${LEVERS_DATA:-${XDG_DATA_HOME:-$HOME/.local/share}/levers}
root=$data/llama.cpp-npm-$version
bin=$root/build/bin
if [[ -x $bin/llama-perplexity && -x $bin/llama-simple && -x $bin/llama-quantize ]]; then
    echo "$bin"
    exit 0
fi
. "$(dirname "${BASH_SOURCE[0]}")/install_peers.sh"
missing=()  # by command: npm may come from Node's own packages rather than Debian's
for tool in npm git cmake g++; do command -v $tool >/dev/null || missing+=("$tool"); done
[ ${#missing[@]} -eq 0 ] || install_peers "${missing[@]}" >&2
mkdir -p "$root"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "node-llama-cpp@$version" >/dev/null && tar xzf node-llama-cpp-*.tgz)
[[ -d $root/src/.git ]] || git clone -q -c advice.detachedHead=false "$work/package/llama/gitRelease.bundle" "$root/src"
cmake -S "$root/src" -B "$root/build" -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF \
    -DGGML_NATIVE=ON >"$root/cmake.log" 2>&1 || { tail -20 "$root/cmake.log" >&2; exit 1; }
cmake --build "$root/build" -j"$(nproc)" --target llama-simple llama-perplexity llama-quantize \
    >"$root/build.log" 2>&1 || { tail -20 "$root/build.log" >&2; exit 1; }
echo "$bin"
