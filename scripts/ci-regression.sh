#!/usr/bin/env bash
# The CI regression gate, end to end: build a baseline and a candidate spark-bench (two git
# refs, or two binaries you already have), run the scenario REPEAT times with each,
# interleaved (B1 C1 B2 C2 …, so each pair of runs sees the same machine), compare (the
# hierarchical bootstrap resamples runs, then requests), add up to DECIDE rounds of REPEAT
# more interleaved pairs when it passed with inconclusive rows (pooled with the first runs,
# re-compared; stops as soon as no row is inconclusive), re-run both sides CONFIRM times if
# it regressed (a regression must reproduce against a fresh baseline too, so a fault in
# either side's first runs is cleared), append the verdict to the gate history, write the
# Markdown verdict and history to $GITHUB_STEP_SUMMARY when set, and exit with the gate's
# code:
#   0 pass, 1 regression (or inconclusive with --fail-on-inconclusive), 2 error,
#   4 no decision (no gated row could decide: the scenario is too small for its bands).
# The first comparison's verdict (before any decide or confirmation round) is kept in
# $OUT/first-verdict.json.
#
# Usage:
#   scripts/ci-regression.sh [BASE_REF [HEAD_REF]]
#
# Arguments and environment (all optional):
#   BASE_REF        git ref of the baseline build (default: origin/main, else main)
#   HEAD_REF        git ref of the candidate build (default: the working tree as it is)
#   BASELINE_BIN    use this spark-bench binary as the baseline instead of building BASE_REF
#   CANDIDATE_BIN   use this binary as the candidate instead of building HEAD_REF
#   SCENARIO        scenario file, read from the working tree for both runs so the scenario
#                   hash matches (default: scenarios/ci-gate.toml)
#   REPEAT          runs per side (default 3); repeat i uses seed SEED + i − 1
#   SEED            first seed of the baseline's repeats (default 1)
#   CANDIDATE_SEED  first seed of the candidate's repeats (default SEED: both sides replay the
#                   same conversations, so e2e/output_tok_s/session_wall are gated, paired)
#   DECIDE          decide rounds (default 1): when the first comparison passed (exit 0) with
#                   inconclusive rows (verdict JSON counts.inconclusive > 0), run REPEAT more
#                   interleaved pairs with the next seeds (SEED + REPEAT…, CANDIDATE_SEED +
#                   REPEAT…) into the same result directories and compare all runs, pooled;
#                   repeat up to DECIDE times, stopping once no row is inconclusive. A
#                   regression a decide round finds still goes through the CONFIRM rounds.
#                   0: never. The verdict's first line says how many ran.
#   CONFIRM         confirmation rounds a regression must reproduce in (default 1); each round
#                   re-runs baseline and candidate REPEAT times, interleaved
#   PRIORITY        auto (default): run the benchmark at real-time priority (SCHED_FIFO 1,
#                   via chrt, or sudo -n chrt) when allowed, else normal; realtime: require
#                   it; normal: never. A busy runner then delays the harness far less.
#   HISTORY_DIR     gate history to append to (default: $OUT/history; "none" to skip)
#   RUN_ARGS        extra arguments for every `spark-bench run` (e.g. "--link rtt=10ms")
#   CANDIDATE_RUN_ARGS  extra arguments for the candidate runs only (e.g. a --targets FILE
#                   pointing at a slower deployment, to see the gate fail)
#   GATE_ARGS       extra arguments for `spark-bench compare` (e.g. "--threshold ttft=+15%
#                   --fail-on-inconclusive")
#   OUT             working directory for builds and results (default: target/ci-regression)
#   CARGO_PROFILE   cargo profile for the builds (default: release)
#
# Both builds share one cargo target directory, so only spark-bench itself is compiled twice.
# The scenario runs against the embedded simulator unless the scenario or RUN_ARGS name real
# targets; for real endpoints the API key's environment variable must be set.
set -euo pipefail

repo=$(git rev-parse --show-toplevel)
cd "$repo"

base_ref=${1:-${BASE_REF:-}}
head_ref=${2:-${HEAD_REF:-}}
scenario=${SCENARIO:-scenarios/ci-gate.toml}
out=${OUT:-target/ci-regression}
repeat=${REPEAT:-3}
seed=${SEED:-1}
cand_seed=${CANDIDATE_SEED:-$seed}
confirm=${CONFIRM:-1}
decide=${DECIDE:-1}
priority=${PRIORITY:-auto}
profile=${CARGO_PROFILE:-release}
profile_dir=$profile
[ "$profile" = dev ] && profile_dir=debug

die() { echo "ci-regression: $*" >&2; exit 2; }

