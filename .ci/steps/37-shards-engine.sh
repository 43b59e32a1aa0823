#!/usr/bin/env bash
# Shards on a real engine, end to end: a one-node Slurm cluster from Debian's slurm-wlm
# (munged, slurmctld and slurmd, started here on 127.0.0.1 with a generated slurm.conf)
# schedules one plan as a job array of 4 shards (deploy/slurm/shards.sbatch), then a merge
# job that depends on the array; the step renders the report and checks the merged
# directory. Prints the cluster's start time and the step's wall time.
#
# Why Slurm and not Ray (scripts/shards-ray.sh): see README "Sharded runs". No cgroups (a VM
# or container may not delegate them): proctrack/linuxproc, task/none. The node declares 4
# CPUs (SlurmdParameters=config_overrides) so the 4 shards run at once even on 2 cores.
# Bounded: every wait and command has a timeout; the daemons and jobs are stopped on exit.
# SHARDS_BIN=FILE uses that binary and skips the build. Cost on the 2-core VM: ~8 s warm
# (cluster up in ~1.2 s), ~15 s with the apt-get install (docs/measurements.md).
source "$(dirname "$0")/../lib.sh"

START=$(date +%s.%N)
elapsed() { python3 -c 'import sys, time; print(f"{time.time() - float(sys.argv[1]):.1f}")' "$1"; }

if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null \
  || ! command -v sbatch >/dev/null || ! command -v munged >/dev/null; then
  echo "installing Debian's slurm-wlm and munge"
  export DEBIAN_FRONTEND=noninteractive
  apt_log=$(mktemp)
  on_exit "rm -f '$apt_log'"
  { timeout 300 apt-get update -qq && timeout 600 apt-get install -y -qq slurm-wlm munge; } \
    >"$apt_log" 2>&1 || { cat "$apt_log"; exit 1; }
  echo "slurm-wlm and munge installed in $(elapsed "$START") s"
fi

if [ -z "${SHARDS_BIN:-}" ]; then
  TB=$(date +%s.%N)
  timeout 900 cargo build --quiet --locked --bin spark-bench
  echo "cargo build: $(elapsed "$TB") s"
fi
BIN=${SHARDS_BIN:-$PWD/target/debug/spark-bench}

# Everything the cluster writes lives in $D (munged wants its socket's directories
# traversable by all, its key readable by its owner only).
D=$(mktemp -d /tmp/slurm-sb.XXXXXX)
chmod 755 "$D"
mkdir -m 755 "$D/munge" "$D/spool" "$D/state" "$D/log" "$D/out"
mkdir -m 700 "$D/munge/key"
head -c 1024 /dev/urandom >"$D/munge/key/munge.key"
chmod 600 "$D/munge/key/munge.key"

