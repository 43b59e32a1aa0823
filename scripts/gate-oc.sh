#!/usr/bin/env bash
# The regression gate's operating characteristic, measured: how often scripts/ci-regression.sh
# (default settings) fails an A/A pair (false alarms), and how often it catches an injected
# +10% TTFT and −10% decode rate (detection), with Wilson 95% intervals; a stall injected on
# purpose (SIGSTOP/SIGCONT of a run for 200 ms) and what the gate makes of it; and a 20-run
# gate history of the last 30 A/A pairs followed by 8 pairs with +10% TTFT (the shift starts
# at run 31), drawn by `spark-bench history`. Per section: first-comparison alarms (before
# confirmation), final alarms, the headline counts (PASS ✅, PASS ⚠️, NO DECISION) and the
# wall time per pair; every pair's line is in OUT/pairs.txt.
#
# Usage:
#   scripts/gate-oc.sh                       # all sections, the numbers docs/gate.md quotes
#   AA_PAIRS=10 DET_PAIRS=5 scripts/gate-oc.sh   # a quicker look
#
# Environment (all optional):
#   BIN        spark-bench binary (default: target/release/spark-bench; built if missing)
#   AA_PAIRS   A/A pairs (default 40): baseline and candidate the same build and simulator,
#              different seeds (the "every run draws new lengths" case)
#   DET_PAIRS  pairs per injected change (default 20)
#   HOGS       CPU-bound busy loops running beside the runs (default 2)
#   LOAD_STEP  1 (default): the busy loops stop half-way through the A/A pairs, so the A/A
#              history sees the machine's load change; 0: they run throughout
#   SECTIONS   which sections to run (default "aa ttft decode stall history")
#   PRIORITY   passed to ci-regression.sh (auto, realtime, normal); the issue-26 figures are
#              measured with PRIORITY=normal
#   OUT        working directory (default target/gate-oc); a summary goes to OUT/oc.txt
#
# Cost: each pair is one default gate (3 runs per side, ~4 s a run, plus a decide round of
# 3 more when it passed with inconclusive rows, and a confirmation re-run when it fails):
# ~30 s; the defaults (80 pairs, the stall and the history) take ~45 minutes on 2 cores.
set -euo pipefail
repo=$(git rev-parse --show-toplevel)
cd "$repo"
BIN=${BIN:-target/release/spark-bench}
aa_pairs=${AA_PAIRS:-40}
det_pairs=${DET_PAIRS:-20}
hogs=${HOGS:-2}
sections=${SECTIONS:-aa ttft decode stall history}
out=${OUT:-target/gate-oc}
mkdir -p "$out"
out=$(cd "$out" && pwd)
summary=$out/oc.txt
: >"$summary"
say() { echo "$*" | tee -a "$summary" >&2; }

if [ ! -x "$BIN" ]; then
    cargo build --locked --release --bin spark-bench >&2
    BIN=target/release/spark-bench
fi
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")

hog_pids=()
stop_hogs() { for p in "${hog_pids[@]}"; do kill "$p" 2>/dev/null || true; done; }
trap stop_hogs EXIT
for ((h = 0; h < hogs; h++)); do
    sh -c 'while :; do :; done' &
    hog_pids+=($!)
done
say "gate-oc: $(date -u +%FT%TZ) on $(hostname), $(nproc) cores, $hogs busy loops beside, binary $BIN"

# wilson K N → "K/N = P% (95% CI L–U%)"
wilson() {
    awk -v k="$1" -v n="$2" 'BEGIN {
        z = 1.959964; p = k / n; d = 1 + z*z/n
        c = (p + z*z/(2*n)) / d; h = z / d * sqrt(p*(1-p)/n + z*z/(4*n*n))
        lo = c - h; if (lo < 0) lo = 0; hi = c + h; if (hi > 1) hi = 1
        printf "%d/%d = %.1f%% (95%% Wilson CI %.1f–%.1f%%)", k, n, 100*p, 100*lo, 100*hi }'
}

