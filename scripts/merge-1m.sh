#!/usr/bin/env bash
# Times `spark-bench merge` on shards totalling 1,000,000 requests (the synthetic fixture of
# examples/shard_fixture.rs: 4 shards of one plan, 8 cells, sessions of 6 requests) and
# prints its wall time and peak resident memory (GNU time's "Maximum resident set size"),
# once without and once with the report.
#
#   bash scripts/merge-1m.sh [OUT_DIR] [REQUESTS] [TOKENS]   (defaults target/merge-1m 1000000 8)
#
# TOKENS is the output tokens (and content chunks) per request: chunks.csv, the largest
# file, grows with it. Needs GNU time (/usr/bin/time, Debian's `time`; installed when absent).
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-target/merge-1m}
REQUESTS=${2:-1000000}
TOKENS=${3:-8}
if [ ! -x /usr/bin/time ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq && apt-get install -y -qq time >/dev/null
fi
cargo build --release --locked --quiet --bin spark-bench --example shard_fixture
rm -rf "$OUT"
target/release/examples/shard_fixture --out "$OUT/shards" --shards 4 --requests "$REQUESTS" \
  --tokens "$TOKENS" >/dev/null
echo "shards: $(du -sh "$OUT/shards" | cut -f1) on disk;" \
  "$(cat "$OUT"/shards/shard-*/*/requests.csv | wc -l) request rows," \
  "$(cat "$OUT"/shards/shard-*/*/chunks.csv | wc -l) chunk rows (headers included)"
for mode in --no-report ""; do
  rm -rf "$OUT/merged"
  # shellcheck disable=SC2086
  /usr/bin/time -f '%e %M' -o "$OUT/time.txt" \
    target/release/spark-bench merge "$OUT"/shards/shard-*/*/ --out "$OUT/merged" $mode \
    >/dev/null 2>"$OUT/merge.err"
  read -r secs kib <"$OUT/time.txt"
  echo "merge ${mode:-(with report)}: ${secs} s wall, peak RSS $((kib / 1024)) MiB;" \
    "$(grep -o 'merged [0-9]* of [0-9]* shards.*requests)' "$OUT/merge.err")"
done
