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
  python3 python3-venv
  clang libclang-rt-dev  # tools/fuzz.sh: clang++ and libFuzzer / sanitizer runtimes
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
  touch "$venv/.complete"
fi
if [ "$(readlink .venv 2>/dev/null)" != "$venv" ]; then
  rm -rf .venv
  ln -s "$venv" .venv
fi
echo "setup: ok (venv: $venv)"