# outcome FILE → the verdict JSON's outcome (pass, pass-inconclusive, no-decision,
# regression, failed), or "-" when the file is missing
outcome() {
    [ -f "$1" ] || { echo -; return; }
    python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("outcome", "-"))' "$1" 2>/dev/null || echo -
}

# pair NAME I SEED CAND_SEED CAND_ARGS [HISTORY] → prints "FIRST_EXIT FINAL_EXIT OUTCOME SECS"
pair() {
    local name=$1 i=$2 s=$3 cs=$4 cargs=$5 hist=${6:-none} start end code first dir
    dir=$out/$name/$i
    start=$(date +%s)
    set +e
    BASELINE_BIN=$BIN CANDIDATE_BIN=$BIN SEED=$s CANDIDATE_SEED=$cs \
        CANDIDATE_RUN_ARGS="$cargs" HISTORY_DIR=$hist OUT="$dir" \
        scripts/ci-regression.sh >"$out/$name-$i.log" 2>&1
    code=$?
    set -e
    end=$(date +%s)
    first=$(sed -n 's/^ci-regression: first comparison: exit \([0-9]*\)$/\1/p' "$out/$name-$i.log" | head -n 1)
    local oc decided
    oc=$(outcome "$dir/verdict.json")
    decided=$(grep -c '^ci-regression: .* decide round [0-9]*/' "$out/$name-$i.log" || true)
    echo "$name $i seeds $s/$cs first-exit ${first:--} exit $code outcome $oc decide-rounds $decided $((end - start))s" >>"$out/pairs.txt"
    echo "${first:-2} $code $oc $((end - start))"
}

# section NAME PAIRS CAND_ARGS → first-comparison alarms, final alarms (exit 1), headline
# counts and wall time per pair
section() {
    local name=$1 n=$2 cargs=$3 first_fails=0 fails=0 errors=0 pass=0 passw=0 nodec=0 secs=0 t0 hist
    local first code oc took
    t0=$(date +%s)
    for ((i = 1; i <= n; i++)); do
        hist=none
        # The histories: every A/A pair in history-aa (no change point expected); the last
        # 12 A/A entries then the first 8 TTFT pairs in history (a +10% shift at run 13).
        if [[ " $sections " == *" history "* ]]; then
            [ "$name" = aa ] && hist=$out/history-aa
            if [ "$name" = ttft ] && [ "$i" -le 8 ]; then
                hist=$out/history
                if [ "$i" -eq 1 ] && [ -f "$out/history-aa/history.jsonl" ]; then
                    mkdir -p "$out/history"
                    tail -n 12 "$out/history-aa/history.jsonl" >"$out/history/history.jsonl"
                fi
            fi
        fi
        # The machine's load changes half-way through the A/A pairs: the busy loops stop.
        if [ "$name" = aa ] && [ "${LOAD_STEP:-1}" = 1 ] && [ "$i" -eq $((n / 2 + 1)) ] && [ "${#hog_pids[@]}" -gt 0 ]; then
            stop_hogs
            hog_pids=()
            say "aa: load step: the $hogs busy loops stopped before pair $i"
        fi
        read -r first code oc took < <(pair "$name" "$i" $((100 * i + 7)) $((100 * i + 57)) "$cargs" "$hist")
        [ "$first" = 1 ] && first_fails=$((first_fails + 1))
        case $code in 0) ;; 1) fails=$((fails + 1)) ;; 4) ;; *) errors=$((errors + 1)) ;; esac
        case $oc in pass) pass=$((pass + 1)) ;; pass-inconclusive) passw=$((passw + 1)) ;; no-decision) nodec=$((nodec + 1)) ;; esac
        secs=$((secs + took))
        echo "gate-oc: $name pair $i/$n: first exit $first, final exit $code ($oc), ${took}s" >&2
    done
    say "$name: first comparison exit 1 in $(wilson "$first_fails" "$n"); final exit 1 (after confirmation) in $(wilson "$fails" "$n")"
    say "$name: headline PASS ✅ $pass/$n, PASS ⚠️ $passw/$n, NO DECISION $nodec/$n; errors (exit 2): $errors; wall $((secs / n)) s per pair ($(($(date +%s) - t0)) s in all)"
}

