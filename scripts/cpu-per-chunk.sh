#!/usr/bin/env bash
# The harness's CPU per chunk and memory per request, end to end, against a separate
# `serve --profile fast` process (docs/measurements.md, "CPU per chunk, end to end").
#
# usage: scripts/cpu-per-chunk.sh [BIN]      (BIN: spark-bench, default target/release/spark-bench)
# env:   SESSIONS (20000)   one-turn sessions (= requests) per transport
#        CONC (64)          concurrency
#        TOKENS (64)        max output tokens per request
#        PORT (18190)       where serve listens
#        TRANSPORTS ("http http-pooled http2 ws")
#        FLOOR (target/release/examples/read_floor; "" to skip): the bare read loop,
#              run for http-pooled and ws (cargo build --release --example read_floor)
#        SERVE_CPU (1) / CLIENT_CPU (0): the cores serve and the client are pinned to
#        KEEP ("" ): a directory to keep the runs' outputs in (default: a temp dir, removed)
#
# One line per transport: client CPU seconds, CPU-µs per chunk (= CPU-s per million chunks), chunks, requests,
# peak RSS and KiB per request (peak RSS / requests), wall seconds. The client's CPU is
# user + system time of the whole `run` process (/usr/bin/time -v), start to exit.
set -euo pipefail
BIN=$(readlink -f "${1:-target/release/spark-bench}")
SESSIONS=${SESSIONS:-20000}
CONC=${CONC:-64}
TOKENS=${TOKENS:-64}
PORT=${PORT:-18190}
TRANSPORTS=${TRANSPORTS:-http http-pooled http2 ws}
FLOOR=${FLOOR-target/release/examples/read_floor}
SERVE_CPU=${SERVE_CPU:-1}
CLIENT_CPU=${CLIENT_CPU:-0}
[ -x "$BIN" ] || { echo "no spark-bench binary at $BIN" >&2; exit 2; }
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (apt-get install time)" >&2; exit 2; }

WORK=${KEEP:-$(mktemp -d)}
mkdir -p "$WORK"
cleanup() {
    [ -n "${SP:-}" ] && kill "$SP" 2>/dev/null || true
    [ -z "${KEEP:-}" ] && rm -rf "$WORK"
}
trap cleanup EXIT

cat >"$WORK/bench.toml" <<EOF
name = "cpu-per-chunk"
description = "harness CPU per chunk: one short turn against a separate serve process"
seed = 1
max_output_tokens = $TOKENS

[load]
sessions = $SESSIONS
concurrency = $CONC

[matrix]
targets = ["ext"]

[[turns]]
prompt = "Write a Python function that reverses a string."
EOF
for api in chat-completions responses; do
    cat >"$WORK/targets-$api.toml" <<EOF
[targets.ext]
base_url = "http://127.0.0.1:$PORT/v1"
api = "$api"
model = "sim"
hardware = "serve --profile fast"
EOF
done

taskset -c "$SERVE_CPU" "$(readlink -f "$BIN")" serve --profile fast --listen "127.0.0.1:$PORT" \
    >"$WORK/serve.log" 2>&1 &
SP=$!
for _ in $(seq 50); do
    grep -q "127.0.0.1:$PORT" "$WORK/serve.log" 2>/dev/null && break
    sleep 0.1
done

echo "# $(date -u +%FT%TZ) $(basename "$BIN") $("$BIN" --version 2>/dev/null | head -1); sessions=$SESSIONS concurrency=$CONC tokens=$TOKENS; serve on cpu $SERVE_CPU, client on cpu $CLIENT_CPU; $(nproc) cpus"
printf '%-12s %8s %9s %10s %9s %8s %8s %8s %7s\n' transport cpu_s us/chunk chunks requests chk/req peak_MB KiB/req wall_s
for t in $TRANSPORTS; do
    api=chat-completions
    [ "$t" = ws ] && api=responses
    out="$WORK/out-$t"
    rm -rf "$out"
    /usr/bin/time -v -o "$WORK/time-$t.txt" taskset -c "$CLIENT_CPU" "$BIN" run "$WORK/bench.toml" \
        --targets "$WORK/targets-$api.toml" --transport "$t" --no-report -q --out "$out" \
        >"$WORK/run-$t.out" 2>"$WORK/run-$t.err" || {
        echo "$t: run failed (see $WORK/run-$t.err)" >&2
        tail -5 "$WORK/run-$t.err" >&2
        continue
    }
    python3 - "$WORK/time-$t.txt" "$out" "$t" <<'EOF'
import glob, json, re, sys
tv, out, t = sys.argv[1:4]
text = open(tv).read()
get = lambda k: re.search(re.escape(k) + r":\s*([\d.:]+)", text).group(1)
cpu = float(get("User time (seconds)")) + float(get("System time (seconds)"))
rss_kb = int(get("Maximum resident set size (kbytes)"))
wall = get("Elapsed (wall clock) time (h:mm:ss or m:ss)").split(":")
wall_s = sum(float(x) * 60 ** i for i, x in enumerate(reversed(wall)))
s = json.load(open(glob.glob(out + "/*/summary.json")[0]))
chunks = sum(c["chunks"] for c in s["cells"])
reqs = sum(c["requests"] for c in s["cells"])
print(f"{t:<12} {cpu:8.2f} {cpu / chunks * 1e6:9.3f} {chunks:10d} {reqs:9d} {chunks / reqs:8.2f} {rss_kb / 1024:8.1f} {rss_kb / reqs:8.3f} {wall_s:7.1f}")
EOF
done
if [ -n "$FLOOR" ] && [ -x "$FLOOR" ]; then
    for t in $TRANSPORTS; do
        case $t in http-pooled | ws) ;; *) continue ;; esac
        taskset -c "$CLIENT_CPU" "$FLOOR" --addr "127.0.0.1:$PORT" --transport "$t" \
            --requests "$SESSIONS" --concurrency "$CONC" --max-tokens "$TOKENS"
    done
fi
