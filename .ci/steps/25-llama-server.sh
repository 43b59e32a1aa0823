#!/usr/bin/env bash
# spark-bench against a real llama.cpp server: llama-server built from the llama.cpp sources
# that the llama-cpp-python sdist vendors (scripts/llama/build-llama-server.sh; cached outside
# the clone, so only the first run on a machine builds), serving a tiny random-weight GGUF
# written here (scripts/llama/make_tiny_gguf.py; no model download). Runs the ignored
# `llama_*` integration tests against it. Bounded: the build and the tests time out, the
# server is killed on exit.
source "$(dirname "$0")/../lib.sh"

GGUF_VERSION="0.19.0"
NUMPY_VERSION="2.4.6"
DIR=target/llama

# 1. The server (cold: builds, tens of minutes on 2 cores; warm: links the cached binary).
start=$(date +%s)
timeout 4500 bash scripts/llama/build-llama-server.sh
echo "llama-server ready after $(($(date +%s) - start))s"
"$DIR/llama-server" --version 2>&1 | head -n 2

# 2. The model: a venv with the pinned gguf writer, then a seeded tiny model.
PIP_TIMEOUT=600 venv_with "$DIR/venv" "gguf==$GGUF_VERSION" "numpy==$NUMPY_VERSION"
"$DIR/venv/bin/python" scripts/llama/make_tiny_gguf.py "$DIR/tiny.gguf"

# 3. The server on a free port: 4 slots (the concurrency-4 test runs without queueing),
# 2048 tokens of context per slot, one compute thread (the other core is the client's), and
# --ignore-eos so every answer runs to max_tokens.
PORT=$(free_port)
LOG="$DIR/llama-server.log"
start_bg "$LOG" "$DIR/llama-server" -m "$DIR/tiny.gguf" --host 127.0.0.1 --port "$PORT" \
  --parallel 4 --ctx-size 8192 --threads 1 --ignore-eos
if ! wait_http "http://127.0.0.1:$PORT/health" "$BG_PID" 60; then
  tail -n 40 "$LOG"
  echo "llama-server did not become ready" >&2
  exit 1
fi
echo "llama-server on 127.0.0.1:$PORT (pid $BG_PID)"

# 4. The tests, one at a time (each measures the server alone).
status=0
SPARK_BENCH_LLAMA_URL="http://127.0.0.1:$PORT/v1" \
  timeout 900 cargo test --locked --test integration llama -- --ignored --test-threads 1 --nocapture \
  || status=$?
if [ "$status" -ne 0 ]; then
  echo "--- last lines of the llama-server log ---"
  tail -n 30 "$LOG"
fi
exit "$status"
