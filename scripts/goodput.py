#!/usr/bin/env python3
"""Goodput from a run's requests.csv, independently of spark-bench's Rust code.

Usage: scripts/goodput.py RUN_DIR_OR_REQUESTS_CSV [--ttft 500ms] [--tpot 20ms] [--e2e 10s]
       (without limits, the SLOs are read from the run's manifest.json plan.slo)

Prints one JSON object per target x transport: good_requests, good_output_tokens, span_s,
good_req_s, good_output_tok_s. Definitions (docs/sweeps.md, "Goodput"):
- measured requests only: warmup = false, and not a kind = warmup request;
- a request is good when outcome = ok and it meets every per-request SLO
  (ttft_ns, tpot_ns, e2e_ns <= limit; a request without the value is not held to it);
  percentile SLOs ("p90<=500ms") judge the load point, not requests, and are ignored here;
- span_s: earliest intended_ns to latest end_ns (or last_token_ns) of the cell's successful
  measured requests; rates are counts over it;
- tokens: output_tokens of the good requests (server-reported usage, else the chunk count).
Standard library only.
"""
import csv
import json
import os
import re
import sys

UNITS = {"ns": 1, "us": 1e3, "µs": 1e3, "ms": 1e6, "s": 1e9, "m": 60e9, "min": 60e9, "h": 3600e9}


def duration_ns(text):
    total, rest = 0.0, text.strip()
    for num, unit in re.findall(r"([0-9]*\.?[0-9]+)\s*([a-zµ]+)", rest):
        if unit not in UNITS:
            raise SystemExit(f"unknown duration unit in {text!r}")
        total += float(num) * UNITS[unit]
    if total <= 0:
        raise SystemExit(f"not a duration: {text!r} (write e.g. 500ms)")
    return total


def slos_from_manifest(run_dir):
    with open(os.path.join(run_dir, "manifest.json")) as f:
        plan = json.load(f).get("plan", {})
    out = {}
    for key, bound in (plan.get("slo") or {}).items():
        if bound.get("percentile") is None:
            out[key] = duration_ns(bound["limit"])
    return out


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    path = argv[0]
    limits, args = {}, argv[1:]
    while args:
        flag, value = args[0], args[1] if len(args) > 1 else ""
        if flag not in ("--ttft", "--tpot", "--e2e"):
            raise SystemExit(f"unknown argument {flag!r}")
        if "<=" in value:
            value = None  # a percentile SLO does not judge single requests
        if value is not None:
            limits[flag[2:]] = duration_ns(value)
        args = args[2:]
    run_dir = path if os.path.isdir(path) else os.path.dirname(path)
    csv_path = os.path.join(path, "requests.csv") if os.path.isdir(path) else path
    if not argv[1:]:
        limits = slos_from_manifest(run_dir)
    cells = {}
    with open(csv_path, newline="") as f:
        for row in csv.DictReader(f):
            if row["warmup"] == "true" or row["kind"] == "warmup" or row["outcome"] != "ok":
                continue
            c = cells.setdefault((row["target"], row["transport"]),
                                 {"good": 0, "tokens": 0, "first": None, "last": None})
            start = int(row["intended_ns"])
            end = row["end_ns"] or row["last_token_ns"]
            c["first"] = start if c["first"] is None else min(c["first"], start)
            if end:
                c["last"] = int(end) if c["last"] is None else max(c["last"], int(end))
            good = True
            for key, limit in limits.items():
                v = row[key + "_ns"]
                if v != "" and float(v) > limit:
                    good = False
            if good:
                c["good"] += 1
                c["tokens"] += int(row["output_tokens"] or 0)
    for (target, transport), c in sorted(cells.items()):
        span = (c["last"] - c["first"]) / 1e9 if c["last"] and c["last"] > c["first"] else 0.0
        print(json.dumps({
            "target": target, "transport": transport,
            "good_requests": c["good"], "good_output_tokens": c["tokens"], "span_s": span,
            "good_req_s": c["good"] / span if span else 0.0,
            "good_output_tok_s": c["tokens"] / span if span else 0.0,
        }))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
