#!/usr/bin/env bash
# Interop: a short run's HdrHistogram V2 logs, read back by the independent Python
# implementation (`hdrhistogram` from PyPI), must agree with the run's summary.json.
set -euo pipefail
cd "$(dirname "$0")/../.."

HDR_VERSION="0.10.8"
VENV=target/py-venv
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('hdrhistogram') != '$HDR_VERSION')" 2>/dev/null; then
  "$VENV/bin/pip" install --quiet "hdrhistogram==$HDR_VERSION"
fi

cargo build --quiet --locked
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
target/debug/spark-bench run scenarios/smoke.toml --quiet --no-report --out "$OUT" >/dev/null
RUN=$(ls -d "$OUT"/*/ | head -n1)
"$VENV/bin/python" scripts/check_hlog.py "$RUN"
