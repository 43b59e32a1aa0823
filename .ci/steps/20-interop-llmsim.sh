#!/usr/bin/env bash
# Interop: spark-bench's client (transport + backend + exchange) against llmsim, an
# independent Rust LLM API simulator: chat completions SSE and the Responses API over SSE and
# WebSocket. Bounded: the install is cached in target/llmsim, the tests time out.
set -euo pipefail
cd "$(dirname "$0")/../.."

LLMSIM_VERSION="0.6.0"
ROOT=target/llmsim
if ! "$ROOT/bin/llmsim" --version 2>/dev/null | grep -q "$LLMSIM_VERSION"; then
  timeout 900 cargo install --quiet --locked llmsim --version "$LLMSIM_VERSION" --root "$ROOT"
fi

# A free port: bind :0 in Python, release it, hand it to llmsim.
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
LOG=$(mktemp)
"$ROOT/bin/llmsim" serve --host 127.0.0.1 --port "$PORT" >"$LOG" 2>&1 &
PID=$!
trap 'kill "$PID" 2>/dev/null || true; rm -f "$LOG"' EXIT
for _ in $(seq 1 100); do
  if python3 -c "import socket; socket.create_connection(('127.0.0.1',$PORT),0.2)" 2>/dev/null; then break; fi
  if ! kill -0 "$PID" 2>/dev/null; then cat "$LOG"; echo "llmsim exited" >&2; exit 1; fi
  sleep 0.1
done
SPARK_BENCH_LLMSIM_URL="http://127.0.0.1:$PORT/openai/v1" \
  timeout 300 cargo test --quiet --test integration client_interop -- --ignored --test-threads 1 --nocapture
