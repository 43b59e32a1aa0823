#!/usr/bin/env bash
# Interop: the official `openai` Python SDK (a real, independent client) against the simulator.
set -euo pipefail
cd "$(dirname "$0")/../.."

OPENAI_VERSION="3.54.0" # has client.responses.connect() (WebSocket mode)
VENV=target/py-venv
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c "import openai, sys; sys.exit(openai.__version__ != '$OPENAI_VERSION')" 2>/dev/null; then
  "$VENV/bin/pip" install --quiet "openai[realtime]==$OPENAI_VERSION"
fi

cargo build --quiet
OUT=$(mktemp)
target/debug/spark-bench serve --profile fast --listen 127.0.0.1:0 >"$OUT" 2>&1 &
PID=$!
trap 'kill "$PID" 2>/dev/null || true; rm -f "$OUT"' EXIT
URL=""
for _ in $(seq 1 100); do
  URL=$(sed -n 's/^spark-bench simulator .* listening on \(http[^ ]*\)$/\1/p' "$OUT" | head -n1)
  [ -n "$URL" ] && break
  if ! kill -0 "$PID" 2>/dev/null; then cat "$OUT"; echo "simulator exited" >&2; exit 1; fi
  sleep 0.1
done
[ -n "$URL" ] || { cat "$OUT"; echo "simulator printed no URL" >&2; exit 1; }
"$VENV/bin/python" scripts/interop_openai_sdk.py "$URL"
