#!/usr/bin/env bash
# AIPerf 0.13 and spark-bench side by side against one `spark-bench serve --profile fast`
# (issue 22): client CPU per request, output tok/s, and TTFT p50 over the simulator's own TTFT.
#
#   scripts/aiperf-side-by-side.sh [--bin PATH] [--requests N] [--concurrency "32 256"]
#                                  [--isl TOKENS] [--osl TOKENS] [--out DIR] [--port P]
#                                  [--no-rate-matched]
#
# The simulator runs on core 1 (taskset -c 1), each client on core 0, one after the other:
# AIPerf first, then spark-bench with the same concurrency, request count, output length
# and the prompt length the server reported for AIPerf's prompts. Client CPU is the whole
# process tree's (user + sys, every AIPerf service and worker included), from
# getrusage(RUSAGE_CHILDREN) in a child subreaper (scripts/aiperf_side_by_side.py cpu).
# The simulator's own TTFT is its timing model's: API overhead 0.2 ms + session init 0.5 ms
# + prompt tokens / 10M tok/s (no queue below its capacity of 1024); spark-bench's
# server_ttft (from the `x-sim-timing-flavour: cerebras` time_info, which leaves out the API
# overhead; rows.jsonl server_ttft_p50_ms) cross-checks it. Both tools send that header, so they read the same stream.
# The simulator's measured TTFT (GET /v1/sim/ttft?since=K after each run, K read before it:
# request read → first chunk written, for the run's own responses) adds what the model leaves out: its wait for its
# own CPU when a client drives it to saturation. TTFT p50 over that is the client's share
# (plus the kernel's and the request's wait before the simulator read it).
#
# The AIPerf venv (target/aiperf-venv, `pip install aiperf==0.13.0`, ~2 min) and an offline
# tokenizer (AIPerf's `builtin` one downloads tiktoken's o200k_base at start) are made on
# first use. A third row per concurrency (unless --no-rate-matched) runs spark-bench open
# loop at AIPerf's achieved request rate, so the simulator is as busy as under AIPerf.
# Results: OUT/rows.jsonl, OUT/table.txt, each tool's own output under OUT/.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
bin="$root/target/release/spark-bench"
requests=10000
concs="32 256"
isl=128
osl=64
port=18390
rate_matched=1
out="$root/target/aiperf-side-by-side/$(date -u +%Y%m%d-%H%M%S)"
while [ $# -gt 0 ]; do
  case "$1" in
    --bin) bin=$2; shift 2 ;;
    --requests) requests=$2; shift 2 ;;
    --concurrency) concs=$2; shift 2 ;;
    --isl) isl=$2; shift 2 ;;
    --osl) osl=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --port) port=$2; shift 2 ;;
    --no-rate-matched) rate_matched=0; shift ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
helper="python3 $here/aiperf_side_by_side.py"
venv="$root/target/aiperf-venv"
mkdir -p "$out"

if [ ! -x "$venv/bin/aiperf" ]; then
  echo "== installing aiperf 0.13.0 into $venv"
  t0=$(date +%s)
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q aiperf==0.13.0
  echo "   installed in $(( $(date +%s) - t0 )) s"
fi
tok="$root/target/aiperf-tokenizer"
if [ ! -f "$tok/tokenizer.json" ]; then
  corpus=$("$venv/bin/python" -c 'import aiperf, os; print(os.path.join(os.path.dirname(aiperf.__file__), "dataset/generator/assets/shakespeare.txt"))')
  "$venv/bin/python" "$here/aiperf_side_by_side.py" tokenizer "$corpus" "$tok" 2>/dev/null
fi

echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "== load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== spark-bench: $bin ($("$bin" --version))"

taskset -c 1 "$bin" serve --profile fast --listen "127.0.0.1:$port" >"$out/serve.log" 2>&1 &
sim=$!
trap 'kill $sim 2>/dev/null || true' EXIT
for _ in $(seq 50); do
  curl -sf "http://127.0.0.1:$port/v1/models" >/dev/null && break
  sleep 0.1
done
url="http://127.0.0.1:$port"
rows="$out/rows.jsonl"
: >"$rows"

# aiperf_run DIR CONCURRENCY REQUESTS: AIPerf on core 0, its process tree's CPU in DIR.cpu.json.
aiperf_run() {
  $helper cpu "$1.cpu.json" -- taskset -c 0 "$venv/bin/aiperf" profile \
    --url "$url" -m sim-fast --endpoint-type chat --streaming \
    --concurrency "$2" --request-count "$3" \
    --tokenizer "$tok" \
    --prompt-input-tokens-mean "$isl" --prompt-input-tokens-stddev 0 \
    --prompt-output-tokens-mean "$osl" --prompt-output-tokens-stddev 0 \
    --extra-inputs ignore_eos:true --use-server-token-count \
    --header x-sim-timing-flavour:cerebras \
    --ui none --no-server-metrics --no-gpu-telemetry --random-seed 7 \
    --artifact-dir "$1" >"$1.log" 2>&1 || { echo "aiperf failed: $1.log" >&2; tail -20 "$1.log" >&2; exit 1; }
}

