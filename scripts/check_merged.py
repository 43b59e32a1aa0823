"""Checks a merged results directory against its shards, for the engine scripts
(.ci/steps/37-shards-engine.sh, scripts/shards-ray.sh):

    python3 scripts/check_merged.py MERGED_DIR SHARDS ENGINE

Every shard 0..SHARDS-1 merged and none missing; every request row of every shard in the
merged requests.csv; every cell's measured count the sum of the shards' counts for that cell;
the report (md and html) rendered.
Prints one line naming ENGINE; exits non-zero (an AssertionError) otherwise.
"""
import collections
import csv
import json
import os
import sys


def cells(d):
    return {(c["target"], c["transport"]): c["requests"]
            for c in json.load(open(d + "/summary.json"))["cells"]}


def main():
    merged, n, engine = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    m = json.load(open(merged + "/manifest.json"))
    shards = m["merge"]["shards"]
    assert sorted(x["index"] for x in shards) == list(range(n)) and not m["merge"]["missing"], m["merge"]
    def rows(d):
        return sum(1 for _ in csv.DictReader(open(d + "/requests.csv")))
    # Counted in each shard's own requests.csv (not the merge's record of what it wrote).
    shard_rows = sum(rows(x["dir"]) for x in shards)
    merged_rows = rows(merged)
    assert merged_rows == shard_rows > 0, (merged_rows, shard_rows)
    want = collections.Counter()
    for x in shards:
        want.update(cells(x["dir"]))
    assert cells(merged) == dict(want), (cells(merged), want)
    for name in ("report.md", "report.html"):
        assert os.path.getsize(os.path.join(merged, name)) > 0, name
    print(f"merged {len(shards)} shards scheduled by {engine}: {merged_rows} requests "
          f"({sum(want.values())} measured in {len(want)} cells), report rendered")


if __name__ == "__main__":
    main()
