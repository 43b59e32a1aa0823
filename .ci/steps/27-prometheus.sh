#!/usr/bin/env bash
# A real Prometheus (Debian's `prometheus` package) scrapes `spark-bench run --metrics-listen`
# once a second while a run against the embedded simulator goes; then a PromQL query through
# Prometheus's HTTP API must return the run's TTFT p50, and it must agree with summary.json's.
# `promtool check metrics` checks a live scrape in the 0.0.4 text format (what promtool
# reads); the OpenMetrics form is what Prometheus itself negotiates and parsed.
#
# Tolerance: 1e-9 relative. Both numbers are the same HdrHistogram read (value_at_quantile
# on the run's 3-significant-digit histogram): summary.json holds it in ms, the exposition
# in seconds as Rust's shortest round-trip decimal, and Prometheus keeps float64; so they
# differ by float rounding only. (Buckets read back with histogram_quantile would be off by
# up to a bucket's width; these are summaries, so nothing is interpolated.)
source "$(dirname "$0")/../lib.sh"

need_command prometheus prometheus
prometheus --version 2>&1 | head -n 1
timeout 600 cargo build --quiet --locked --bin spark-bench
BIN=target/debug/spark-bench

DIR=$(mktemp -d)
on_exit "rm -rf '$DIR'"
MPORT=$(free_port)
PPORT=$(free_port)
cat >"$DIR/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: spark-bench
    static_configs:
      - targets: ["127.0.0.1:$MPORT"]
EOF
promtool check config "$DIR/prometheus.yml"
start_bg "$DIR/prometheus.log" prometheus --config.file="$DIR/prometheus.yml" \
  --storage.tsdb.path="$DIR/tsdb" --web.listen-address="127.0.0.1:$PPORT"
PROM_PID=$BG_PID
if ! wait_http "http://127.0.0.1:$PPORT/-/ready" "$PROM_PID" 60; then
  tail -n 30 "$DIR/prometheus.log"
  echo "prometheus did not become ready" >&2
  exit 1
fi

# 100 requests one after another (25 ms think each; 5 to 10 s here): several scrapes
# while it runs, and 4 s of linger so at least two scrapes see the final values.
cat >"$DIR/scenario.toml" <<'EOF'
name = "prometheus"
max_output_tokens = 16
[matrix]
targets = ["sim-wafer"]
transports = ["http-pooled"]
[[turns]]
prompt = "Say something short."
think_time = "25ms"
repeat = 100
EOF
start_bg "$DIR/run.log" "$BIN" run "$DIR/scenario.toml" --out "$DIR/results" --no-report --quiet \
  --metrics-listen "127.0.0.1:$MPORT" --metrics-linger 4s
RUN_PID=$BG_PID
wait_port "$MPORT" "$RUN_PID" 60
# A scrape once some requests are in (summaries with samples), for promtool.
has_requests() {
  curl -fsS "http://127.0.0.1:$MPORT/metrics" >"$DIR/scrape.prom" &&
    grep -q '^spark_bench_ttft_seconds_count' "$DIR/scrape.prom"
}
wait_until 60 "$RUN_PID" has_requests
promtool check metrics <"$DIR/scrape.prom"
echo "promtool check metrics: ok ($(wc -l <"$DIR/scrape.prom") lines, 0.0.4 text format)"
status=0
wait "$RUN_PID" || status=$?
if [ "$status" -ne 0 ]; then
  cat "$DIR/run.log"
  echo "spark-bench run exited $status" >&2
  exit 1
fi
RUN_DIR=$(find "$DIR/results" -mindepth 1 -maxdepth 1 -type d | head -n 1)
test -s "$RUN_DIR/metrics.om"

# The target is gone now, so its series carry staleness markers: last_over_time reads the
# last real sample. First: did Prometheus scrape the final values (complete="true")?
query() {
  curl -fsS "http://127.0.0.1:$PPORT/api/v1/query" --data-urlencode "query=$1" |
    python3 -c 'import json, sys; r = json.load(sys.stdin)["data"]["result"]; print(r[0]["value"][1] if r else "")'
}
SCRAPES=$(query 'count_over_time(spark_bench_run_info{complete="true"}[5m])')
if [ -z "$SCRAPES" ]; then
  tail -n 20 "$DIR/prometheus.log"
  echo "FAIL: Prometheus never scraped the run's final values" >&2
  exit 1
fi
ALL=$(query 'sum(count_over_time(spark_bench_run_info[5m]))')
echo "Prometheus scraped the run $ALL times ($SCRAPES with its final values)"
if [ "${ALL%.*}" -lt 2 ]; then
  echo "FAIL: fewer than 2 scrapes" >&2
  exit 1
fi

Q='last_over_time(spark_bench_ttft_seconds{cell="sim-wafer/http-pooled",quantile="0.5"}[5m])'
PROM_S=$(query "$Q")
SUMMARY_MS=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["cells"][0]["metrics"]["ttft"]["p50"])' "$RUN_DIR/summary.json")
echo "PromQL:               $Q"
echo "Prometheus (s):       $PROM_S"
echo "summary.json p50 (ms): $SUMMARY_MS"
python3 - "$PROM_S" "$SUMMARY_MS" <<'EOF'
import sys
prom_s, summary_ms = sys.argv[1], float(sys.argv[2])
if not prom_s:
    sys.exit("FAIL: the PromQL query returned no sample")
prom_ms = float(prom_s) * 1e3
if abs(prom_ms - summary_ms) > 1e-9 * max(abs(summary_ms), 1e-12):
    sys.exit(f"FAIL: TTFT p50 disagrees: Prometheus {prom_ms} ms vs summary.json {summary_ms} ms")
print(f"TTFT p50 agrees: Prometheus {prom_ms} ms == summary.json {summary_ms} ms (tolerance 1e-9 relative)")
EOF
