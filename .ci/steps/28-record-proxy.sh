#!/usr/bin/env bash
# `spark-bench record` with real, independent peers: the official `openai` SDK drives a
# multi-turn, tool-calling session through the recording proxy to `spark-bench serve` over
# Responses SSE, the Responses WebSocket mode (`responses.connect()`) and chat completions;
# each recorded scenario is replayed against the simulator and must give the same requests,
# token counts within 1% and think/tool times within 5 ms. Then the same SDK through the
# proxy to llmsim (crates.io): chat completions with scripted tool calls, and Responses over
# SSE and WebSocket (text turns: llmsim makes no tool calls there). A planted key
# (sk-proj-…, in a prompt and in Authorization) must be in no written file.
# The SDK runs with its default options (chat: no stream_options.include_usage), and the
# Responses WebSocket loop also with two parallel tool calls in one response. With a
# llama-server (step 25 builds it, so this step is numbered after it; or $LLAMA_SERVER and $LLAMA_MODEL): a 3-turn chat recorded
# through the proxy and replayed against llama-server itself (`--target as-recorded`).
# Reuses step 10's venv and step 20's llmsim install ($SPARK_BENCH_PY_VENV and
# $SPARK_BENCH_LLMSIM point elsewhere); bounded by timeouts (~60 s warm).
source "$(dirname "$0")/../lib.sh"

VENV=${SPARK_BENCH_PY_VENV:-target/py-venv}
OPENAI=$(pin openai)
venv_with "$VENV" "$OPENAI"
LLMSIM=$(llmsim_bin)
cargo build --quiet
BIN=target/debug/spark-bench
WORK=$(mktemp -d)
on_exit "rm -rf '$WORK'"

start_server() { # LOG PORT COMMAND... ; waits for PORT
  local log=$1 port=$2
  shift 2
  start_bg "$log" "$@"
  wait_port "$port" "$BG_PID" 20
}

# record NAME UPSTREAM MODE [SDK flags...]: one SDK session through a fresh proxy.
record() {
  local name=$1 upstream=$2 mode=$3
  shift 3
  local port dir pid
  port=$(free_port)
  dir="$WORK/$name"
  mkdir -p "$dir"
  "$BIN" record --upstream "$upstream" --listen "127.0.0.1:$port" --out "$dir/recorded.toml" \
    --results "$dir/results" >"$dir/record.log" 2>&1 &
  pid=$!
  wait_port "$port" "$pid" 20
  if ! timeout 60 "$VENV/bin/python" scripts/record_openai_session.py "http://127.0.0.1:$port/v1" "$mode" "$@"; then
    kill -INT "$pid"
    cat "$dir/record.log"
    echo "$name: the SDK session through the proxy failed" >&2
    exit 1
  fi
  kill -INT "$pid"
  timeout 30 tail --pid="$pid" -f /dev/null
  cat "$dir/record.log"
  if grep -rl "sk-proj-\|PLANTEDfakeKEY" "$dir"; then
    echo "$name: the planted key was written (files above)" >&2
    exit 1
  fi
  grep -q '^\[\[turns\]\]' "$dir/recorded.toml"
}

