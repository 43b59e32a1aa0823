#!/usr/bin/env bash
# Interop: a short run's HdrHistogram V2 logs, read back by the independent Python
# implementation (`hdrhistogram` from PyPI), must agree with the run's summary.json.
source "$(dirname "$0")/../lib.sh"

VENV=target/py-venv
HDR=$(pin hdrhistogram)
venv_with "$VENV" "$HDR"

cargo build --quiet --locked
OUT=$(mktemp -d)
on_exit "rm -rf '$OUT'"
target/debug/spark-bench run scenarios/smoke.toml --quiet --no-report --out "$OUT" >/dev/null
RUN=$(ls -d "$OUT"/*/ | head -n1)
"$VENV/bin/python" scripts/check_hlog.py "$RUN"
