#!/usr/bin/env bash
# Interop: spark-bench's client (transport + backend + exchange) against llmsim, an
# independent Rust LLM API simulator: chat completions SSE and the Responses API over SSE and
# WebSocket. Bounded: the install (`llmsim_bin`, .ci/lib.sh) is cached in target/llmsim,
# the tests time out.
source "$(dirname "$0")/../lib.sh"

LLMSIM=$(llmsim_bin)

PORT=$(free_port)
LOG=$(mktemp)
CONFIG=$(mktemp)
on_exit "rm -f '$LOG' '$CONFIG'"
# llmsim's "fast" latency (10 ms to the first token, 1 ms a token): the same wire as its
# default model-like pace (~0.5 s, then ~25 ms a token, ~40 s of CI for these nine turns).
printf '[latency]\nprofile = "fast"\n' >"$CONFIG"
start_bg "$LOG" "$LLMSIM" serve --host 127.0.0.1 --port "$PORT" --config "$CONFIG"
if ! wait_port "$PORT" "$BG_PID" 10; then
  cat "$LOG"
  echo "llmsim did not start" >&2
  exit 1
fi
SPARK_BENCH_LLMSIM_URL="http://127.0.0.1:$PORT/openai/v1" \
  timeout 300 cargo test --quiet --test integration client_interop -- --ignored --test-threads 1 --nocapture
