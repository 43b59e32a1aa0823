#!/usr/bin/env bash
# Instructions per chunk, the harness beside the bare read loop, counted by valgrind's
# cachegrind: the same figure on every run of the same build, where CPU time on a shared
# VM moves ±10% run to run (docs/measurements.md, "Instructions per chunk").
#
# usage: scripts/instructions-per-chunk.sh [BIN]   (BIN: spark-bench, default target/release/spark-bench)
# env:   TRANSPORTS ("ws http-pooled")
#        SESSIONS (40)   one-turn sessions in the smaller run; the larger runs twice as many,
#                        and the difference is the marginal cost (start-up and the final
#                        report cancel out)
#        TOKENS (64)     max output tokens per request (TOKENS=2 prices a request instead)
#        PACE (300)      tokens/s per stream, one token per chunk: slow enough that the client,
#                        ~50x slower under valgrind, still reads one chunk per read
#        CONC (4)        concurrency
#        FLOOR (target/release/examples/read_floor; "" to skip)
#        PORT (18195)
#
# Prints, per transport and side: user-space instructions per chunk (and per request), the
# same without the `rep stos`/`rep movs` string instructions (cachegrind counts each of their
# iterations: an 8 KiB memset is ~9,000 "instructions" here and ~100 ns on the CPU), and
# where they go by crate. Instruction counts are not time: a memory-bound path costs more per
# instruction than a scanning loop (see docs/measurements.md), so a saving is confirmed with
# `scripts/cpu-per-chunk.sh` (BASE=...) before it is claimed.
set -euo pipefail
BIN=$(readlink -f "${1:-target/release/spark-bench}")
TRANSPORTS=${TRANSPORTS:-ws http-pooled}
SESSIONS=${SESSIONS:-40}
TOKENS=${TOKENS:-64}
PACE=${PACE:-300}
CONC=${CONC:-4}
FLOOR=${FLOOR-target/release/examples/read_floor}
PORT=${PORT:-18195}
[ -x "$BIN" ] || { echo "no spark-bench binary at $BIN" >&2; exit 2; }
for tool in valgrind cg_diff cg_annotate taskset; do
    command -v "$tool" >/dev/null || { echo "needs $tool (Debian: apt-get install valgrind util-linux)" >&2; exit 2; }
done

