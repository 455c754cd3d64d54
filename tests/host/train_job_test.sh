#!/usr/bin/env bash
# The train job end to end, against torch (tools/train_reference.py's run): 4 ranks (dp 2 x tp 2,
# ZeRO-1) train, save at step 10 and lose a rank to SIGKILL after step 13; the job ends with
# status 137 and leaves the step-10 save whole. The same run continued at pp 2 resumes from it
# and finishes. Every step's loss and learning rate in the metrics file equal torch's, and HF
# loads the final save with torch's weights and Adam moments. A third run has nothing to do.
# usage: train_job_test.sh HOST PYTHON MODELS_DIR TEST_DATA_DIR TOOLS_DIR WORK_DIR
set -u
host=$1 python=$2 models=$3 data=$4 tools=$5 work=$6
rm -rf "$work" && mkdir -p "$work"
fail() { echo "train_job_test: $*"; exit 1; }

write_config() {  # write_config FILE PARALLEL_AND_PIPELINE_TOML MICRO_BATCH_TOML
  cat >"$1" <<TOML
[model]
path = "$models/tiny-gpt2-train"
$2
[job]
mode = "train"
[data]
path = "$data/training/train.bin"
seq_len = 32
seed = 1234
[train]
steps = 20
global_batch_size = 8
$3
max_grad_norm = 1.0
log_every = 1
metrics_file = "$work/metrics.jsonl"
[optimizer]
lr = 1e-3
betas = [0.9, 0.95]
eps = 1e-8
weight_decay = 0.1
schedule = "cosine"
warmup_steps = 5
[checkpoint]
dir = "$work/run"
save_every = 10
TOML
}
write_config "$work/dp2_tp2.toml" $'[parallel]\ndp_size = 2\ntp_size = 2' $'micro_batch_size = 2\nzero_stage = 1'
write_config "$work/pp2.toml" $'[parallel]\npp_size = 2\n[pipeline]\nnum_microbatches = 4' ""

output=$(SHARDFORMER_TEST_FAIL_RANK=1 SHARDFORMER_TEST_FAIL_STEP=13 SHARDFORMER_TEST_FAIL_MODE=kill \
  "$host" run "$work/dp2_tp2.toml" 2>&1)
status=$?
printf '%s\n' "$output" | grep -E "^step|saved|job failed"
[ "$status" = 137 ] || { printf '%s\n' "$output" | tail -40; fail "the killed run exited with $status, expected 137"; }
[ -f "$work/run/step-10/training_state/trainer_state.json" ] || fail "no whole step-10 save"
ls "$work/run" | grep -qv '^step-10$' && fail "more than step-10 in $work/run: $(ls "$work/run")"

output=$("$host" run "$work/pp2.toml" 2>&1)
status=$?
printf '%s\n' "$output" | grep -E "^step|saved|continuing"
[ "$status" = 0 ] || { printf '%s\n' "$output"; fail "the resumed run exited with $status"; }
grep -q "continuing from $work/run/step-10 at step 10" <<<"$output" || fail "it did not resume"

"$python" - "$work/metrics.jsonl" "$data/training/reference.safetensors" <<'PY' || exit 1
import json, sys
from safetensors.torch import load_file
ref = load_file(sys.argv[2])
steps = {}
for line in open(sys.argv[1]):
    record = json.loads(line)
    if "loss" in record:
        steps[record["step"]] = record  # a resumed run's record replaces the lost run's
bad = []
for s in range(20):
    r = steps.get(s + 1)
    if r is None:
        bad.append(f"step {s + 1}: no record")
        continue
    if abs(r["loss"] - ref["losses"][s].item()) > 1e-5 or abs(r["lr"] - ref["lrs"][s].item()) > 1e-15:
        bad.append(f"step {s + 1}: loss {r['loss']} lr {r['lr']}, torch "
                   f"{ref['losses'][s].item()} {ref['lrs'][s].item()}")
worst = max(abs(steps[s + 1]["loss"] - ref["losses"][s].item()) for s in range(20) if s + 1 in steps)
print("\n".join(bad) or f"metrics: 20 steps equal torch's (max |loss diff| {worst:.3g})")
sys.exit(1 if bad else 0)
PY
"$python" "$tools/check_training_checkpoint.py" "$work/run/step-20" \
  "$data/training/reference.safetensors" --steps 20 || fail "HF does not read back torch's state"

output=$("$host" run "$work/pp2.toml" 2>&1)
grep -q "nothing to do" <<<"$output" || { printf '%s\n' "$output"; fail "a finished run trained again"; }
rm -rf "$work"
echo "train_job_test: OK"
