#!/usr/bin/env bash
# 20,000 concurrent WebSocket sessions from 4 shards on this machine against the simulator,
# merged into one results directory.
#
#   bash deploy/local/ws-20k.sh [OUT_DIR]      (default target/ws-20k; about 75 s)
#
# The server side: SIM_PROCS `spark-bench serve --reuse-port` processes (default 2, more when
# the open-file limit is below ~10,500) share one port, so that no process needs more
# descriptors than the hard open-file limit allows (20,000 in this sandbox, and not
# raisable): one process could not accept the last sessions, which would then wait in its
# listen backlog. Every shard points
# at the same URL, so all four have one plan and one plan hash.
#
# Prints each shard's open-file limit, peak sessions and memory per session (from its
# manifest's `resources`); the most established connections the kernel counted on the
# server port (`ss`, sampled every 0.2 s: a count we did not compute); the simulator
# processes' peak memory; WebSocket upgrade times; and the merged run's peak sessions and
# failed requests. Exits 1 unless all 40,000 measured requests succeeded, no simulator
# process failed to accept a connection, and the kernel saw 20,000 connections at once.
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${1:-target/ws-20k}
BIN=${BIN:-target/release/spark-bench}
[ -x "$BIN" ] || cargo build --release --locked
rm -rf "$OUT"; mkdir -p "$OUT"
ulimit -Hn 1048576 2>/dev/null || true
ulimit -n "$(ulimit -Hn)"
echo "open-file limit of this shell: $(ulimit -n) (hard $(ulimit -Hn))"
# Enough simulator processes that each holds its share of 20,000 connections with room to
# spare (at least 2: one port shared is part of what this shows).
SIM_PROCS=${SIM_PROCS:-$(( 20000 / ($(ulimit -n) - 500) + 1 ))}
[ "$SIM_PROCS" -ge 2 ] || SIM_PROCS=2

PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
sed "s#127.0.0.1:18089#127.0.0.1:$PORT#" deploy/local/ws-hold.toml >"$OUT/ws-hold.toml"
SIMS=()
SAMPLER=""
PIDS=()
# Under `set -e` a failing command in the EXIT trap would become the script's status: every
# kill here may find its process already gone.
cleanup() {
  if [ -n "$SAMPLER" ]; then kill "$SAMPLER" 2>/dev/null || true; fi
  for p in "${PIDS[@]}" "${SIMS[@]}"; do kill "$p" 2>/dev/null || true; done
}
trap cleanup EXIT
for k in $(seq "$SIM_PROCS"); do
  "$BIN" serve --profile fast --listen "127.0.0.1:$PORT" --reuse-port >"$OUT/serve-$k.log" 2>&1 &
  SIMS+=($!)
  for _ in $(seq 100); do
    grep -q listening "$OUT/serve-$k.log" && break
    sleep 0.1
  done
done

# The kernel's count of established connections on the server port, every 0.2 s.
( while :; do ss -Htn state established "( sport = :$PORT )" | wc -l; sleep 0.2; done ) >"$OUT/established.txt" &
SAMPLER=$!

START=$(date +%s)
for i in 0 1 2 3; do
  timeout 200 "$BIN" run "$OUT/ws-hold.toml" --shard "$i/4" --out "$OUT/shard-$i" \
    --quiet --no-report >"$OUT/shard-$i.out" 2>"$OUT/shard-$i.err" &
  PIDS+=($!)
done
FAIL=0
for p in "${PIDS[@]}"; do wait "$p" || FAIL=1; done
echo "4 shards ran in $(( $(date +%s) - START )) s (exit status ok: $([ $FAIL = 0 ] && echo yes || echo no))"
kill "$SAMPLER" 2>/dev/null || true; SAMPLER=""
for k in $(seq "$SIM_PROCS"); do
  echo "simulator $k: peak RSS $(awk '/VmHWM/ {print $2}' "/proc/${SIMS[$((k - 1))]}/status") KiB"
done
[ $FAIL = 0 ] || { tail -n 20 "$OUT"/shard-*.err; exit 1; }

"$BIN" merge "$OUT"/shard-*/*/ --out "$OUT/merged" --no-report --json >"$OUT/merged.json" 2>"$OUT/merge.err"
python3 - "$OUT" "$SIM_PROCS" <<'PY'
import csv, glob, json, sys
out, procs = sys.argv[1], int(sys.argv[2])
for m in sorted(glob.glob(f"{out}/shard-*/*/manifest.json")):
    r = json.load(open(m))["resources"]
    print(f"{m.split('/')[-3]}: open files {r['nofile_before']} -> {r['nofile_granted']} (hard {r['nofile_hard']}), "
          f"peak sessions {r['peak_sessions']}, RSS {r['rss_before_kib']} -> {r['rss_peak_kib']} KiB, "
          f"{r['kib_per_session']:.1f} KiB per session")
man = json.load(open(f"{out}/merged/manifest.json"))
s = json.load(open(f"{out}/merged.json"))
c = s["cells"][0]
r = man["resources"]
established = max(int(x) for x in open(f"{out}/established.txt").read().split() or ["0"])
refused = sum(open(f).read().count("cannot accept") for f in glob.glob(f"{out}/serve-*.log"))
up = sorted(int(row["ws_upgrade_ns"]) for row in csv.DictReader(open(f"{out}/merged/requests.csv"))
            if row["ws_upgrade_ns"])
q = lambda p: up[min(len(up) - 1, int(p * len(up)))] / 1e6
print(f"merged: {c['requests']} requests, {c['ok']} ok, {c['failed']} failed, {c['sessions']} sessions; "
      f"peak concurrent sessions {r['peak_sessions']} on the merged axis; "
      f"{r['kib_per_session']:.1f} KiB per session (client processes)")
print(f"kernel: at most {established} established connections on the server port (ss, every 0.2 s); "
      f"accept failures logged by the {procs} simulator processes: {refused}")
print(f"WebSocket upgrade ms p50/p99/max: {q(0.5):.2f}/{q(0.99):.2f}/{up[-1] / 1e6:.2f} ({len(up)} connections)")
print(f"harness verdict: {s.get('harness', {}).get('verdict')}")
ok = c["failed"] == 0 and c["requests"] == 40000 and refused == 0 and established >= 20000
sys.exit(0 if ok else 1)
PY
