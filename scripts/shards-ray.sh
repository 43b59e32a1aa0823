#!/usr/bin/env bash
# Shards on a real engine: a local Ray cluster from PyPI's `ray` (`ray start --head`: the
# GCS, a raylet and its pool of worker processes) schedules 4 `spark-bench run --shard I/4`
# tasks as ray.remote tasks, each in a Ray worker process;
# then `spark-bench merge` folds them into one results directory and `spark-bench report`
# renders it.
#
# Not the CI step (that is .ci/steps/37-shards-engine.sh, on Slurm): see docs/shards.md "Sharded
# runs". Cost: the venv is cached in ~/.cache/spark-bench/ray-venv (cold: 11 s of pip here;
# warm: 0); then ~11 s on a quiet 2-core VM, ~70 s beside 16 busy loops. Bounded: the whole
# run by STEP_TIMEOUT (default 240 s). SHARDS_BIN=FILE uses that binary and skips the build.
source "$(dirname "$0")/../.ci/lib.sh"

RAY_VERSION="2.60.0"
VENV="${XDG_CACHE_HOME:-$HOME/.cache}/spark-bench/ray-venv"
mkdir -p "$(dirname "$VENV")"
START=$(date +%s)
PIP_TIMEOUT=300 venv_with "$VENV" "ray==$RAY_VERSION"
echo "venv ready in $(( $(date +%s) - START )) s"

if [ -z "${SHARDS_BIN:-}" ]; then
  cargo build --quiet --locked --bin spark-bench
fi
BIN=${SHARDS_BIN:-$PWD/target/debug/spark-bench}
OUT=$(mktemp -d)
RAY_TMP=$(mktemp -d /tmp/ray-sb.XXXX)
on_exit "rm -rf '$OUT'"
# Every process of this cluster (GCS, raylet, agents, workers) keeps its log files open in
# $RAY_TMP, so the exit handler stops exactly these (`ray stop` stops every Ray on the
# machine; the agents outlive SIGTERM, hence kill_holding's SIGKILL after 5 s).
on_exit "kill_holding '$RAY_TMP'; rm -rf '$RAY_TMP'"
PORT=$(free_port)
# RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 keeps Ray on 127.0.0.1: without it Ray replaces a
# loopback address by the machine's interface address (and allows only one node then).
export RAY_USAGE_STATS_ENABLED=0 RAY_DISABLE_DOCKER_CPU_WARNING=1 RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0
# A loaded machine starts the raylet's agents slowly. With port 0 (the default) the raylet
# blocks until each agent has written its port file and aborts when one is late
# (ray-project/ray#65983); fixed ports, the workaround named there, skip that wait. Longer
# agent deadlines as well.
export RAY_raylet_start_wait_time_s=120 RAY_agent_register_timeout_ms=120000
AGENT_PORTS="--metrics-export-port $(free_port) --dashboard-agent-grpc-port $(free_port)"
AGENT_PORTS+=" --dashboard-agent-listen-port $(free_port) --runtime-env-agent-port $(free_port)"
timeout "${STEP_TIMEOUT:-240}" bash -euo pipefail -c '
  VENV=$1 PORT=$2 RAY_TMP=$3 BIN=$4 OUT=$5 AGENT_PORTS=$6
  T0=$(date +%s)
  "$VENV/bin/ray" start --head --node-ip-address 127.0.0.1 --port "$PORT" --num-cpus 4 \
    --include-dashboard false --temp-dir "$RAY_TMP" --disable-usage-stats $AGENT_PORTS \
    >"$OUT/ray-head.log" 2>&1 \
    || { cat "$OUT/ray-head.log"; exit 1; }
  echo "ray cluster up in $(( $(date +%s) - T0 )) s"
  "$VENV/bin/python" deploy/ray/run_shards.py --address "127.0.0.1:$PORT" --shards 4 \
    --binary "$BIN" --out "$OUT/results" -- scenarios/smoke.toml --sessions 8 --concurrency 4
  "$BIN" report "$OUT/results/merged" --format md,html >/dev/null
  grep -q "sim-wafer" "$OUT/results/merged/report.md"
  python3 scripts/check_merged.py "$OUT/results/merged" 4 Ray
' _ "$VENV" "$PORT" "$RAY_TMP" "$BIN" "$OUT" "$AGENT_PORTS"
echo "shards-ray: $(( $(date +%s) - START )) s"