[[ " $sections " == *" history "* ]] && rm -rf "$out/history" "$out/history-aa"
[[ " $sections " == *" aa "* ]] && section aa "$aa_pairs" ""
[[ " $sections " == *" ttft "* ]] && section ttft "$det_pairs" "--targets profiles/inject-slow-ttft.toml"
[[ " $sections " == *" decode "* ]] && section decode "$det_pairs" "--targets profiles/inject-slow-decode.toml"

if [[ " $sections " == *" stall "* ]]; then
    # Baseline: 3 runs. Candidate: 3 runs of the same build, the second one stopped for
    # 200 ms (SIGSTOP/SIGCONT) 1.5 s in. Same priority as the gate uses.
    sd=$out/stall
    rm -rf "$sd"
    prio=()
    chrt -f 1 true 2>/dev/null && prio=(chrt -f 1)
    for i in 0 1 2; do
        "${prio[@]}" "$BIN" run scenarios/ci-gate.toml --out "$sd/baseline" --quiet --no-report --seed $((11 + i)) >/dev/null 2>>"$sd.log"
        "${prio[@]}" "$BIN" run scenarios/ci-gate.toml --out "$sd/candidate" --quiet --no-report --seed $((11 + i)) >/dev/null 2>>"$sd.log" &
        pid=$!
        if [ $i -eq 1 ]; then
            sleep 1.5
            kill -STOP "$pid"
            sleep 0.2
            kill -CONT "$pid"
        fi
        wait "$pid"
    done
    stalled=$(ls -d "$sd"/candidate/*/ | sed -n 2p)
    say "stall: $(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(len(d["windows"]), "window(s) in stalls.json:", "; ".join("%.0f ms at %.2f s, %d streams silent, %d late dispatches, cause %s" % (w["duration_ms"], w["start_ns"]/1e9, w["streams"], w["late_dispatches"], w["cause"]) for w in d["windows"]), "(threshold %.0f ms)" % d["threshold_ms"])' "$stalled/stalls.json")"
    set +e
    "$BIN" compare "$sd/baseline" "$sd/candidate" >"$sd/verdict.txt" 2>&1
    code=$?
    "$BIN" compare "$sd/baseline" "$sd/candidate" --format md >"$sd/verdict.md" 2>&1
    set -e
    say "stall: gate on 3 baseline runs vs 3 candidate runs (one stalled): exit $code; $(grep -o 'candidate run [^;]*; [^;]*;[^(]*' "$sd/verdict.txt" | head -n 1)"
    # Without the exclusion the same data would be judged on the stalled requests too:
    # show what the stalled run alone looks like against one baseline run.
    first_base=$(ls -d "$sd"/baseline/*/ | sed -n 2p)
    set +e
    "$BIN" compare "$first_base" "$stalled" >"$sd/verdict-one.txt" 2>&1
    code1=$?
    set -e
    say "stall: gate on the stalled run alone vs one baseline run: exit $code1 (verdict in $sd/verdict-one.txt)"
fi

if [[ " $sections " == *" history "* ]]; then
    for h in history-aa history; do
        [ -f "$out/$h/history.jsonl" ] || continue
        "$BIN" history "$out/$h" --format md >"$out/$h.md" 2>/dev/null
        n=$(wc -l <"$out/$h/history.jsonl")
        say "$h: $n gate runs in $out/$h; change points: $(grep -c '^| .* | [0-9]* | .* | .* | [+-]' "$out/$h.md" || true) (table in $out/$h.md)"
        grep -A12 '^### Change points' "$out/$h.md" | tee -a "$summary" >&2
    done
fi
say "gate-oc: done $(date -u +%FT%TZ); per-pair log: $out/pairs.txt"