# replay NAME [run flags...]: the recorded scenario (default: against the simulator),
# compared with the recording: requests, tokens within 1%, think/tool times within 5 ms.
replay() {
  local dir="$WORK/$1"
  shift
  rm -rf "$dir/replay"
  OPENAI_API_KEY=unused timeout 120 "$BIN" run "$dir/recorded.toml" --out "$dir/replay" "$@" >"$dir/run.log" 2>&1 || {
    cat "$dir/run.log"
    exit 1
  }
  python3 scripts/replay_check.py "$dir"/results/* "$dir"/replay/*
}

SIM_PORT=$(free_port)
start_server "$WORK/sim.log" "$SIM_PORT" "$BIN" serve --profile fast --listen "127.0.0.1:$SIM_PORT"
SIM="http://127.0.0.1:$SIM_PORT/v1"
for mode in sse ws; do
  record "sim-$mode" "$SIM" "$mode"
  replay "sim-$mode"
done
# Chat with include_usage (the simulator's counts on both sides), and with the SDK's default
# options: no usage in the stream, the output lengths still written (from the stream).
record "sim-chat" "$SIM" chat --include-usage
replay "sim-chat"
record "sim-chat-default" "$SIM" chat
test "$(grep -c '^max_output_tokens = ' "$WORK/sim-chat-default/recorded.toml")" -eq 3
# A Responses WebSocket agent loop whose first turn makes two parallel calls in one response.
record "sim-ws-parallel" "$SIM" ws --parallel
grep -q 'parallel = true' "$WORK/sim-ws-parallel/recorded.toml"
replay "sim-ws-parallel"

# llama-server: a 3-turn chat, the SDK's default options (no include_usage), replayed
# against llama-server itself: output lengths from llama.cpp's `timings`, the recorded
# answers as history, no cache salt.
LLAMA_SERVER=${LLAMA_SERVER:-target/llama/llama-server}
LLAMA_MODEL=${LLAMA_MODEL:-target/llama/tiny.gguf}
if [ -x "$LLAMA_SERVER" ] && [ -f "$LLAMA_MODEL" ]; then
  LP=$(free_port)
  start_bg "$WORK/llama.log" "$LLAMA_SERVER" -m "$LLAMA_MODEL" --host 127.0.0.1 --port "$LP" \
    --parallel 4 --ctx-size 8192 --threads 1 --ignore-eos
  wait_http "http://127.0.0.1:$LP/health" "$BG_PID" 60
  record "llama-chat" "http://127.0.0.1:$LP/v1" chat --no-tools
  grep -q 'llamacpp-timings' "$WORK"/llama-chat/results/*/requests.csv
  replay "llama-chat" --target as-recorded
else
  echo "no llama-server at $LLAMA_SERVER (step 25 builds it): the llama-server recording is skipped"
fi

# llmsim: a script of two tool calls and two answers for chat completions.
cat >"$WORK/script.json" <<'EOF'
{"turns": [
 {"type": "tool_calls", "calls": [{"name": "read_file", "arguments": {"path": "tests/test_totals.py"}}]},
 {"type": "tool_calls", "calls": [{"name": "run_tests", "arguments": {"selector": "tests/test_totals.py"}}]},
 {"type": "assistant", "text": "Fixed: totals round half-even with Decimal.quantize; the tests pass."},
 {"type": "assistant", "text": "fix(totals): round half-even with Decimal.quantize"}
], "on_exhausted": "repeat_last"}
EOF
# llmsim's "fast" latency (10 ms to the first token, 1 ms between tokens): the wire is the
# same as with the latency it gives the SDK's model name `sim` (its GPT-5 profile: ~0.6 s,
# then ~40 ms a token), which made these three recordings most of this step's time.
printf '[latency]\nprofile = "fast"\n' >"$WORK/llmsim-fast.toml"
printf '[latency]\nprofile = "fast"\n[response]\nscript_path = "%s"\n' "$WORK/script.json" >"$WORK/llmsim.toml"
P1=$(free_port)
start_server "$WORK/llmsim-script.log" "$P1" "$LLMSIM" serve --host 127.0.0.1 --port "$P1" --config "$WORK/llmsim.toml"
record "llmsim-chat" "http://127.0.0.1:$P1/openai/v1" chat
grep -q 'name = "run_tests"' "$WORK/llmsim-chat/recorded.toml"
P2=$(free_port)
start_server "$WORK/llmsim.log" "$P2" "$LLMSIM" serve --host 127.0.0.1 --port "$P2" --config "$WORK/llmsim-fast.toml"
record "llmsim-sse" "http://127.0.0.1:$P2/openai/v1" sse --no-tools
record "llmsim-ws" "http://127.0.0.1:$P2/openai/v1" ws --no-tools --no-warmup
echo "record proxy OK"
