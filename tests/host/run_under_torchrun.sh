#!/usr/bin/env bash
# Runs a 2-rank job config under torchrun (from the project venv), as users start ranks on a
# cluster: the host must join the ranks torchrun started, finish with status 0 and print the
# generated tokens. A free port below the ephemeral range keeps parallel tests apart.
# usage: run_under_torchrun.sh VENV_PYTHON HOST CONFIG
set -u
python=$1 host=$2 config=$3
torchrun="$(dirname "$python")/torchrun"
port=$("$python" - <<'PY'
import random, socket
for _ in range(1000):
    port = random.randrange(20000, 32000)
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            continue
    print(port)
    break
PY
)
output=$("$torchrun" --nnodes 1 --nproc-per-node 2 --master-addr 127.0.0.1 --master-port "$port" \
  --no-python "$host" run "$config" 2>&1)
status=$?
if [ "$status" != 0 ] || ! grep -q "generated\[0\]: [0-9]" <<<"$output"; then
  printf '%s\n' "$output"
  echo "run_under_torchrun: exit status $status; expected 0 and generated tokens"
  exit 1
fi
grep "generated\[" <<<"$output"