[ -f "$scenario" ] || die "scenario $scenario not found; set SCENARIO to a scenario file"
mkdir -p "$out/bin"
out=$(cd "$out" && pwd)
target_dir=${CARGO_TARGET_DIR:-$repo/target}

# build NAME REF → $out/bin/NAME (REF empty: the working tree)
build() {
    local name=$1 ref=$2 src=$repo
    if [ -n "$ref" ]; then
        git rev-parse --verify --quiet "$ref^{commit}" >/dev/null \
            || die "git ref $ref not found; fetch it (git fetch origin $ref) or set ${name^^}_BIN"
        src="$out/src-$name"
        rm -rf "$src"
        git worktree prune
        git worktree add --detach --force "$src" "$ref" >/dev/null
    fi
    echo "ci-regression: building $name (${ref:-working tree}, $profile)" >&2
    cargo build --locked --profile "$profile" --bin spark-bench \
        --manifest-path "$src/Cargo.toml" --target-dir "$target_dir" >&2 \
        || die "building $name (${ref:-working tree}) failed"
    cp "$target_dir/$profile_dir/spark-bench" "$out/bin/$name"
    if [ -n "$ref" ]; then
        git worktree remove --force "$src"
    fi
}

if [ -z "${BASELINE_BIN:-}" ]; then
    if [ -z "$base_ref" ]; then
        if git rev-parse --verify --quiet origin/main >/dev/null; then base_ref=origin/main; else base_ref=main; fi
    fi
    build baseline "$base_ref"
    BASELINE_BIN=$out/bin/baseline
fi
if [ -z "${CANDIDATE_BIN:-}" ]; then
    build candidate "$head_ref"
    CANDIDATE_BIN=$out/bin/candidate
fi
[ -x "$BASELINE_BIN" ] || die "baseline binary $BASELINE_BIN is not executable"
[ -x "$CANDIDATE_BIN" ] || die "candidate binary $CANDIDATE_BIN is not executable"

[[ "$repeat" =~ ^[1-9][0-9]*$ ]] || die "REPEAT=$repeat: use a whole number ≥ 1"
[[ "$confirm" =~ ^[0-9]+$ ]] || die "CONFIRM=$confirm: use a whole number ≥ 0"
[[ "$decide" =~ ^[0-9]+$ ]] || die "DECIDE=$decide: use a whole number ≥ 0"
[[ "$seed" =~ ^[0-9]+$ && "$cand_seed" =~ ^[0-9]+$ ]] || die "SEED/CANDIDATE_SEED must be whole numbers"
history_dir=${HISTORY_DIR:-$out/history}

# Real-time priority for the benchmark processes (not for the builds): a SCHED_FIFO process
# is not preempted by the runner's other (SCHED_OTHER) work, so a neighbour's compile does
# not stretch the harness's timers. Measured on a loaded 2-core host with two busy loops
# beside: TTFT p50 moved ±9% between runs at normal priority, ±0.3% at SCHED_FIFO 1.
rt_mode=normal
case "$priority" in
    normal) ;;
    auto|realtime)
        if chrt -f 1 true 2>/dev/null; then rt_mode=chrt
        elif sudo -n chrt -f 1 true 2>/dev/null; then rt_mode=sudo
        elif [ "$priority" = realtime ]; then
            die "PRIORITY=realtime but neither chrt -f nor sudo -n chrt -f is allowed here; run as root, grant CAP_SYS_NICE, or use PRIORITY=auto"
        fi ;;
    *) die "PRIORITY=$priority: use auto, realtime or normal" ;;
esac
echo "ci-regression: benchmark priority: $([ $rt_mode = normal ] && echo "normal (scheduler noise from other jobs reaches the runs)" || echo "real-time SCHED_FIFO 1 ($rt_mode)")" >&2

# bench BIN ARGS…: runs spark-bench at the chosen priority.
bench() {
    case $rt_mode in
        chrt) chrt -f 1 "$@" ;;
        sudo) ( sudo -n chrt -f -p 1 "$BASHPID" >/dev/null && exec "$@" ) ;;
        *) "$@" ;;
    esac
}

# run NAME BIN SEED SETDIR EXTRA_ARGS → one repeat into SETDIR/RUN_ID/
run() {
    local name=$1 bin=$2 s=$3 root=$4 extra=$5 log="$out/logs/$1-seed$3-$(basename "$4").log"
    mkdir -p "$out/logs" "$root"
    echo "ci-regression: $name run, seed $s → $root" >&2
    # shellcheck disable=SC2086 # RUN_ARGS/extra are word lists on purpose
    if ! bench "$bin" run "$scenario" --out "$root" --quiet --seed "$s" ${RUN_ARGS:-} $extra >"${log%.log}.txt" 2>"$log"; then
        cat "$log" >&2
        die "the $name run (seed $s) failed (log: $log)"
    fi
}