# Stop jobs first (while slurmctld and slurmd can still do it), then the daemons, then any
# process left holding a file in $D (a job step whose slurmstepd outlived slurmd), then
# remove $D. The daemons run in their own session (setsid) so that a signal to
# the step's process group (Ctrl-C, `timeout`) reaches the step, which stops them in order.
MUNGED_PID="" CTLD_PID="" SLURMD_PID=""
slurm_down() {
  if [ -n "$CTLD_PID" ] && kill -0 "$CTLD_PID" 2>/dev/null; then
    timeout 10 scancel --quiet --user=root || true
    timeout 15 sh -c 'while [ -n "$(squeue -h -o %i)" ]; do sleep 0.5; done' || true
  fi
  local pid
  for pid in $SLURMD_PID $CTLD_PID $MUNGED_PID; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in $SLURMD_PID $CTLD_PID $MUNGED_PID; do
    timeout 10 tail --pid="$pid" -f /dev/null 2>/dev/null || kill -9 "$pid" 2>/dev/null || true
  done
  kill_holding "$D"
}
on_exit slurm_down
on_exit "rm -rf '$D'"
show_logs() {
  local f
  for f in "$D"/log/*.log "$D"/out/*.out; do
    [ -e "$f" ] && { echo "--- $f"; tail -n 30 "$f"; }
  done
}

NODE=$(hostname -s)
CTLD_PORT=$(free_port)
SLURMD_PORT=$(free_port)
while [ "$SLURMD_PORT" = "$CTLD_PORT" ]; do SLURMD_PORT=$(free_port); done
export SLURM_CONF="$D/slurm.conf"
cat >"$SLURM_CONF" <<EOF
# One node on 127.0.0.1, written by .ci/steps/37-shards-engine.sh.
ClusterName=sparkbench
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmdPort=$SLURMD_PORT
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$D/munge/munge.sock
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool
SlurmctldPidFile=$D/slurmctld.pid
SlurmdPidFile=$D/slurmd.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
ReturnToService=2
MessageTimeout=30
SlurmdTimeout=120
InactiveLimit=0
KillWait=5
MinJobAge=600
NodeName=$NODE NodeAddr=127.0.0.1 NodeHostname=$NODE CPUs=4 State=UNKNOWN
PartitionName=bench Nodes=$NODE Default=YES MaxTime=10 State=UP
EOF

T0=$(date +%s.%N)
setsid munged --foreground --socket="$D/munge/munge.sock" --key-file="$D/munge/key/munge.key" \
  --pid-file="$D/munge/munged.pid" --seed-file="$D/munge/key/munged.seed" \
  >"$D/log/munged.log" 2>&1 &
MUNGED_PID=$!
wait_until 30 "$MUNGED_PID" test -S "$D/munge/munge.sock" || { show_logs; exit 1; }
setsid slurmctld -D -f "$SLURM_CONF" >"$D/log/slurmctld.out.log" 2>&1 &
CTLD_PID=$!
setsid slurmd -D -N "$NODE" -f "$SLURM_CONF" >"$D/log/slurmd.out.log" 2>&1 &
SLURMD_PID=$!
node_idle() { [ "$(sinfo -h -n "$NODE" -o %T 2>/dev/null)" = idle ]; }
wait_until 90 "$SLURMD_PID" node_idle || { show_logs; exit 1; }
kill -0 "$CTLD_PID" || { show_logs; exit 1; }
echo "slurm cluster up in $(elapsed "$T0") s (munged, slurmctld, slurmd; node $NODE idle)"
sinfo -N -o "%N %c %T %P"

# The plan: 4 shards as one job array, then the merge as a job that runs only after every
# shard succeeded (and is cancelled when one did not).
OUT="$D/results"
export SPARK_BENCH=$BIN
T1=$(date +%s.%N)
JOB=$(timeout 60 sbatch --parsable --array=0-3 --output="$D/out/shard-%a.out" \
  deploy/slurm/shards.sbatch "$OUT" scenarios/smoke.toml --sessions 8 --concurrency 4)
echo "submitted job array $JOB (4 shards)"
MERGE_JOB=$(timeout 60 sbatch --parsable --dependency="afterok:$JOB" --kill-on-invalid-dep=yes \
  --output="$D/out/merge.out" deploy/slurm/shards.sbatch "$OUT")
echo "submitted merge job $MERGE_JOB (after the array)"
# Until both left the queue (polled: `sbatch --wait` polls at ~10 s and exits 0 for a merge
# job cancelled because a shard failed); their end states are checked from `scontrol`, which
# keeps finished jobs for MinJobAge.
queue_empty() { [ -z "$(squeue -h -o %i -j "$JOB,$MERGE_JOB")" ]; }
wait_until 180 "$CTLD_PID" queue_empty || { show_logs; exit 1; }
scontrol -o show job "$JOB" >"$D/out/array.txt" || true
scontrol -o show job "$MERGE_JOB" >>"$D/out/array.txt" || true
if grep -v "JobState=COMPLETED .*ExitCode=0:0" "$D/out/array.txt" \
  || [ "$(grep -c "JobState=COMPLETED .*ExitCode=0:0" "$D/out/array.txt")" -ne 5 ]; then
  echo "a shard or the merge did not complete (states above)"
  show_logs
  exit 1
fi
echo "4 shards and the merge ran under Slurm in $(elapsed "$T1") s"
head -qn 1 "$D"/out/shard-*.out "$D/out/merge.out"

timeout 60 "$BIN" report "$OUT/merged" --format md,html >/dev/null
grep -q "sim-wafer" "$OUT/merged/report.md"
test -s "$OUT/merged/report.html"
python3 scripts/check_merged.py "$OUT/merged" 4 Slurm
python3 - "$D/out/array.txt" "$JOB" "$MERGE_JOB" <<'PY'
import re, sys
array, job, merge_job = sys.argv[1:]
tasks = [dict(re.findall(r"(\w+)=(\S+)", line)) for line in open(array) if line.strip()]
merge = [t for t in tasks if t.get("JobId") == merge_job][0]
tasks = [t for t in tasks if t.get("ArrayJobId") == job and t.get("ArrayTaskId", "").isdigit()]
assert sorted(int(t["ArrayTaskId"]) for t in tasks) == [0, 1, 2, 3], tasks
assert all(t["JobState"] == "COMPLETED" and t["ExitCode"] == "0:0" for t in tasks), tasks
for t in sorted(tasks, key=lambda t: int(t["ArrayTaskId"])):
    print(f"array task {t['ArrayTaskId']}: {t['JobState']} on {t['NodeList']}, "
          f"{t['StartTime']} to {t['EndTime']}")
print(f"merge job {merge_job}: {merge['JobState']}, {merge['StartTime']} to {merge['EndTime']}")
PY
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "shards-engine step: $(elapsed "$START") s wall"
