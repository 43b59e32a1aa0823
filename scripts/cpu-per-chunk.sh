#!/usr/bin/env bash
# The harness's CPU per chunk and memory per request, end to end, against a separate
# `serve --profile fast` process (docs/measurements.md, "CPU per chunk, end to end").
#
# usage: scripts/cpu-per-chunk.sh [BIN]      (BIN: spark-bench, default target/release/spark-bench)
# env:   PACE ("")          "" : `serve --profile fast` as fast as it can go (saturated: many chunks
#                           queue in the socket between reads). A number N: the simulator paces
#                           every stream at N tokens/s, one token per chunk, no jitter, so the
#                           client wakes for (nearly) every chunk: the per-read cost the issue calls
#                           "one chunk per read" (try PACE=2000 CONC=16 SESSIONS=3000)
#        SESSIONS (20000)   one-turn sessions (= requests) per transport
#        CONC (64)          concurrency
#        TOKENS (64)        max output tokens per request
#        REPEAT (1)         runs of each (harness and floor alternate); the line is the median
#        PORT (18190)       where serve listens
#        TRANSPORTS ("http http-pooled http2 ws")
#        FLOOR (target/release/examples/read_floor; "" to skip): the bare read loop,
#              run for http-pooled and ws (cargo build --release --example read_floor)
#        WS_TIMING (on): off gives the Responses target `request_timing = false` and the
#              floor `--ws-timing off`: both read streams without the server's timing event
#              (on: both ask for it, as a Responses target does by default)
#        SERVE_CPU (1) / CLIENT_CPU (0): the cores serve and the client are pinned to
#        KEEP ("" ): a directory to keep the runs' outputs in (default: a temp dir, removed)
#        BASE (""): another spark-bench binary (a build before a change), run as a client
#              beside BIN in every repeat, against BIN's serve: a "before" line follows each
#              transport's line, and the after/before ratio. The two alternate run by run,
#              so a drift of the machine (minutes apart, the same run varies by ±10% on a
#              shared VM) falls on both; compare them only this way
#
# One line per transport: client CPU seconds, CPU-µs per chunk (= CPU-s per million chunks), chunks, requests,
# chunks per read (summary.json → harness.reads), peak RSS and KiB per request (peak RSS /
# requests), wall seconds. The client's CPU is user + system time of the whole `run` process
# (the kernel's rusage, by `scripts/aiperf_side_by_side.py cpu`), start to exit;
# kchk/s is chunks per wall second, and srv_cores the CPU the serve process used over the
# run's wall time (`aiperf_side_by_side.py proc-cpu`): near its cores' count, the simulator was the bound,
# not the client. verdict is the run's own judgement of itself (summary.json → harness:
# ok, or harness-bound with what bound it). For http-pooled and ws the floor follows (the same reads
# and stamps on the same server, nothing else), and the harness's µs/chunk over the floor's,
# then both split into user and system time per chunk (the kernel's part of a read is the
# same on both sides; what the harness adds is its own user-space work).
# Compare the two only where their chunks per read agree: a client that reads more often pays
# more syscalls per chunk, so a floor that batches differently is not the same stream.
set -euo pipefail
BIN=$(readlink -f "${1:-target/release/spark-bench}")
SCRIPTS=$(cd "$(dirname "$0")" && pwd)
BASE=${BASE:+$(readlink -f "$BASE")}
SESSIONS=${SESSIONS:-20000}
CONC=${CONC:-64}
TOKENS=${TOKENS:-64}
PORT=${PORT:-18190}
TRANSPORTS=${TRANSPORTS:-http http-pooled http2 ws}
PACE=${PACE:-}
REPEAT=${REPEAT:-1}
FLOOR=${FLOOR-target/release/examples/read_floor}
SERVE_CPU=${SERVE_CPU:-1}
CLIENT_CPU=${CLIENT_CPU:-0}
[ -x "$BIN" ] || { echo "no spark-bench binary at $BIN" >&2; exit 2; }
command -v taskset >/dev/null || { echo "needs taskset (util-linux)" >&2; exit 2; }