base_dir=$out/results/baseline
cand_dir=$out/results/candidate
rm -rf "$out/results"
# Interleaved: B1 C1 B2 C2 … Only the last candidate run renders its report.
for ((i = 0; i < repeat; i++)); do
    run baseline "$BASELINE_BIN" $((seed + i)) "$base_dir" "--no-report"
    report="--no-report"
    [ $((i + 1)) -eq "$repeat" ] && report=""
    run candidate "$CANDIDATE_BIN" $((cand_seed + i)) "$cand_dir" "${CANDIDATE_RUN_ARGS:-} $report"
done

# gate [EXTRA…]: the candidate's gate decides (it is the code under review). Markdown for the
# job summary, JSON for machines, the text table for the log; the verdict is deterministic
# (seeded bootstrap), so the three renderings agree.
confirm_args=()
gate() {
    # shellcheck disable=SC2086
    "$CANDIDATE_BIN" compare "$base_dir" "$cand_dir" "${confirm_args[@]}" ${GATE_ARGS:-} "$@"
}
set +e
gate --format json >"$out/verdict.json"
code=$?
set -e
{ [ "$code" -le 1 ] || [ "$code" -eq 4 ]; } || { gate >&2 || true; die "compare failed (exit $code)"; }
cp "$out/verdict.json" "$out/first-verdict.json"
echo "ci-regression: first comparison: exit $code" >&2
# inconclusive → the verdict JSON's counts.inconclusive (0 when it cannot be read)
inconclusive() {
    local n
    n=$(grep -o '"inconclusive": [0-9]*' "$out/verdict.json" 2>/dev/null | head -n 1 | grep -o '[0-9]*$' || true)
    echo "${n:-0}"
}
decided=0
for ((d = 1; d <= decide && code == 0; d++)); do
    open_rows=$(inconclusive)
    [ "$open_rows" -gt 0 ] || break
    echo "ci-regression: passed with $open_rows inconclusive row(s); decide round $d/$decide: $repeat more runs per side, interleaved, pooled with the earlier ones" >&2
    for ((i = 0; i < repeat; i++)); do
        run baseline "$BASELINE_BIN" $((seed + d * repeat + i)) "$base_dir" "--no-report"
        run candidate "$CANDIDATE_BIN" $((cand_seed + d * repeat + i)) "$cand_dir" "${CANDIDATE_RUN_ARGS:-} --no-report"
    done
    decided=$d
    set +e
    gate --format json >"$out/verdict.json"
    code=$?
    set -e
    { [ "$code" -le 1 ] || [ "$code" -eq 4 ]; } || { gate >&2 || true; die "compare failed after decide round $d (exit $code)"; }
    echo "ci-regression: decide round $d: exit $code, $(inconclusive) inconclusive row(s)" >&2
done
for ((k = 1; k <= confirm && code == 1; k++)); do
    echo "ci-regression: the gate found a regression; confirmation round $k/$confirm (both sides re-run, interleaved)" >&2
    rebase=$out/results/baseline-confirm-$k
    rerun=$out/results/candidate-confirm-$k
    for ((i = 0; i < repeat; i++)); do
        run baseline "$BASELINE_BIN" $((seed + i)) "$rebase" "--no-report"
        run candidate "$CANDIDATE_BIN" $((cand_seed + i)) "$rerun" "${CANDIDATE_RUN_ARGS:-} --no-report"
    done
    confirm_args+=(--confirm-run "$rerun" --confirm-baseline "$rebase")
    set +e
    gate --format json >"$out/verdict.json"
    code=$?
    set -e
done
{
    echo "> Gate runs: $repeat per side, interleaved; seeds $seed… (baseline) and $cand_seed… (candidate); decide rounds run: $decided of at most $decide ($((repeat * (decided + 1))) runs per side compared); confirmation rounds (both sides): $confirm; benchmark priority: $rt_mode."
    echo
    gate --format md || true
} >"$out/verdict.md"
history_args=()
if [ "$history_dir" != none ]; then history_args=(--history "$history_dir"); fi
set +e
gate "${history_args[@]}"
code=$?
set -e
if [ "$history_dir" != none ] && [ -f "$history_dir/history.jsonl" ]; then
    "$CANDIDATE_BIN" history "$history_dir" --format md >"$out/history.md" 2>/dev/null \
        || echo "ci-regression: warning: the history could not be drawn" >&2
fi
if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
    cat "$out/verdict.md" >>"$GITHUB_STEP_SUMMARY"
    [ -f "$out/history.md" ] && cat "$out/history.md" >>"$GITHUB_STEP_SUMMARY"
fi
echo "ci-regression: verdict written to $out/verdict.md and $out/verdict.json; decide rounds run: $decided; exit $code" >&2
exit "$code"
