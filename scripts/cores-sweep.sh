#!/usr/bin/env bash
# How the harness scales with cores (issue 22): scripts/cpu-per-chunk.sh once per client core
# count, against one `serve --profile fast` per step on the machine's upper half of cores.
#
# usage: scripts/cores-sweep.sh [BIN]        (BIN: spark-bench, default target/release/spark-bench)
# env:   CORES ("1 2 4 8")   client core counts; the client gets cores 0..N-1. A count that
#                            does not fit below SERVE_CPU is skipped
#        SERVE_CPU           serve's cores (default: the upper half, "8-15" on 16 cores)
#        CONC (512), SESSIONS (20000), TOKENS, REPEAT, TRANSPORTS, PACE, FLOOR (""): as in
#                            scripts/cpu-per-chunk.sh, whose table each step prints
#
# The last table has one row per transport and core count: CPU-µs per chunk, chunks per wall
# second, the client's cores busy (CPU / wall) and serve's, and the run's verdict on itself.
# Where serve's figure is near its core count, serve was the bound, not the client.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=$(readlink -f "${1:-target/release/spark-bench}")
NCPU=$(nproc)
HALF=$((NCPU / 2))
SERVE_CPU=${SERVE_CPU:-$HALF-$((NCPU - 1))}
FIRST_SERVE=${SERVE_CPU%%[-,]*}
export CONC=${CONC:-512} SESSIONS=${SESSIONS:-20000} FLOOR=${FLOOR-} SERVE_CPU
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
ALL=$WORK/all.txt
: >"$ALL"
for n in ${CORES:-1 2 4 8}; do
    if [ "$n" -gt "$FIRST_SERVE" ]; then
        echo "# $n client cores do not fit below serve's cores ($SERVE_CPU); skipped"
        continue
    fi
    echo "## client cores: $n (0-$((n - 1))), serve: $SERVE_CPU"
    CLIENT_CPU=0-$((n - 1)) PORT=$((18300 + n)) "$HERE/cpu-per-chunk.sh" "$BIN" >"$WORK/step.txt" || true
    cat "$WORK/step.txt"
    awk -v n="$n" '$1 ~ /^(http|http-pooled|http2|ws)$/ && NF == 13 {print n, $0}' "$WORK/step.txt" >>"$ALL"
done
echo "## scaling: $NCPU cpus, concurrency $CONC, $SESSIONS sessions per run"
printf '%-12s %5s %9s %9s %12s %9s %8s  %s\n' transport cores us/chunk kchk/s client_cores srv_cores peak_MB verdict
sort -k2,2 -k1,1n "$ALL" | awk '{printf "%-12s %5d %9s %9s %12.2f %9s %8s  %s\n", $2, $1, $4, $12, $3 / $11, $13, $9, $14}'
