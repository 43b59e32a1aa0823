#!/usr/bin/env bash
# Peak memory of a long run (issue 22): `spark-bench serve --profile fast` on core SERVE_CPU
# (default 1), the harness on CLIENT_CPU (default 0; a list such as 0-7 for more) replaying
# scripts/mem/mem10.toml (10 turns per session, http-pooled, concurrency 64) for SESSIONS
# sessions, so SESSIONS × 10 requests. Prints the harness's peak RSS (the kernel's, by
# `scripts/aiperf_side_by_side.py cpu`, and from sampling /proc every 0.5 s), its
# CPU-seconds and the run's last lines. 10,000 sessions take about a minute on a quiet 2-core
# machine; 100,000 (one million requests) about ten.
#
#   scripts/memory-run.sh target/release/spark-bench 10000 [PORT]
set -euo pipefail
BIN=$(readlink -f "${1:?usage: memory-run.sh BIN SESSIONS [PORT]}")
N=${2:?usage: memory-run.sh BIN SESSIONS [PORT]}
PORT=${3:-18090}
HERE=$(cd "$(dirname "$0")" && pwd)
SERVE_CPU=${SERVE_CPU:-1}
CLIENT_CPU=${CLIENT_CPU:-0}
DIR=$(mktemp -d)
trap 'kill "$SP" 2>/dev/null || true; rm -rf "$DIR"' EXIT
cat >"$DIR/targets.toml" <<TOML
[targets.ext]
base_url = "http://127.0.0.1:$PORT/v1"
api = "chat-completions"
model = "sim"
hardware = "serve --profile fast"
TOML
taskset -c "$SERVE_CPU" "$BIN" serve --profile fast --listen "127.0.0.1:$PORT" >"$DIR/serve.log" 2>&1 &
SP=$!
# Ready when this serve says it listens: a probe of the port alone could reach another
# process still holding it (the serve of a run just before, on its way out), and then every
# request of this run would fail.
for _ in $(seq 50); do grep -q "127.0.0.1:$PORT" "$DIR/serve.log" 2>/dev/null && break; sleep 0.1; done
kill -0 "$SP" 2>/dev/null && grep -q "127.0.0.1:$PORT" "$DIR/serve.log" || {
  echo "serve did not start (port $PORT in use?):" >&2
  cat "$DIR/serve.log" >&2
  exit 2
}
python3 "$HERE/aiperf_side_by_side.py" cpu "$DIR/time.json" -- taskset -c "$CLIENT_CPU" "$BIN" run "$HERE/mem/mem10.toml" --targets "$DIR/targets.toml" \
  --sessions "$N" --no-report -q --out "$DIR/out" >"$DIR/run.out" 2>"$DIR/run.err" &
RP=$!
peak=0
while kill -0 "$RP" 2>/dev/null; do
  # The runner's child: taskset, which execs the harness (whatever the binary is named).
  p=$(pgrep -P "$RP" | head -n 1 || true)
  if [ -n "$p" ]; then
    r=$(awk '/VmRSS/{print $2}' "/proc/$p/status" 2>/dev/null || echo 0)
    [ "${r:-0}" -gt "$peak" ] && peak=$r
  fi
  sleep 0.5
done
wait "$RP" || true
echo "sessions $N, requests $((N * 10)); sampled peak RSS ${peak} kB"
python3 - "$DIR/time.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
print(f"peak RSS {t['maxrss_kb']} kB, CPU {t['user_s']:.2f} s user + {t['sys_s']:.2f} s system, wall {t['wall_s']:.1f} s")
PY
tail -n 3 "$DIR/run.out"
python3 - "$DIR/out" <<'PY'
import glob, json, sys
for f in glob.glob(sys.argv[1] + "/*/summary.json"):
    cells = json.load(open(f))["cells"]
    print(f"requests {sum(c['requests'] for c in cells)}, failed {sum(c['failed'] for c in cells)}")
PY
