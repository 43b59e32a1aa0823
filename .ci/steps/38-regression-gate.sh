#!/usr/bin/env bash
# The CI regression gate, end to end (scripts/ci-regression.sh at its defaults: 3 runs per
# side, interleaved, confirmation re-run, history): once A/A (this build against itself, a
# different seed per side) and once against a simulator whose decode is 40% slower, which
# must fail the gate (exit 1); first, the decide/confirmation logic with a stand-in binary
# (.ci/ci-regression-decide-check.sh). Checks the artefacts a CI job publishes: the Markdown verdict
# with its Mermaid chart, the verdict JSON, the history's Markdown and charts.
# Bounded: uses the debug binary `cargo test` already built (deps optimised); each gate run
# has a timeout. GATE_BIN=FILE uses that binary and skips the build. Cost, warm: ~85 s
# measured on a loaded 2-core host (6 runs of ~4 s for A/A, 9 for the slow pair with
# its confirmation, and the comparisons); ~25 s more when the A/A pair runs its decide round.
source "$(dirname "$0")/../lib.sh"

# GATE_BIN: use this binary instead (e.g. a release build) and skip the build.
if [ -z "${GATE_BIN:-}" ]; then
  timeout 600 cargo build --quiet --locked --bin spark-bench
fi
BIN=${GATE_BIN:-$PWD/target/debug/spark-bench}
D=target/ci-gate-step
rm -rf "$D"
mkdir -p "$D"

# The decide and confirmation rounds' logic, with a stand-in binary (under a second).
.ci/ci-regression-decide-check.sh "$D/decide-check"

# A/A: the gate must decide (0 = pass, 1 = a regression it could not excuse), never error.
set +e
BASELINE_BIN=$BIN CANDIDATE_BIN=$BIN SEED=1 CANDIDATE_SEED=51 OUT=$D/aa HISTORY_DIR=$D/history \
  timeout 300 scripts/ci-regression.sh
aa=$?
set -e
echo "A/A gate exit: $aa"
[ "$aa" -le 1 ] || { echo "the A/A gate errored (exit $aa)" >&2; exit 1; }
grep -q '```mermaid' "$D/aa/verdict.md" || { echo "verdict.md has no Mermaid chart" >&2; exit 1; }
grep -q 'xychart-beta' "$D/aa/verdict.md"
# 3 runs a side, 3 more per decide round that ran (DECIDE=1 by default: an inconclusive row
# after the first comparison adds one).
rounds=$(sed -n 's/.*decide rounds run: \([0-9]*\) of.*/\1/p' "$D/aa/verdict.md")
python3 -c 'import json,sys; v=json.load(open(sys.argv[1])); n=3*(1+int(sys.argv[2])); assert v["rows"] and all(r["runs_baseline"]==n for r in v["rows"] if r["metric"]!="error_rate"), v["rows"][:1]' "$D/aa/verdict.json" "$rounds"
# Different seeds: the length-dependent metrics are not gated, and the verdict says so.
grep -q 'drew different conversations' "$D/aa/verdict.md"

# A 40% slower decode must fail the gate, confirmed by the re-run.
cat >"$D/slow-decode.toml" <<'TOML'
name = "ci-gate-slow"
base = "gpu"
model = "sim-ci"
capacity = 256
decode_tok_s = 150.0
chunk_tokens = [1.0]
burst_prob = 0.0
step_jitter = 0.1
api_base = "80ms"
api_per_input_token = "0s"
prefill_tok_s = 10000000.0
session_init = "20ms"
TOML
printf '[targets.sim-ci]\nsim_profile_file = "slow-decode.toml"\n' >"$D/inject.toml"
set +e
BASELINE_BIN=$BIN CANDIDATE_BIN=$BIN OUT=$D/slow HISTORY_DIR=$D/history \
  CANDIDATE_RUN_ARGS="--targets $D/inject.toml" timeout 300 scripts/ci-regression.sh
slow=$?
set -e
echo "slow-decode gate exit: $slow"
[ "$slow" -eq 1 ] || { echo "a 40% slower decode did not fail the gate (exit $slow)" >&2; exit 1; }
grep -q 'reproduced on 1 confirmation re-run' "$D/slow/verdict.md"

# The history: two entries, drawn as SVG and PNG, Markdown with Mermaid.
[ "$(wc -l <"$D/history/history.jsonl")" -eq 2 ]
"$BIN" history "$D/history" --format md >"$D/history.md"
grep -q 'xychart-beta' "$D/history.md"
ls "$D"/history/charts/history_tpot_p50.svg "$D"/history/charts/history_tpot_p50.png >/dev/null
echo "regression gate step: A/A exit $aa, slow decode exit $slow, history drawn"
