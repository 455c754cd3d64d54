#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang++ (ASan, UBSan) into build-fuzz/ and runs
# each for RUNS executions from its seed corpus, then prints executions, exec/s and coverage.
# Usage: tools/fuzz.sh [-r RUNS] [-t SECONDS] [-f] [TARGET...]   (docs/reliability.md, "Fuzzing")
#   -r RUNS     executions per target (default 1000000)
#   -t SECONDS  also stop a target after this long (default: no limit)
#   -f          fresh: start from the seed corpus alone, not from what earlier runs added
#   TARGET      safetensors checkpoint_index hf_config job_config image (default: all)
# Environment: SHARDFORMER_FUZZ_BUILD_DIR (default build-fuzz), SHARDFORMER_JOBS (build jobs),
# SHARDFORMER_FUZZ_CXX (default clang++). Crashes are saved under build-fuzz/artifacts/TARGET/,
# new inputs under build-fuzz/corpus/TARGET/ (the seed corpus in tests/fuzz/corpus stays as it is).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

runs=1000000
max_time=0
fresh=0
while getopts "r:t:fh" opt; do
  case $opt in
    r) runs=$OPTARG ;;
    t) max_time=$OPTARG ;;
    f) fresh=1 ;;
    h) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
all_targets=(safetensors checkpoint_index hf_config job_config image)
targets=("$@")
((${#targets[@]})) || targets=("${all_targets[@]}")
for t in "${targets[@]}"; do
  if [[ " ${all_targets[*]} " != *" $t "* ]]; then
    echo "fuzz: unknown target '$t' (${all_targets[*]})" >&2
    exit 2
  fi
done

cxx=${SHARDFORMER_FUZZ_CXX:-clang++}
if ! command -v "$cxx" >/dev/null; then
  echo "fuzz: $cxx not found (tools/setup.sh installs clang and libFuzzer)" >&2
  exit 1
fi
build=${SHARDFORMER_FUZZ_BUILD_DIR:-build-fuzz}
jobs=${SHARDFORMER_JOBS:-$(nproc)}
if [ ! -f "$build/build.ninja" ]; then
  cmake -S . -B "$build" -G Ninja -DSHARDFORMER_FUZZ=ON -DCMAKE_CXX_COMPILER="$cxx" \
    -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="-g -O1"
fi
cmake --build "$build" -j "$jobs" --target $(printf 'fuzz_%s ' "${targets[@]}")

# Leaks and every sanitizer report are fatal; libFuzzer itself reports timeouts (-timeout) and
# allocations over -malloc_limit_mb (default: the 2 GB RSS limit) as crashes.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

row='%-17s %-6s %10s %9s %13s %9s %15s %6s'
# Each target runs on one core; up to $jobs of them run at once (one at a time took the 2-core
# CI machine's second core idle for the whole step).
run_target() {  # run_target TARGET: runs it and leaves its exit status in $build/fuzz_TARGET.rc
  local t=$1 corpus="$build/corpus/$1" artifacts="$build/artifacts/$1/" log="$build/fuzz_$1.log"
  ((fresh)) && rm -rf "$corpus"
  mkdir -p "$corpus" "$artifacts"
  echo "fuzz: $t: $runs runs (log: $log)"
  local rc=0
  "$build/tests/fuzz/fuzz_$t" -runs="$runs" -max_total_time="$max_time" -seed=1 -timeout=10 \
    -max_len=8192 -print_final_stats=1 -dict="tests/fuzz/$t.dict" -artifact_prefix="$artifacts" \
    "$corpus" "tests/fuzz/corpus/$t" >"$log" 2>&1 || rc=$?
  echo $rc >"$build/fuzz_$t.rc"
}
rm -f "$build"/fuzz_*.rc
for t in "${targets[@]}"; do
  while (($(jobs -rp | wc -l) >= jobs)); do wait -n || true; done
  run_target "$t" &
done
wait

summary=()
status=0
for t in "${targets[@]}"; do
  log="$build/fuzz_$t.log"
  rc=$(cat "$build/fuzz_$t.rc" 2>/dev/null || echo 1)
  final_stat() { sed -n "s/^stat::$1: *//p" "$log" | tail -1; }
  seeds=$(find "tests/fuzz/corpus/$t" -type f | wc -l)
  # The last status line: "#N DONE cov: C ft: F corp: U/B ...".
  done_line=$(grep -E '^#[0-9]+[[:space:]]+(DONE|INITED)' "$log" | tail -1 || true)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$done_line")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$done_line")
  corp=$(sed -n 's/.* corp: \([0-9]*\)\/.*/\1/p' <<<"$done_line")
  inited=$(grep -E '^#[0-9]+[[:space:]]+INITED' "$log" | tail -1 || true)
  cov0=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$inited")
  if [ "$rc" -ne 0 ]; then
    status=1
    echo "fuzz: $t FAILED (exit $rc); the end of $log:" >&2
    tail -40 "$log" >&2
  fi
  result=ok
  [ "$rc" -eq 0 ] || result=FAIL
  summary+=("$(printf "$row" "$t" "$result" "$(final_stat number_of_executed_units)" \
    "$(final_stat average_exec_per_sec)" "${cov0:-?} -> ${cov:-?}" "${ft:-?}" \
    "$seeds -> ${corp:-?}" "$(final_stat peak_rss_mb)")")
done

printf "\n$row\n" target result execs exec/s "cov (edges)" features "corpus (units)" rss_mb
printf '%s\n' "${summary[@]}"
exit $status
