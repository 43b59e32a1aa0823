#!/usr/bin/env bash
# The CI regression gate, end to end: build a baseline and a candidate spark-bench (two git
# refs, or two binaries you already have), run the same scenario with each, compare, write
# the Markdown verdict to $GITHUB_STEP_SUMMARY when set, and exit with the gate's code:
#   0 no regression, 1 regression (or inconclusive with --fail-on-inconclusive), 2 error.
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
#   RUN_ARGS        extra arguments for both `spark-bench run` calls (e.g. "--link rtt=10ms")
#   CANDIDATE_RUN_ARGS  extra arguments for the candidate run only (e.g. a --targets FILE
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

# run NAME BIN EXTRA_ARGS → prints the results directory
run() {
    local name=$1 bin=$2 extra=$3 root="$out/results/$1" log="$out/$1-run.log"
    rm -rf "$root"
    echo "ci-regression: running $scenario with the $name build" >&2
    # shellcheck disable=SC2086 # RUN_ARGS/extra are word lists on purpose
    if ! "$bin" run "$scenario" --out "$root" --quiet ${RUN_ARGS:-} $extra >"$out/$name-summary.txt" 2>"$log"; then
        cat "$log" >&2
        die "the $name run failed (log: $log)"
    fi
    local dir
    dir=$(sed -n 's/^results: //p' "$log" | tail -n 1)
    [ -n "$dir" ] && [ -f "$dir/manifest.json" ] || dir=$(ls -d "$root"/*/ 2>/dev/null | head -n 1)
    [ -n "$dir" ] && [ -f "$dir/manifest.json" ] || die "the $name run wrote no results directory under $root (log: $log)"
    echo "${dir%/}"
}

# Only the candidate renders its report (charts the Markdown verdict links to).
base_dir=$(run baseline "$BASELINE_BIN" "--no-report")
cand_dir=$(run candidate "$CANDIDATE_BIN" "${CANDIDATE_RUN_ARGS:-}")

# The candidate's gate decides (it is the code under review). Markdown for the job summary,
# JSON for machines, the text table for the log; the verdict is deterministic (seeded
# bootstrap), so the three renderings agree.
# shellcheck disable=SC2086
"$CANDIDATE_BIN" compare "$base_dir" "$cand_dir" --format md ${GATE_ARGS:-} >"$out/verdict.md" || true
# shellcheck disable=SC2086
"$CANDIDATE_BIN" compare "$base_dir" "$cand_dir" --format json ${GATE_ARGS:-} >"$out/verdict.json" || true
if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
    cat "$out/verdict.md" >>"$GITHUB_STEP_SUMMARY"
fi
set +e
# shellcheck disable=SC2086
"$CANDIDATE_BIN" compare "$base_dir" "$cand_dir" ${GATE_ARGS:-}
code=$?
set -e
echo "ci-regression: verdict written to $out/verdict.md and $out/verdict.json; exit $code" >&2
exit "$code"
