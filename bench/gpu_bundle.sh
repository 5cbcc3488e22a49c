#!/usr/bin/env bash
# Packs what bench/gpu_check.sh runs into one folder, for a GPU machine that
# has the NVIDIA driver, cuBLAS and NCCL but no compilers' libraries, Boost or
# network (a compute node, a CUDA container):
#
#   bash bench/gpu_bundle.sh [DIR]        here, where levers builds (default DIR: gpu-bundle)
#   bash bench/gpu_check.sh DIR           there, from a checkout of the same commit
#
# Its test, `meson test -C build --suite bundle`, packs one and runs it here.
#
# DIR holds build/ (recipe, the GPU tests, the user's recipes of examples/user_project, bench_gpt_cuda,
# bench_ops_cuda, bench_ops, liblevers.so, the shipped recipes' liblevers_recipes.so and
# the GPU backend liblevers_cuda.so beside them,
# built without -march=native so that another processor runs them), lib/
# (the shared libraries they need beyond glibc, cuBLAS and NCCL, which are the
# GPU machine's own) and data/ (the books and Fashion-MNIST, where they are
# here). GPU_ARCHS names the GPU's architectures (default 90: Hopper, H100 and
# H200; e.g. "80,90,100,120" for several, ~15 MiB of device code each, where
# the bundle must stay small enough to carry).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=$(realpath -m "${1:-$root/gpu-bundle}")
export PATH=$PATH:/usr/local/cuda/bin
command -v nvcc >/dev/null || { echo "gpu_bundle: no nvcc: the bundle needs the CUDA build"; exit 1; }
data=${LEVERS_DATA:-${XDG_DATA_HOME:-$HOME/.local/share}/levers}
build=${LEVERS_BUNDLE_BUILD:-$root/build-bundle}
archs=${GPU_ARCHS:-90}

# A build of its own: portable code for the host processor, and no OpenBLAS
# (the GPU checks' CPU references are small; OpenBLAS would bring 40 MB).
if [ ! -f "$build/build.ninja" ]; then
    meson setup "$build" "$root" --buildtype=release -Dnative=false -Dblas=disabled -Dcuda=enabled \
        -Dgpu_archs="$archs" >/dev/null
fi
ninja -C "$build" tests/levers_gpu_tests recipe tests/user_recipes liblevers_cuda.so bench/bench_gpt_cuda \
    bench/bench_ops_cuda bench/bench_ops >/dev/null

rm -rf "$out"
mkdir -p "$out/build/tests" "$out/build/bench" "$out/lib" "$out/data"
cp "$build/recipe" "$build/liblevers.so" "$build/liblevers_recipes.so" "$build/liblevers_cuda.so" "$out/build/"
cp "$build/tests/levers_gpu_tests" "$build/tests/user_recipes" "$out/build/tests/"
cp "$build/bench/bench_gpt_cuda" "$build/bench/bench_ops_cuda" "$build/bench/bench_ops" "$out/build/bench/"
# Without their static symbol tables (the dynamic ones stay: the CUDA backend is opened by name): 3 MiB less.
strip --strip-unneeded "$out"/build/recipe "$out"/build/*.so "$out"/build/tests/* "$out"/build/bench/*
# Every shared library they load as built (LD_LIBRARY_PATH could name
# another liblevers), but glibc's own (any newer glibc runs what
# was linked here), cuBLAS and NCCL (hundreds of MB, and the GPU machine's
# must match its driver anyway).
for bin in "$out"/build/recipe "$out"/build/liblevers_cuda.so "$out"/build/tests/* "$out"/build/bench/*; do
    env -u LD_LIBRARY_PATH ldd "$bin" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }'
done | sort -u | while read -r name path; do
    case $name in
        liblevers.so | liblevers_recipes.so | liblevers_cuda.so | libc.so.* | libm.so.* | libdl.so.* | libpthread.so.* | librt.so.* | ld-linux*) ;;
        libcublas.so.* | libcublasLt.so.* | libnccl.so.*) ;;
        *) cp -L "$path" "$out/lib/$name" ;;
    esac
done
[ -d "$data/books" ] && cp -r "$data/books" "$out/data/"
[ -d /usr/share/datasets/fashion-mnist ] && cp -r /usr/share/datasets/fashion-mnist "$out/data/"
# What was built, for gpu_check's record: the commit and the toolkit.
echo "$(git -C "$root" log -1 --format='%H' 2>/dev/null || echo unknown) $(nvcc --version | sed -n 's/.*release \([^,]*\).*/nvcc \1/p')" >"$out/built"
echo "gpu_bundle: $out ($(du -sh "$out" | cut -f1)): $(ls "$out/lib" | tr '\n' ' ')"
