#!/usr/bin/env bash
# Regenerates docs/reports/ (README.md, claims.md, a few charts) in one command: runs
# spark-bench on the shipped scenarios against the embedded simulator (sim-gpu and sim-wafer,
# all four transports, the scenarios' modelled rtt=40ms link) and, when there is one, against a
# real llama-server over HTTP/1.1, then puts each of the project's seed claims beside the
# measured figures (scripts/publish_reports.py).
#
#   scripts/publish_reports.sh [--bin PATH] [--llama-url URL] [--no-llama] [--quick]
#                              [--out DIR] [--results DIR]
#
#   --bin PATH       the spark-bench binary to run (default: `cargo build --release` first,
#                    then target/release/spark-bench)
#   --llama-url URL  a running llama-server's OpenAI base URL (http://127.0.0.1:8080/v1).
#                    Without it, a server is started on a free port when
#                    target/llama/llama-server and target/llama/tiny.gguf exist (CI step 25
#                    builds them), and stopped at the end; otherwise the real-server rows are left out
#   --no-llama       no real-server runs
#   --quick          tiny runs (seconds) that check the script works: writes to a temporary
#                    folder unless --out is given, never to docs/reports by default
#   --out DIR        where the pages go (default docs/reports)
#   --results DIR    where the runs' results directories go (default target/publish-reports)
#
# Cost, full mode: ~3-4 minutes (the snake run is ~60 s of modelled GPU decode, the agent
# loop ~75 s, llama-server ~30 s), most of it waiting on the simulator's clock, not CPU.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

BIN=""
LLAMA_URL=""
NO_LLAMA=0
QUICK=0
OUT=""
RESULTS=""
ARGS=("$@")
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) BIN=$2; shift 2 ;;
    --llama-url) LLAMA_URL=$2; shift 2 ;;
    --no-llama) NO_LLAMA=1; shift ;;
    --quick) QUICK=1; shift ;;
    --out) OUT=$2; shift 2 ;;
    --results) RESULTS=$2; shift 2 ;;
    -h|--help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "publish_reports: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

TMP=$(mktemp -d)
LLAMA_PID=""
cleanup() {
  if [ -n "$LLAMA_PID" ]; then
    kill "$LLAMA_PID" 2>/dev/null || true
    wait "$LLAMA_PID" 2>/dev/null || true
  fi
  rm -rf "$TMP"
}
trap cleanup EXIT

if [ "$QUICK" = 1 ]; then
  OUT=${OUT:-$(mktemp -d)/reports}
  RESULTS=${RESULTS:-$TMP/results}
else
  OUT=${OUT:-docs/reports}
  RESULTS=${RESULTS:-target/publish-reports}
fi
mkdir -p "$OUT" "$RESULTS"
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo unknown)

if [ -z "$BIN" ]; then
  cargo build --release --locked --bin spark-bench
  BIN=target/release/spark-bench
fi
[ -x "$BIN" ] || { echo "publish_reports: $BIN is not an executable" >&2; exit 2; }
BIN_VERSION="$("$BIN" --version) ($BIN)"

# A llama-server of our own, as CI step 25 starts it, when none was given.
if [ "$NO_LLAMA" = 0 ] && [ -z "$LLAMA_URL" ] && [ -x target/llama/llama-server ] \
  && [ -f target/llama/tiny.gguf ]; then
  PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  target/llama/llama-server -m target/llama/tiny.gguf --host 127.0.0.1 --port "$PORT" \
    --parallel 4 --ctx-size 8192 --threads 1 --ignore-eos > "$TMP/llama-server.log" 2>&1 &
  LLAMA_PID=$!
  if python3 - "$PORT" "$LLAMA_PID" <<'EOF'; then
import os, sys, time, urllib.request
port, pid = sys.argv[1], int(sys.argv[2])
for _ in range(600):
    try:
        os.kill(pid, 0)
    except OSError:
        sys.exit(1)
    try:
        urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
        sys.exit(0)
    except Exception:
        time.sleep(0.1)
sys.exit(1)
EOF
    LLAMA_URL="http://127.0.0.1:$PORT/v1"
    echo "publish_reports: started llama-server (target/llama/tiny.gguf) at $LLAMA_URL"
  else
    tail -n 20 "$TMP/llama-server.log" >&2
    echo "publish_reports: llama-server did not start; leaving out the real-server rows" >&2
  fi
fi
[ "$NO_LLAMA" = 1 ] && LLAMA_URL=""

RUNS="$TMP/runs.json"
echo "[]" > "$RUNS"
# run_one KEY SHOWN_COMMAND ARGS...: one `spark-bench run`, its results directory and exit
# code appended to $RUNS. SHOWN_COMMAND is the command as claims.md prints it.
run_one() {
  local key=$1 shown
  shown=$(tr -s ' ' <<< "$2")
  shift 2
  echo "publish_reports: $shown"
  local code=0
  "$BIN" run "$@" --out "$RESULTS" --json -q > "$TMP/$key.json" || code=$?
  python3 - "$RUNS" "$key" "$shown" "$code" "$TMP/$key.json" <<'EOF'
import json, sys
runs_path, key, shown, code, out = sys.argv[1:]
try:
    with open(out) as f:
        results_dir = json.load(f).get("results_dir")
except (OSError, ValueError):
    results_dir = None
with open(runs_path) as f:
    runs = json.load(f)
runs.append({"key": key, "command": shown, "results_dir": results_dir, "exit": int(code)})
with open(runs_path, "w") as f:
    json.dump(runs, f)
EOF
  if [ "$code" != 0 ]; then
    echo "publish_reports: the $key run exited $code (recorded in claims.md)" >&2
  fi
}

if [ "$QUICK" = 1 ]; then
  SNAKE=(scenarios/smoke.toml --target sim-gpu --target sim-wafer --sessions 1 --concurrency 1)
  AGENT=(scenarios/smoke.toml --target sim-gpu --target sim-wafer --sessions 2 --concurrency 2)
  LLAMA=(--sessions 1 --concurrency 1)
else
  SNAKE=(scenarios/snake.toml --sessions 4 --concurrency 4)
  AGENT=(scenarios/agent-loop.toml --sessions 4 --concurrency 4)
  LLAMA=()
fi
run_one snake "spark-bench run ${SNAKE[*]}" "${SNAKE[@]}"
run_one agent "spark-bench run ${AGENT[*]}" "${AGENT[@]}"
if [ -n "$LLAMA_URL" ]; then
  # The scenario's own [targets.llamacpp], pointed at this server (applied field by field).
  cat > "$RESULTS/llama-targets.toml" <<EOF
# Written by scripts/publish_reports.sh: scenarios/claims-llama.toml's target at this server.
[targets.llamacpp]
base_url = "$LLAMA_URL"
EOF
  run_one llama "spark-bench run scenarios/claims-llama.toml ${LLAMA[*]} --targets llama-targets.toml (base_url = $LLAMA_URL)" \
    scenarios/claims-llama.toml "${LLAMA[@]}" --targets "$RESULTS/llama-targets.toml"
fi

SHOWN="scripts/publish_reports.sh"
for a in "${ARGS[@]}"; do SHOWN+=" $a"; done
PY_ARGS=(--runs "$RUNS" --out "$OUT" --bin-version "$BIN_VERSION" --command "$SHOWN"
  --load-before "$LOAD_BEFORE")
[ "$QUICK" = 1 ] && PY_ARGS+=(--quick)
python3 scripts/publish_reports.py "${PY_ARGS[@]}"
echo "publish_reports: results in $RESULTS, pages in $OUT"
