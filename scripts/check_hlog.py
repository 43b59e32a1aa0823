#!/usr/bin/env python3
"""Interop check: read a run's histograms/*.hlog with the independent Python HdrHistogram
implementation (`pip install hdrhistogram`) and compare every histogram's count, p50, p99
and max with the run's summary.json (which spark-bench computed with the Rust crate).

    python3 scripts/check_hlog.py results/<run-id>

Exit 0 when every histogram agrees, 1 otherwise.
"""
import json
import pathlib
import sys

from hdrh.histogram import HdrHistogram
from hdrh.log import HistogramLogReader

# Stored unit -> natural unit divisor, as in src/recorder/metrics.rs.
MILLI = {"output_tok_s", "decode_tok_s", "tokens_per_chunk"}
IDENTITY = {"bytes_sent", "bytes_received"}


def divisor(metric):
    if metric in MILLI:
        return 1e3
    if metric in IDENTITY:
        return 1.0
    return 1e6


def read(path):
    total = HdrHistogram(1, 2**62, 3)
    reader = HistogramLogReader(str(path), HdrHistogram(1, 2**62, 3))
    intervals = 0
    while True:
        h = reader.get_next_interval_histogram()
        if h is None:
            break
        intervals += 1
        total.add(h)
    return total, intervals


def close(v, want):
    # Same bucket boundaries; allow one bucket (0.1 %) for highest-equivalent-value rules.
    return abs(v - want) <= abs(want) * 2e-3 + 1e-9


def values_near_rank(h, q):
    """The recorded values at ranks floor(q*n) .. ceil(q*n) (1-based, clamped): Rust's
    HdrHistogram takes ceil(q*n), Python's rounds q*n to the nearest."""
    n = h.get_total_count()
    if n == 0:
        return [0]
    lo = max(1, int(q * n))
    hi = min(n, max(1, -int(-q * n // 1)))
    wanted = set(range(lo, hi + 1))
    out, seen = [], 0
    for item in h.get_recorded_iterator():
        start, seen = seen + 1, seen + item.count_at_value_iterated_to
        if any(start <= r <= seen for r in wanted):
            out.append(item.value_iterated_to)
        if seen >= hi:
            break
    return out


def main(run_dir):
    run = pathlib.Path(run_dir)
    summary = json.loads((run / "summary.json").read_text())
    cells = {(c["target"], c["transport"]): c for c in summary["cells"]}
    failures, checked = [], 0
    for path in sorted(run.glob("histograms/*/*/*.hlog")):
        metric, transport, target = path.stem, path.parent.name, path.parent.parent.name
        h, intervals = read(path)
        want = cells[(target, transport)]["metrics"].get(metric)
        where = f"{target}/{transport}/{metric}"
        if want is None or intervals != 1:
            failures.append(f"{where}: {intervals} intervals, summary entry {want}")
            continue
        d = divisor(metric)
        exact = {"count": h.get_total_count(), "max": h.get_max_value() / d}
        for k, v in exact.items():
            if not close(v, want[k]):
                failures.append(f"{where}: {k} python={v} summary={want[k]}")
        for k, q in (("p50", 0.50), ("p99", 0.99)):
            # Implementations round the rank q * count differently (up, or to the nearest),
            # which in a sparse tail picks the neighbouring sample: accept the values at
            # the ranks either rule gives.
            near = values_near_rank(h, q)
            if not any(close(v / d, want[k]) for v in near):
                failures.append(
                    f"{where}: {k} summary={want[k]}, python's values near that rank="
                    f"{[v / d for v in near]}"
                )
        checked += 1
    for f in failures:
        print("MISMATCH", f)
    print(f"{checked} histograms checked, {len(failures)} mismatches")
    return 1 if failures or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
