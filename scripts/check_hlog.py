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
        got = {
            "count": h.get_total_count(),
            "p50": h.get_value_at_percentile(50) / d,
            "p99": h.get_value_at_percentile(99) / d,
            "max": h.get_max_value() / d,
        }
        for k, v in got.items():
            # Same bucket boundaries; allow one bucket (0.1 %) for percentile rounding rules.
            if abs(v - want[k]) > abs(want[k]) * 2e-3 + 1e-9:
                failures.append(f"{where}: {k} python={v} summary={want[k]}")
        checked += 1
    for f in failures:
        print("MISMATCH", f)
    print(f"{checked} histograms checked, {len(failures)} mismatches")
    return 1 if failures or checked == 0 else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
