#!/usr/bin/env bash
# Interop: the official `openai` Python SDK (a real, independent client) against the simulator.
source "$(dirname "$0")/../lib.sh"

# The pin (.ci/py-venv.pins) is a release with client.responses.connect() (WebSocket mode).
VENV=target/py-venv
OPENAI=$(pin openai)
venv_with "$VENV" "$OPENAI"

cargo build --quiet
OUT=$(mktemp)
on_exit "rm -f '$OUT'"
start_bg "$OUT" target/debug/spark-bench serve --profile fast --listen 127.0.0.1:0
sim_url() { sed -n 's/^spark-bench simulator .* listening on \(http[^ ]*\)$/\1/p' "$OUT" | head -n1; }
has_url() { [ -n "$(sim_url)" ]; }
if ! wait_until 10 "$BG_PID" has_url; then
  cat "$OUT"
  echo "simulator printed no URL" >&2
  exit 1
fi
"$VENV/bin/python" scripts/interop_openai_sdk.py "$(sim_url)"
