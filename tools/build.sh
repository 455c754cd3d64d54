#!/usr/bin/env bash
# Configures and builds shardformer into build/ (Ninja, ccache): the SDK, host, plugins, the
# tiny GPT-2 checkpoint and, unless SHARDFORMER_BUILD_TESTS=OFF, the tests and HF references.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build=${SHARDFORMER_BUILD_DIR:-build}
jobs=${SHARDFORMER_JOBS:-$(nproc)}
if [ ! -f "$build/build.ninja" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=${CMAKE_BUILD_TYPE:-RelWithDebInfo} \
    -DSHARDFORMER_BUILD_TESTS=${SHARDFORMER_BUILD_TESTS:-ON}
fi
cmake --build "$build" -j "$jobs"