WORK=${KEEP:-$(mktemp -d)}
mkdir -p "$WORK"
cleanup() {
    [ -n "${SP:-}" ] && kill "$SP" 2>/dev/null || true
    [ -z "${KEEP:-}" ] && rm -rf "$WORK"
}
trap cleanup EXIT

# shellcheck source=scripts/serve-fixture.sh
source "$SCRIPTS/serve-fixture.sh"
write_bench "$WORK/bench.toml" cpu-per-chunk "$SESSIONS" "$CONC" "$TOKENS"
write_targets
start_serve "$SERVE_CPU" "$PACE"

echo "# $(date -u +%FT%TZ) $(basename "$BIN") $("$BIN" --version 2>/dev/null | head -1); sessions=$SESSIONS concurrency=$CONC tokens=$TOKENS pace=${PACE:-saturated} repeat=$REPEAT; serve on cpu $SERVE_CPU, client on cpu $CLIENT_CPU; $(nproc) cpus"
printf '%-12s %8s %9s %10s %9s %8s %9s %8s %8s %7s %7s %9s  %s\n' transport cpu_s us/chunk chunks requests chk/req chk/read peak_MB KiB/req wall_s kchk/s srv_cores verdict

# The serve process's CPU-seconds so far.
serve_cpu() { python3 "$SCRIPTS/aiperf_side_by_side.py" proc-cpu "$SP"; }

# One harness run: one line of numbers (cpu_s chunks requests reads rss_kb wall_s serve_cpu_s
# user_s sys_s verdict).
# $2: the client binary (default BIN).
harness_once() {
    local t=$1 api=chat-completions out="$WORK/out-$1" client=${2:-$BIN}
    [ "$t" = ws ] && api=responses
    rm -rf "$out"
    local s0
    s0=$(serve_cpu)
    python3 "$SCRIPTS/aiperf_side_by_side.py" cpu "$WORK/time-$t.json" -- taskset -c "$CLIENT_CPU" "$client" run "$WORK/bench.toml" \
        --targets "$WORK/targets-$api.toml" --transport "$t" --no-report -q --out "$out" \
        >"$WORK/run-$t.out" 2>"$WORK/run-$t.err" || {
        echo "$t: run failed (see $WORK/run-$t.err)" >&2
        tail -5 "$WORK/run-$t.err" >&2
        return 1
    }
    python3 - "$WORK/time-$t.json" "$out" "$s0" "$(serve_cpu)" <<'EOF'
import glob, json, sys
tv, out, s0, s1 = sys.argv[1:5]
t = json.load(open(tv))
cpu, rss_kb, wall_s, user, sys_ = t["cpu_s"], t["maxrss_kb"], t["wall_s"], t["user_s"], t["sys_s"]
s = json.load(open(glob.glob(out + "/*/summary.json")[0]))
chunks = sum(c["chunks"] for c in s["cells"])
reqs = sum(c["requests"] for c in s["cells"])
h = s.get("harness") or {}
reads = h.get("reads") or 0
verdict = h.get("verdict", "-") + "".join("," + b for b in h.get("bound_by") or [])
print(cpu, chunks, reqs, reads, rss_kb, wall_s, float(s1) - float(s0), user, sys_, verdict)
EOF
}

# One floor run: "us_per_chunk chunks_per_read user_us_per_chunk sys_us_per_chunk" (the
# split from the same timer as the harness's; us_per_chunk is the floor's own count).
floor_once() {
    python3 "$SCRIPTS/aiperf_side_by_side.py" cpu "$WORK/time-floor.json" -- taskset -c "$CLIENT_CPU" "$FLOOR" \
        --addr "127.0.0.1:$PORT" --transport "$1" --requests "$SESSIONS" --concurrency "$CONC" \
        --max-tokens "$TOKENS" --ws-timing "${WS_TIMING:-on}" >"$WORK/floor.out"
    python3 - "$WORK/time-floor.json" "$WORK/floor.out" <<'EOF'
import json, re, sys
t = json.load(open(sys.argv[1]))
f = dict(re.findall(r"(\w+)=([0-9.]+)", open(sys.argv[2]).read()))
k = float(f["chunks"])
print(f["us_per_chunk"], f["chunks_per_read"], 1e6 * t["user_s"] / k, 1e6 * t["sys_s"] / k)
EOF
}

