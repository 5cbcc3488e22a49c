#!/usr/bin/env bash
# Runs a levers program on the emulated GPU of a build: the sanitized backend
# it opens (LEVERS_CUDA_BACKEND) and the sanitizers' runtimes, preloaded, as
# they must come first.
#
#   on_emulated_gpu.sh BUILD_DIR PROGRAM [ARGS...]
set -euo pipefail
build=$1
shift
cxx=${CXX:-c++}
exec env LD_PRELOAD="$("$cxx" -print-file-name=libasan.so) $("$cxx" -print-file-name=libubsan.so)" \
    LEVERS_CUDA_BACKEND="$build/tests/emulated/liblevers_cuda_emulated.so" \
    ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=0}" "$@"