# sb_run DIR CONCURRENCY REQUESTS PROMPT_TOKENS [RUN FLAGS...]: spark-bench on core 0, likewise.
sb_run() {
  mkdir -p "$1"
  cat >"$1.toml" <<EOF
name = "beside-aiperf"
seed = 7
[load]
sessions = $3
concurrency = $2
[matrix]
targets = ["sim-ext"]
transports = ["http-pooled"]
[targets.sim-ext]
base_url = "$url/v1"
api = "chat-completions"
model = "sim-fast"
ignore_eos = true
headers = { "x-sim-timing-flavour" = "cerebras" }
[workload]
input_tokens = { dist = "fixed", value = $4 }
output_tokens = { dist = "fixed", value = $osl }
turns = 1
EOF
  local dir=$1
  shift 4
  $helper cpu "$dir.cpu.json" -- taskset -c 0 "$bin" run "$dir.toml" --cache as-is --quiet \
    --no-report --out "$dir" "$@" >"$dir.log" 2>&1 || { echo "spark-bench failed: $dir.log" >&2; tail -20 "$dir.log" >&2; exit 1; }
}

sim_cpu() { $helper proc-cpu $sim; }
# sim_seq: the sequence number the simulator's next response gets; sim_ttft_of FILE SEQ: its
# measured TTFT over the responses from SEQ on (the run just made), into FILE.
sim_seq() {
  curl -sf "$url/v1/sim/ttft?since=18446744073709551615" | python3 -c 'import json,sys; print(json.load(sys.stdin)["next"])' \
    || { echo "no GET /v1/sim/ttft on $bin (a build older than the endpoint?)" >&2; exit 1; }
}
sim_ttft_of() { curl -sf "$url/v1/sim/ttft?since=$2" >"$1" || { echo "GET /v1/sim/ttft failed" >&2; exit 1; }; }
load1() { cut -d' ' -f1 /proc/loadavg; }

for c in $concs; do
  small=$((2 * c))   # a short run of each tool: its fixed start-up and tear-down cost
  a="$out/aiperf-c$c"
  echo "== aiperf, concurrency $c: $small requests, then $requests (load $(load1))"
  aiperf_run "$a-small" "$c" "$small"
  k=$(sim_seq); s0=$(sim_cpu); aiperf_run "$a" "$c" "$requests"; s1=$(sim_cpu)
  sim_ttft_of "$a.sim-ttft.json" "$k"
  server_isl=$($helper aiperf-isl "$a")
  sim_ttft=$(python3 -c "print(0.2 + 0.5 + $server_isl / 1e7 * 1e3)")
  $helper row aiperf "$c" "$a" "$a.cpu.json" "$a-small.cpu.json" "$small" \
    "$(python3 -c "print($s1 - $s0)")" "$sim_ttft" "$a.sim-ttft.json" >>"$rows"

  # spark-bench with the prompt length the server counted for AIPerf's prompts (the
  # simulator's chat template adds one token to the user message).
  s="$out/sb-c$c"
  echo "== spark-bench, concurrency $c: $small requests, then $requests (load $(load1))"
  sb_run "$s-small" "$c" "$small" $((server_isl - 1))
  k=$(sim_seq); s0=$(sim_cpu); sb_run "$s" "$c" "$requests" $((server_isl - 1)); s1=$(sim_cpu)
  sim_ttft_of "$s.sim-ttft.json" "$k"
  $helper row spark-bench "$c" "$s" "$s.cpu.json" "$s-small.cpu.json" "$small" \
    "$(python3 -c "print($s1 - $s0)")" "$sim_ttft" "$s.sim-ttft.json" >>"$rows"

  # The same requests, open loop at AIPerf's achieved request rate (constant gaps, at most
  # CONCURRENCY in flight): the simulator as busy as AIPerf kept it, so what is left of the
  # TTFT inflation is the client's.
  if [ "$rate_matched" = 1 ]; then
    rate=$($helper aiperf-rate "$a")
    o="$out/sb-rate-c$c"
    echo "== spark-bench, open loop at AIPerf's $rate req/s, at most $c in flight (load $(load1))"
    k=$(sim_seq); s0=$(sim_cpu)
    sb_run "$o" "$c" "$requests" $((server_isl - 1)) --rate "$rate" --arrival constant --max-in-flight "$c"
    s1=$(sim_cpu); sim_ttft_of "$o.sim-ttft.json" "$k"
    $helper row sb@aiperf-rate "$c" "$o" "$o.cpu.json" - 0 \
      "$(python3 -c "print($s1 - $s0)")" "$sim_ttft" "$o.sim-ttft.json" >>"$rows"
  fi
done

echo "== load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo
$helper table "$rows" | tee "$out/table.txt"
echo
echo "results: $out"
