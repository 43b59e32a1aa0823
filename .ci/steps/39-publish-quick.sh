#!/usr/bin/env bash
# scripts/publish_reports.sh still works: its --quick mode (tiny runs of scenarios/smoke.toml
# and, when CI step 25 left target/llama/, scenarios/claims-llama.toml against a llama-server
# it starts) writes claims.md and README.md to a temporary folder, never to docs/reports/.
# Checks that every claim got a table with measured figures, and that the committed
# docs/reports/ is there. Cost: a few seconds on the debug binary `cargo test` built.
source "$(dirname "$0")/../lib.sh"

timeout 600 cargo build --quiet --locked --bin spark-bench
OUT=$(mktemp -d)
on_exit "rm -rf '$OUT'"
before=$(git status --porcelain -- docs/reports)
timeout 120 scripts/publish_reports.sh --quick --bin target/debug/spark-bench --out "$OUT/reports"
after=$(git status --porcelain -- docs/reports)
[ "$before" = "$after" ] || { echo "--quick touched docs/reports/" >&2; exit 1; }

python3 - "$OUT/reports/claims.md" docs/reports/claims.md <<'PY'
import re, sys
for path in sys.argv[1:]:
    text = open(path).read()
    for heading in ("## Claim 1", "## Claim 2", "## Claim 3", "## How these figures were taken"):
        assert heading in text, f"{path}: no '{heading}'"
    # Every claim section has a table whose measured cells are numbers, not all dashes.
    for part in text.split("## Claim ")[1:]:
        rows = [l for l in part.splitlines() if l.startswith("| ") and not l.startswith("|---")]
        numbers = [c for l in rows for c in l.split("|") if re.fullmatch(r"\s*−?[\d,.]+( ms| s|×|%)?\s*", c)]
        assert numbers, f"{path}: claim {part[:1]} has no measured figure"
    assert "spark-bench commit" in text and "Machine:" in text, f"{path}: no provenance"
print("publish_reports --quick: claims.md has every claim with measured figures")
PY
grep -q 'Quick mode' "$OUT/reports/claims.md"
grep -q 'claims.md' "$OUT/reports/README.md"
