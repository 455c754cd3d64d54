#!/usr/bin/env bash
# Configures and builds shardformer into build/ (Ninja, ccache): the SDK, host, plugins, the
# tiny GPT-2 checkpoint and, unless SHARDFORMER_BUILD_TESTS=OFF, the tests and HF references.
# --main: only what the default job needs (the host and the Llama plugin, for SmolLM2), in a
#         tree configured without tests unless it already has them: a newcomer's first build.
# --sanitize: the same with AddressSanitizer + UBSan, into build-asan/ (docs/reliability.md).
# A new build folder is compiled by clang++ where tools/setup.sh installed it (SHARDFORMER_CXX,
# SHARDFORMER_SANITIZE_CXX for --sanitize): g++ loads the precompiled LibTorch header (600 MB)
# in about 4.3 s per translation unit, clang++ its own in 0.5 s, and the cold build took 644
# CPU-seconds with clang++ against 942 with g++ (docs/benchmarks.md, "Compilers").
# Further arguments are build targets (default: all).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build=${SHARDFORMER_BUILD_DIR:-build}
sanitize=OFF
main_only=OFF
targets=()
for arg in "$@"; do
  case $arg in
    --sanitize) sanitize=ON; build=${SHARDFORMER_BUILD_DIR:-build-asan} ;;
    --main) main_only=ON; targets+=(--target shardformer-host llama) ;;
    -*) echo "tools/build.sh: unknown option $arg (known: --main, --sanitize)" >&2; exit 2 ;;
    *) targets+=(--target "$arg") ;;
  esac
done
jobs=${SHARDFORMER_JOBS:-$(nproc)}
reuse=()
if [ "$sanitize" = ON ] && [ -d build/test-data ] && [ -d build/models ]; then
  # The normal build's checkpoints and HF references: the same files, made once.
  reuse=(-DSHARDFORMER_REUSE_DATA_FROM="$root/build")
fi
# Tests are built unless SHARDFORMER_BUILD_TESTS=OFF; --main leaves a tree that has them as it is.
tests=${SHARDFORMER_BUILD_TESTS:-ON}
configured=$(sed -n 's/^SHARDFORMER_BUILD_TESTS:BOOL=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
if [ "$main_only" = ON ]; then tests=${SHARDFORMER_BUILD_TESTS:-${configured:-OFF}}; fi
compiler=()
if [ ! -f "$build/CMakeCache.txt" ]; then
  cxx=${SHARDFORMER_CXX:-}
  [ "$sanitize" = ON ] && cxx=${SHARDFORMER_SANITIZE_CXX:-clang++}
  [ -z "$cxx" ] && command -v clang++ >/dev/null && cxx=clang++
  [ -n "$cxx" ] && compiler=(-DCMAKE_CXX_COMPILER="$cxx")
fi
if [ ! -f "$build/build.ninja" ] || [ "$configured" != "$tests" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=${CMAKE_BUILD_TYPE:-RelWithDebInfo} \
    -DSHARDFORMER_BUILD_TESTS="$tests" -DSHARDFORMER_SANITIZE=$sanitize "${reuse[@]}" "${compiler[@]}"
fi
cmake --build "$build" -j "$jobs" "${targets[@]}"