# Prints the line of the run with the median CPU per chunk in file $2 (harness_once lines),
# labelled $1, and sets row_us to its µs per chunk.
row() {
    local cpu chunks reqs reads rss_kb wall_s srv user sys verdict n cpr
    n=$(wc -l <"$2")
    read -r cpu chunks reqs reads rss_kb wall_s srv user sys verdict < <(awk '{print $1 / $2, $0}' "$2" | sort -g |
        awk -v n="$n" 'NR == int((n + 1) / 2) {print $2, $3, $4, $5, $6, $7, $8, $9, $10, $11}')
    row_us=$(awk -v c="$cpu" -v k="$chunks" 'BEGIN {printf "%.3f", c / k * 1e6}')
    cpr=$(awk -v k="$chunks" -v r="$reads" 'BEGIN {if (r > 0) printf "%.2f", k / r; else print "-"}')
    awk -v t="$1" -v cpu="$cpu" -v us="$row_us" -v k="$chunks" -v q="$reqs" -v cpr="$cpr" -v rss="$rss_kb" -v w="$wall_s" -v srv="$srv" -v v="$verdict" \
        'BEGIN {printf "%-12s %8.2f %9s %10d %9d %8.2f %9s %8.1f %8.3f %7.1f %7.0f %9.2f  %s\n", t, cpu, us, k, q, k / q, cpr, rss / 1024, rss / q, w, k / w / 1000, srv / w, v}'
}

median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }

for t in $TRANSPORTS; do
    floor_ok=
    if [ -n "$FLOOR" ] && [ -x "$FLOOR" ] && { [ "$t" = http-pooled ] || [ "$t" = ws ]; }; then
        floor_ok=1
    fi
    : >"$WORK/h-$t.txt"
    : >"$WORK/f-$t.txt"
    : >"$WORK/b-$t.txt"
    for _ in $(seq "$REPEAT"); do
        harness_once "$t" >>"$WORK/h-$t.txt" || continue
        if [ -n "$BASE" ]; then harness_once "$t" "$BASE" >>"$WORK/b-$t.txt" || true; fi
        if [ -n "$floor_ok" ]; then floor_once "$t" >>"$WORK/f-$t.txt"; fi
    done
    [ -s "$WORK/h-$t.txt" ] || continue
    row "$t" "$WORK/h-$t.txt"
    h_us=$row_us
    n=$(wc -l <"$WORK/h-$t.txt")
    if [ -s "$WORK/b-$t.txt" ]; then
        row "before" "$WORK/b-$t.txt"
        awk -v a="$h_us" -v b="$row_us" 'BEGIN {printf "%-12s after / before = %.3f\n", "", a / b}'
    fi
    if [ -s "$WORK/f-$t.txt" ]; then
        f_us=$(cut -d' ' -f1 "$WORK/f-$t.txt" | median)
        f_cpr=$(cut -d' ' -f2 "$WORK/f-$t.txt" | median)
        awk -v t="$t" -v f="$f_us" -v fc="$f_cpr" -v h="$h_us" -v n="$n" \
            'BEGIN {printf "%-12s floor %.3f us/chunk at %.2f chunks/read (median of %d); harness / floor = %.2f\n", t, f, fc, n, h / f}'
        # Where the difference lies: user and system µs per chunk, medians of each side.
        h_user=$(awk '{print 1e6 * $8 / $2}' "$WORK/h-$t.txt" | median)
        h_sys=$(awk '{print 1e6 * $9 / $2}' "$WORK/h-$t.txt" | median)
        f_user=$(cut -d' ' -f3 "$WORK/f-$t.txt" | median)
        f_sys=$(cut -d' ' -f4 "$WORK/f-$t.txt" | median)
        awk -v t="$t" -v hu="$h_user" -v hs="$h_sys" -v fu="$f_user" -v fs="$f_sys" \
            'BEGIN {printf "%-12s user / system us/chunk: harness %.2f / %.2f, floor %.2f / %.2f; harness minus floor %+.2f / %+.2f\n", t, hu, hs, fu, fs, hu - fu, hs - fs}'
    fi
done
