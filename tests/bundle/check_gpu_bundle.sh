#!/bin/bash
# The GPU check's bundle (bench/gpu_bundle.sh) holds what bench/gpu_check.sh
# runs on a GPU machine that cannot build levers, and gpu_check.sh runs it:
# here, without a GPU, as far as the GPU tests (which then skip).
#   check_gpu_bundle.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# Its own build (portable code), kept in the build directory between runs, for
# sm_90 (the test build, -Dgpu_archs=auto, compiles sm_80 where no GPU is): a
# bundle for one architecture, as a GPU machine gets it, whose size is checked
# below. Each architecture adds ~15 MiB of device code and minutes of nvcc.
GPU_ARCHS=90 LEVERS_BUNDLE_BUILD=$build/gpu-bundle-build bash "$src/bench/gpu_bundle.sh" "$out/bundle"
for program in build/recipe build/liblevers.so build/liblevers_recipes.so build/liblevers_cuda.so build/tests/levers_gpu_tests \
               build/tests/user_recipes build/bench/bench_gpt_cuda build/bench/bench_ops_cuda build/bench/bench_ops; do
    [ -x "$out/bundle/$program" ] || { echo "the bundle lacks $program"; exit 1; }
done
# glibc, cuBLAS and NCCL are the GPU machine's own, OpenBLAS is left out; fmt
# is not on such machines.
for lib in libc.so.6 libm.so.6 libcublas.so.13 libcublasLt.so.13 libnccl.so.2 libopenblas.so.0; do
    [ ! -e "$out/bundle/lib/$lib" ] || { echo "the bundle carries $lib, which must be the machine's own"; exit 1; }
done
[ -e "$out/bundle/lib/libfmt.so.9" ] || { echo "the bundle lacks libfmt"; exit 1; }
# Small enough to travel with a checkout (about 2 MiB) where transfers are
# capped at 64 MiB (Fashion-MNIST is 30 of it).
size=$(du -sm "$out/bundle" | cut -f1)
[ "$size" -le 60 ] || { echo "the bundle is $size MiB"; exit 1; }
if grep -q -- '-march=native' "$build/gpu-bundle-build/compile_commands.json"; then
    echo "the bundle was built for this processor only (-march=native)"; exit 1
fi
# Every library the programs need resolves from the bundle or the system.
LD_LIBRARY_PATH=$out/bundle/build:$out/bundle/lib ldd "$out/bundle/build/recipe" "$out/bundle/build/liblevers_cuda.so" \
    "$out/bundle/build/tests/levers_gpu_tests" "$out/bundle/build/tests/user_recipes" |
    grep 'not found' && { echo "the bundle's programs miss libraries"; exit 1; }
check=$(bash "$src/bench/gpu_check.sh" "$out/bundle" 2>&1) || { echo "$check"; exit 1; }
echo "$check" | tail -3
echo "$check" | grep -q 'every GPU test passed' || { echo "gpu_check.sh did not run the bundle's GPU tests"; exit 1; }
# A folder that is no bundle is refused by name, before anything runs.
refusal=$(bash "$src/bench/gpu_check.sh" "$out" 2>&1) && { echo "gpu_check.sh ran a folder that is no bundle"; exit 1; }
echo "$refusal" | grep -q "is not a bundle from bench/gpu_bundle.sh" || { echo "unclear refusal: $refusal"; exit 1; }
