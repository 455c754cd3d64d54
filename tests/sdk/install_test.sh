#!/usr/bin/env bash
# Installs the SDK from a build tree into a temporary prefix, builds the example out-of-tree
# plugin against it with find_package(Shardformer), and checks the host serves its family.
# usage: install_test.sh BUILD_DIR EXAMPLE_DIR WORK_DIR HOST
set -euo pipefail
build=$1 example=$2 work=$3 host=$4
rm -rf "$work"
cmake --install "$build" --prefix "$work/prefix" >/dev/null
test -f "$work/prefix/include/shardformer/plugin.h"
test -f "$work/prefix/lib/cmake/Shardformer/ShardformerConfig.cmake"
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
# Paths relative to the clone (the work folder and the example both lie under it), so that
# ccache serves this compile to a clone at another path as the main build's settings do.
export CCACHE_BASEDIR=$(cd "$example/../../.." && pwd) CCACHE_NOHASHDIR=1
cmake -S "$example" -B "$work/plugin-build" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" \
  "${launcher[@]}" >/dev/null
cmake --build "$work/plugin-build" >/dev/null
listing=$("$host" plugins --plugin-dir "$work/plugin-build")
echo "$listing"
grep -q "^bigram 1.0.0" <<<"$listing"
grep -q "architectures: BigramLM" <<<"$listing"
echo "out-of-tree plugin built against the installed SDK and served by the host"