WORK=$(mktemp -d)
cleanup() {
    [ -n "${SP:-}" ] && kill "$SP" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

# shellcheck source=scripts/serve-fixture.sh
source "$(cd "$(dirname "$0")" && pwd)/serve-fixture.sh"
start_serve 1 "$PACE"
write_targets
for n in "$SESSIONS" $((2 * SESSIONS)); do
    write_bench "$WORK/bench-$n.toml" instructions-per-chunk "$n" "$CONC" "$TOKENS"
done

cg() { taskset -c 0 valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file="$1" "${@:2}"; }

# One harness run under cachegrind: prints its chunks.
harness() {
    local t=$1 n=$2 api=chat-completions out="$WORK/out-$1-$2"
    [ "$t" = ws ] && api=responses
    cg "$WORK/h-$t-$n.cg" "$BIN" run "$WORK/bench-$n.toml" --targets "$WORK/targets-$api.toml" \
        --transport "$t" --no-report -q --out "$out" >"$WORK/h-$t-$n.log" 2>&1 || {
        echo "$t: run failed:" >&2
        tail -5 "$WORK/h-$t-$n.log" >&2
        return 1
    }
    python3 -c 'import glob, json, sys
s = json.load(open(glob.glob(sys.argv[1] + "/*/summary.json")[0]))
print(sum(c["chunks"] for c in s["cells"]))' "$out"
}

# One floor run under cachegrind: prints its chunks.
floor() {
    cg "$WORK/f-$1-$2.cg" "$FLOOR" --addr "127.0.0.1:$PORT" --transport "$1" --requests "$2" \
        --concurrency "$CONC" --max-tokens "$TOKENS" >"$WORK/f-$1-$2.log" 2>&1
    grep -o 'chunks=[0-9]*' "$WORK/f-$1-$2.log" | head -1 | cut -d= -f2
}

# Prints one line for the difference between two cachegrind files ($2, $3) over $4 chunks
# and $5 requests, labelled $1.
line() {
    cg_diff "$2" "$3" >"$WORK/diff.cg" 2>/dev/null
    cg_annotate --auto=no --threshold=0 "$WORK/diff.cg" >"$WORK/diff.txt" 2>/dev/null
    python3 - "$1" "$4" "$5" "$WORK/diff.txt" <<'EOF'
import collections, re, sys
label, chunks, reqs = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
by = collections.Counter()
for row in open(sys.argv[4]):
    m = re.match(r"\s*(-?[0-9,]+) \([^)]*\)\s+(.*)", row)
    if not m or m.group(2).startswith("PROGRAM"):
        continue
    n, name = int(m.group(1).replace(",", "")), m.group(2)
    where, _, func = name.partition(":")
    if any(w in where or w in func for w in ("memset", "memmove", "memcpy")):
        k = "rep-string"
    elif "malloc" in where or "arena.c" in where or "rdl_alloc" in func or re.match(
        r"(__libc_)?(malloc|free|cfree|realloc|calloc|_int_(malloc|free|realloc)|malloc_consolidate)\b", func
    ):
        k = "alloc"
    elif "::backend::" in func or "from_utf8" in func or "memchr" in func or "read_floor" in func:
        k = "decode"
    elif "tungstenite" in func:
        k = "websocket"
    elif "bytes::" in func:
        k = "bytes"
    elif "hdrhistogram" in func or "::recorder::" in func:
        k = "recorder"
    elif "csv" in func or "itoa" in func or "ryu" in func or "::store::" in func:
        k = "csv"
    elif "tokio" in func or "mio::" in func or "futures" in func:
        k = "tokio"
    elif "hyper" in func or "http::" in func or "httparse" in func or "h2::" in func:
        k = "http"
    elif "serde" in func:
        k = "serde"
    elif "Timespec" in func or "Instant" in func or "clock_gettime" in func or "::clock::" in func:
        k = "clock"
    elif "spark_bench" in func:
        k = "spark-bench"
    else:
        k = "other"
    by[k] += n
total = sum(by.values())
parts = " ".join(f"{k}={v / chunks:.0f}" for k, v in by.most_common() if abs(v / chunks) >= 20)
print(f"{label:<22} {total / chunks:9.0f} {(total - by['rep-string']) / chunks:9.0f} {total / reqs:10.0f}  {parts}")
EOF
}

# The split by part reads cg_annotate's one-line `file:function` rows (valgrind 3.20 and
# before; Debian bookworm has 3.19). A later cg_annotate nests them: the totals still hold.
vg=$(valgrind --version | sed 's/^valgrind-//')
if [ "$(printf '%s\n3.20\n' "${vg%.*}" | sort -V | tail -1)" != 3.20 ]; then
    echo "note: valgrind $vg: its cg_annotate prints another layout; the split by part may be wrong" >&2
fi
echo "# $(date -u +%FT%TZ) $(basename "$BIN"); sessions=$SESSIONS and $((2 * SESSIONS)), concurrency=$CONC, tokens=$TOKENS, pace=$PACE tok/s; valgrind $(valgrind --version)"
printf '%-22s %9s %9s %10s  %s\n' "" instr/chk "w/o rep" instr/req "by part, per chunk"
for t in $TRANSPORTS; do
    a=$SESSIONS
    b=$((2 * SESSIONS))
    ca=$(harness "$t" "$a") || continue
    cb=$(harness "$t" "$b") || continue
    line "$t harness" "$WORK/h-$t-$a.cg" "$WORK/h-$t-$b.cg" "$((cb - ca))" "$a"
    case "$t" in http | http-pooled | ws) ;; *) continue ;; esac # read_floor's transports
    if [ -n "$FLOOR" ] && [ -x "$FLOOR" ]; then
        if fa=$(floor "$t" "$a") && fb=$(floor "$t" "$b") && [ -n "$fa" ] && [ -n "$fb" ]; then
            line "$t floor" "$WORK/f-$t-$a.cg" "$WORK/f-$t-$b.cg" "$((fb - fa))" "$a"
        else
            echo "$t: the floor failed:" >&2
            tail -3 "$WORK/f-$t-$a.log" "$WORK/f-$t-$b.log" >&2 2>/dev/null || true
        fi
    fi
done
