#!/usr/bin/env bash
# Configures and builds shardformer into build/ (Ninja, ccache): the SDK, host, plugins, the
# tiny GPT-2 checkpoint and, unless SHARDFORMER_BUILD_TESTS=OFF, the tests and HF references.
# --sanitize: the same with AddressSanitizer + UBSan, into build-asan/ (docs/reliability.md).
# Further arguments are build targets (default: all).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build=${SHARDFORMER_BUILD_DIR:-build}
sanitize=OFF
targets=()
for arg in "$@"; do
  case $arg in
    --sanitize) sanitize=ON; build=${SHARDFORMER_BUILD_DIR:-build-asan} ;;
    -*) echo "tools/build.sh: unknown option $arg (known: --sanitize)" >&2; exit 2 ;;
    *) targets+=(--target "$arg") ;;
  esac
done
jobs=${SHARDFORMER_JOBS:-$(nproc)}
reuse=()
if [ "$sanitize" = ON ] && [ -d build/test-data ] && [ -d build/models ]; then
  # The normal build's checkpoints and HF references: the same files, made once.
  reuse=(-DSHARDFORMER_REUSE_DATA_FROM="$root/build")
fi
if [ ! -f "$build/build.ninja" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=${CMAKE_BUILD_TYPE:-RelWithDebInfo} \
    -DSHARDFORMER_BUILD_TESTS=${SHARDFORMER_BUILD_TESTS:-ON} -DSHARDFORMER_SANITIZE=$sanitize \
    "${reuse[@]}"
fi
cmake --build "$build" -j "$jobs" "${targets[@]}"
