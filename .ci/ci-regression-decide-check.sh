#!/usr/bin/env bash
# The decide and confirmation rounds of scripts/ci-regression.sh, checked in a second with a
# stand-in spark-bench (a shell script): `run` makes ROOT/seed-S, `compare` answers from how
# many runs each side holds. Case "inconclusive": 2 inconclusive rows with 3 runs a side, none
# with 6: one decide round (seeds continued), then a pass. Case "regress": inconclusive with 3
# runs, a regression with 6: the decide round's regression goes through the confirmation round.
# Called by .ci/steps/38-regression-gate.sh; usage: .ci/ci-regression-decide-check.sh DIR.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
D=${1:?usage: $0 DIR}
rm -rf "$D"
mkdir -p "$D"
D=$(cd "$D" && pwd)
cat >"$D/fake-bench" <<'FAKE'
#!/usr/bin/env bash
set -eu
case $1 in
  run)
    while [ $# -gt 0 ]; do
      case $1 in --out) root=$2; shift ;; --seed) seed=$2; shift ;; esac
      shift
    done
    mkdir -p "$root/seed-$seed" ;;
  compare)
    n=$(ls "$2" | wc -l)
    confirm=0; case " $* " in *" --confirm-run "*) confirm=1 ;; esac
    inc=0; code=0
    if [ "$n" -lt 6 ]; then inc=2
    elif [ "$FAKE_MODE" = regress ] && [ $confirm = 0 ]; then code=1
    fi
    if [[ " $* " == *" --format json "* ]]; then
      printf '{\n  "outcome": "x",\n  "counts": {\n    "regressed": %d,\n    "inconclusive": %d\n  },\n  "runs": %d,\n  "confirmed": %d\n}\n' $code $inc "$n" $confirm
    else
      echo "fake verdict: $n runs, $inc inconclusive, confirm $confirm"
    fi
    exit $code ;;
esac
FAKE
chmod +x "$D/fake-bench"
gate() {
  local mode=$1
  set +e
  FAKE_MODE=$mode BASELINE_BIN=$D/fake-bench CANDIDATE_BIN=$D/fake-bench PRIORITY=normal \
    HISTORY_DIR=none REPEAT=3 SEED=1 CANDIDATE_SEED=51 DECIDE=2 OUT=$D/$mode \
    scripts/ci-regression.sh 2>"$D/$mode.log" >/dev/null
  echo $?
  set -e
}
fail() { echo "ci-regression decide check: $*" >&2; cat "$D"/*.log >&2; exit 1; }

code=$(gate inconclusive)
[ "$code" = 0 ] || fail "inconclusive case: exit $code, want 0"
[ "$(ls "$D/inconclusive/results/baseline" | tr '\n' ' ')" = "seed-1 seed-2 seed-3 seed-4 seed-5 seed-6 " ] \
  || fail "the decide round did not continue the baseline seeds"
[ "$(ls "$D/inconclusive/results/candidate" | tr '\n' ' ')" = "seed-51 seed-52 seed-53 seed-54 seed-55 seed-56 " ] \
  || fail "the decide round did not continue the candidate seeds"
grep -q '"inconclusive": 2' "$D/inconclusive/first-verdict.json" || fail "first-verdict.json is not the first comparison's"
grep -q '"inconclusive": 0' "$D/inconclusive/verdict.json" || fail "verdict.json is not the pooled comparison's"
grep -q 'decide rounds run: 1 of at most 2 (6 runs per side compared)' "$D/inconclusive/verdict.md" \
  || fail "verdict.md does not say how many decide rounds ran"

code=$(gate regress)
[ "$code" = 0 ] || fail "regress case: exit $code, want 0 (not reproduced on confirmation)"
[ -d "$D/regress/results/candidate-confirm-1" ] || fail "a decide round's regression skipped the confirmation round"
grep -q '"confirmed": 1' "$D/regress/verdict.json" || fail "the final verdict is not the confirmed comparison's"
grep -q 'first comparison: exit 0' "$D/regress.log" || fail "the first comparison's exit is not logged"
echo "ci-regression decide check: ok (one decide round, seeds continued; a decide round's regression confirmed)"
