#!/usr/bin/env bash
# Builds llama.cpp's batched-bench from the llama-cpp-python sdist on PyPI (llama.cpp itself is
# no Debian or PyPI binary) and converts a HF model folder to an f32 GGUF with llama.cpp's own
# converter, for bench/bench_chat.py's side-by-side decode figures. Benchmark-only: CI never runs it.
#   tools/setup_llama_cpp.sh [MODEL_FOLDER]   (default: build/models/SmolLM2-135M-Instruct)
# Prints the two paths it made: the batched-bench binary and the GGUF file.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
version=0.3.36  # llama-cpp-python; its vendor/llama.cpp is the llama.cpp measured
cache=${XDG_CACHE_HOME:-$HOME/.cache}/shardformer
src=$cache/llama_cpp_python-$version/vendor/llama.cpp
model=${1:-$root/build/models/SmolLM2-135M-Instruct}
python=$root/.venv/bin/python
mkdir -p "$cache"
if [ ! -f "$src/CMakeLists.txt" ]; then
  "$python" -m pip download --no-deps --no-binary llama-cpp-python "llama-cpp-python==$version" \
    -d "$cache" >&2
  tar xzf "$cache/llama_cpp_python-$version.tar.gz" -C "$cache"
fi
# The build is for this machine's instruction set (GGML_NATIVE): a home shared with a CPU of
# other features builds its own.
build=$src/build-$(grep -m1 '^flags' /proc/cpuinfo | md5sum | cut -c1-8)
bench=$build/bin/llama-batched-bench
if [ ! -x "$bench" ]; then
  # GGML_NATIVE: the machine's own instruction set, as a user building llama.cpp gets it.
  cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON \
    -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF \
    -DLLAMA_BUILD_TOOLS=ON >&2
  cmake --build "$build" -j "$(nproc)" --target llama-batched-bench >&2
fi
gguf=$cache/$(basename "$model")-f32.gguf
if [ ! -f "$gguf" ] || [ "$model/model.safetensors" -nt "$gguf" ]; then
  # The converter's own gguf-py, as llama.cpp's README runs it.
  PYTHONPATH=$src/gguf-py "$python" "$src/convert_hf_to_gguf.py" "$model" --outtype f32 \
    --outfile "$gguf.tmp" >&2
  mv "$gguf.tmp" "$gguf"
fi
echo "$bench"
echo "$gguf"
