#!/usr/bin/env bash
# Runs a command and checks both its exit status and its output, so that a test expecting a
# failure cannot pass on a crash that happens to print the message.
# usage: expect_run.sh EXIT_STATUS REGEX COMMAND [ARG...]
# REGEX: grep -E over stdout and stderr as one text ("." also matches a newline).
set -u
expected=$1 regex=$2
shift 2
output=$("$@" 2>&1)
status=$?
if [ "$status" != "$expected" ] || ! grep -Ezq -- "$regex" <<<"$output"; then
  printf '%s\n' "$output"
  echo "expect_run: exit status $status (expected $expected); output matches /$regex/: $(grep -Ezq -- "$regex" <<<"$output" && echo yes || echo no)"
  exit 1
fi
