#!/usr/bin/env bash
# GPU checks: builds the host, the family plugins, the CUDA module and bench/speed
# against the CUDA torch of this machine's Python, then runs tools/gpu_check.py (the host on the
# GPU against HF on the GPU, and timings). Arguments go to gpu_check.py.
#   PYTHON  the Python whose torch to build against (default python3)
#   DEPS    a folder of Debian .deb files (Boost, spdlog, fmt, toml++, nlohmann-json, Gloo) to
#           unpack and build with, for a GPU machine without them and without a package registry
#   BUILD   the build folder (default build-gpu)
# `tools/gpu_check.sh --download-debs DIR` fills DIR with those packages on this Debian machine
# (the device tool's GPU machines have no package registry: carry DIR there and set DEPS=DIR).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
if [ "${1:-}" = --download-debs ]; then
  mkdir -p "$2"
  cd "$2"
  apt-get download libboost1.74-dev libboost-program-options1.74-dev \
    libboost-program-options1.74.0 libspdlog-dev libspdlog1.10 libfmt-dev libfmt9 \
    libtomlplusplus-dev libtomlplusplus3 nlohmann-json3-dev libgloo-dev libgloo0
  exit 0
fi
python=$(command -v "${PYTHON:-python3}")
build=${BUILD:-$root/build-gpu}
prefix_args=()
if [ -n "${DEPS:-}" ]; then
  prefix=/tmp/shardformer-deps
  mkdir -p "$prefix"
  for f in "$DEPS"/*.deb; do dpkg -x "$f" "$prefix"; done
  export CPATH="$prefix/usr/include${CPATH:+:$CPATH}"
  prefix_args=(-DCMAKE_PREFIX_PATH="$prefix/usr")
fi
nvcc=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
start=$(date +%s)
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSHARDFORMER_BUILD_TESTS=OFF \
  -DSHARDFORMER_PYTHON="$python" -DCMAKE_CUDA_COMPILER="$nvcc" "${prefix_args[@]}"
ninja -C "$build" -k 0 shardformer-host gpt2 llama opt bloom bert shardformer_cuda speed || echo "gpu_check: some targets failed to build"
echo "gpu_check: built in $(($(date +%s) - start)) s"
"$python" "$root/tools/gpu_check.py" --build "$build" "$@"
