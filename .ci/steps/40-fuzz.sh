#!/usr/bin/env bash
# Fuzzing, short bounded pass: every parser of bytes we did not write (SSE, WebSocket frames
# and events, chat/Responses events, the HTTP byte log, scenarios, --link, durations, the
# results readers: requests.csv rows, history.jsonl, manifest.json) for
# 5 s each on two test threads, after replaying the corpus in fuzz/corpus/. The test binary is
# the one `cargo test` already built (warm: ~25 s; cold adds one test-binary build).
# The long run: fuzz/README.md.
source "$(dirname "$0")/../lib.sh"

LOG=$(mktemp)
on_exit "rm -f '$LOG'"
rc=0
SPARK_FUZZ_SECS=5 timeout 120 cargo test --locked --test fuzz -- --nocapture --test-threads=2 \
  >"$LOG" 2>&1 || rc=$?
grep -E '^fuzz |test result|panicked|FAILED' "$LOG" || true
if [ "$rc" -ne 0 ]; then
  tail -n 40 "$LOG"
  echo "fuzz pass failed (exit $rc); a crashing input is saved under fuzz/crashes/"
  exit 1
fi
