#!/usr/bin/env python3
"""Checks spark-bench's percentiles against numpy on the same samples.

spark-bench's p50/p90/p99 are nearest rank on an HdrHistogram with 3 significant digits: pq is
the ceil(q*n)-th smallest sample, reported as the upper edge of its histogram bucket (within
0.1 % of the sample). That is numpy.percentile(method="inverted_cdf"). numpy's default,
method="linear", interpolates between the neighbouring samples instead, so it differs on small
samples: on the 8 TTFTs below, p50 is 879 ms (nearest rank) and 901.9 ms (linear).

Usage: percentile_check.py [RUN_DIR]
  Without RUN_DIR: checks the fixed 8-sample example (the Rust unit test
  report::model::tests::percentiles_are_nearest_rank_like_numpy_inverted_cdf uses the same list).
  With RUN_DIR: for every cell of RUN_DIR/summary.json, the TTFT of its successful measured
  requests in RUN_DIR/requests.csv against the cell's metrics.ttft p50/p90/p99.
Exits 1 on a mismatch beyond the histogram's resolution (0.1 %).
"""
import csv
import json
import sys

import numpy as np

TOL = 1e-3  # 3 significant digits: a bucket is at most 0.1 % wide
EXAMPLE_MS = [812.0, 845.0, 861.0, 879.0, 924.8, 951.0, 990.0, 1020.0]


def check(name, samples, ours):
    bad = 0
    for q, v in zip((50, 90, 99), ours):
        ref = float(np.percentile(samples, q, method="inverted_cdf"))
        lin = float(np.percentile(samples, q))
        ok = abs(v - ref) <= TOL * ref
        bad += not ok
        print(f"{name} p{q}: spark-bench {v:.4g}, numpy inverted_cdf {ref:.4g}, numpy linear {lin:.4g}"
              f" (n = {len(samples)}) {'ok' if ok else 'MISMATCH'}")
    return bad


def main():
    if len(sys.argv) < 2:
        # The values spark-bench reports for EXAMPLE_MS (the Rust test asserts them).
        return check("example", EXAMPLE_MS, [879.0, 1020.0, 1020.0])
    run = sys.argv[1]
    summary = json.load(open(f"{run}/summary.json"))
    ttft = {}
    with open(f"{run}/requests.csv", newline="") as f:
        for r in csv.DictReader(f):
            if r["warmup"] == "true" or r["kind"] == "warmup" or r["outcome"] != "ok" or not r["ttft_ns"]:
                continue
            ttft.setdefault((r["target"], r["transport"]), []).append(int(r["ttft_ns"]) / 1e6)
    bad = 0
    for c in summary["cells"]:
        m = c["metrics"].get("ttft")
        samples = ttft.get((c["target"], c["transport"]))
        if m and samples:
            bad += check(f'{c["target"]} · {c["transport"]} TTFT ms', samples, [m["p50"], m["p90"], m["p99"]])
    return bad


if __name__ == "__main__":
    sys.exit(1 if main() else 0)
