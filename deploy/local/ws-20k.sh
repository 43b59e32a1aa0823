#!/usr/bin/env bash
# 20,000 concurrent WebSocket sessions from 4 shards on this machine, against ONE simulator
# process (`spark-bench serve`, all four shards point at it, so every shard has the same
# plan and plan hash), merged into one results directory.
#
#   bash deploy/local/ws-20k.sh [OUT_DIR]      (default target/ws-20k; about 1-2 minutes)
#
# Prints each shard's open-file limit, peak sessions and memory per session (from its
# manifest's `resources`), and the merged run's peak sessions and failed requests. Needs
# a release build (`cargo build --release`). The simulator needs one descriptor per session
# too: this script raises the shell's hard limit (root) before starting it.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-target/ws-20k}
BIN=target/release/spark-bench
[ -x "$BIN" ] || cargo build --release --locked
rm -rf "$OUT"; mkdir -p "$OUT"
ulimit -Hn 1048576 2>/dev/null || true
ulimit -n "$(ulimit -Hn)"
echo "open-file limit of this shell: $(ulimit -n)"

"$BIN" serve --profile fast --listen 127.0.0.1:18089 >"$OUT/serve.log" 2>&1 &
SIM=$!
trap 'kill $SIM 2>/dev/null || true' EXIT
for _ in $(seq 100); do
  grep -q listening "$OUT/serve.log" && break
  sleep 0.1
done

START=$(date +%s)
PIDS=()
for i in 0 1 2 3; do
  timeout 300 "$BIN" run deploy/local/ws-hold.toml --shard "$i/4" --out "$OUT/shard-$i" \
    --quiet --no-report >"$OUT/shard-$i.out" 2>"$OUT/shard-$i.err" &
  PIDS+=($!)
done
FAIL=0
for p in "${PIDS[@]}"; do wait "$p" || FAIL=1; done
echo "4 shards ran in $(( $(date +%s) - START )) s (exit status ok: $([ $FAIL = 0 ] && echo yes || echo no))"
SIM_RSS=$(awk '/VmHWM/ {print $2}' /proc/$SIM/status)
echo "simulator peak RSS: ${SIM_RSS} KiB"
[ $FAIL = 0 ] || { tail -n 20 "$OUT"/shard-*.err; exit 1; }

"$BIN" merge "$OUT"/shard-*/*/ --out "$OUT/merged" --no-report --json >"$OUT/merged.json" 2>"$OUT/merge.err"
python3 - "$OUT" <<'PY'
import glob, json, sys
out = sys.argv[1]
for m in sorted(glob.glob(f"{out}/shard-*/*/manifest.json")):
    r = json.load(open(m))["resources"]
    print(f"{m.split('/')[-3]}: open files {r['nofile_before']} -> {r['nofile_granted']} (hard {r['nofile_hard']}), "
          f"peak sessions {r['peak_sessions']}, RSS {r['rss_before_kib']} -> {r['rss_peak_kib']} KiB, "
          f"{r['kib_per_session']:.1f} KiB per session")
man = json.load(open(f"{out}/merged/manifest.json"))
s = json.load(open(f"{out}/merged.json"))
c = s["cells"][0]
r = man["resources"]
print(f"merged: {c['requests']} requests, {c['ok']} ok, {c['failed']} failed, {c['sessions']} sessions; "
      f"peak concurrent sessions {r['peak_sessions']} on the merged axis; "
      f"{r['kib_per_session']:.1f} KiB per session (client processes)")
sys.exit(0 if c["failed"] == 0 and c["requests"] == 40000 else 1)
PY
