#!/usr/bin/env bash
# The train job's evaluation and save pruning: 20 steps with 10% of the samples held out,
# evaluated every 5 steps and saved every 5 with checkpoint.keep_last = 2. The metrics file holds
# an eval_loss at steps 5, 10, 15 and 20 (finite, the last below the first step's training loss)
# and only the step-15 and step-20 saves are left.
# usage: train_eval_keep_test.sh HOST PYTHON MODELS_DIR TEST_DATA_DIR WORK_DIR
set -u
host=$1 python=$2 models=$3 data=$4 work=$5
rm -rf "$work" && mkdir -p "$work"
fail() { echo "train_eval_keep_test: $*"; exit 1; }
cat >"$work/job.toml" <<TOML
[model]
path = "$models/tiny-gpt2-train"
[job]
mode = "train"
[data]
path = "$data/training/train.bin"
seq_len = 32
seed = 1234
eval_fraction = 0.1
[train]
steps = 20
global_batch_size = 8
log_every = 5
eval_every = 5
metrics_file = "$work/metrics.jsonl"
[optimizer]
lr = 1e-3
[checkpoint]
dir = "$work/run"
save_every = 5
keep_last = 2
TOML
output=$("$host" run "$work/job.toml" 2>&1) || { printf '%s\n' "$output" | tail -30; fail "the job failed"; }
printf '%s\n' "$output" | grep -E "^eval|deleting|saved"
saves=$(ls "$work/run" | tr '\n' ' ')
[ "$saves" = "step-15 step-20 " ] || fail "saves left: '$saves', expected step-15 and step-20"
"$python" - "$work/metrics.jsonl" <<'PY' || exit 1
import json, math, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
evals = [r for r in rows if "eval_loss" in r]
train = [r for r in rows if "loss" in r]
steps = [r["step"] for r in evals]
assert steps == [5, 10, 15, 20], f"eval steps {steps}"
assert all(math.isfinite(r["eval_loss"]) for r in evals), evals
assert evals[-1]["eval_loss"] < train[0]["loss"], (evals[-1], train[0])
print(f"train_eval_keep_test: eval losses {[round(r['eval_loss'], 4) for r in evals]}, "
      f"first training loss {train[0]['loss']:.4f}; saves step-15, step-20")
PY
