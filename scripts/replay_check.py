#!/usr/bin/env python3
"""Checks that a replay of a recorded scenario reproduces the recorded session.

Usage: replay_check.py AS_RECORDED_DIR REPLAY_DIR [--tokens-pct 1] [--gap-ms 5]

Both are results directories: the one `spark-bench record` wrote (target as-recorded) and
one `spark-bench run RECORDED.toml` wrote. Compares, over the generating requests of every
session (warm-ups left out): the number of requests, the input and output token totals
(within --tokens-pct percent), and each think and tool time: the gap from the previous
request's end to this request's intended start (within --gap-ms; a replay schedules each
request at the previous end + the recorded time). How late the replay's sends were behind
that schedule (dispatch lag, a property of the loaded machine, not of the scenario) is
printed beside it. Prints a table and one JSON line;
exits 1 when a check fails, 2 on bad input.
"""
import csv
import json
import os
import sys


def load(d):
    path = os.path.join(d, "requests.csv")
    try:
        with open(path, newline="") as f:
            rows = [r for r in csv.DictReader(f) if r["kind"] != "warmup" and r["warmup"] != "true"]
    except OSError as e:
        print(f"cannot read {path}: {e}", file=sys.stderr)
        sys.exit(2)
    by_session = {}
    for r in rows:
        by_session.setdefault((r["target"], r["transport"], int(r["session"])), []).append(r)
    gaps = []
    for reqs in by_session.values():
        reqs.sort(key=lambda r: int(r["dispatch_ns"]))
        prev_end = None
        for r in reqs:
            if prev_end is not None:
                lag = (int(r["dispatch_ns"]) - int(r["intended_ns"])) / 1e6
                gaps.append((r["kind"], int(r["turn"]), int(r["step"]), (int(r["intended_ns"]) - prev_end) / 1e6, lag))
            prev_end = int(r["end_ns"] or 0)
    tot = lambda k: sum(int(r[k] or 0) for r in rows)
    return {"requests": len(rows), "input_tokens": tot("input_tokens"),
            "output_tokens": tot("output_tokens"), "failed": sum(r["outcome"] != "ok" for r in rows),
            "gaps": gaps}


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    opts = dict(zip(sys.argv[1:], sys.argv[2:]))
    if len(args) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    pct = float(opts.get("--tokens-pct", 1))
    gap_ms = float(opts.get("--gap-ms", 5))
    live, rep = load(args[0]), load(args[1])
    ok = True
    print(f"{'':16}{'recorded':>12}{'replay':>12}")
    for k in ("requests", "failed", "input_tokens", "output_tokens"):
        print(f"{k:16}{live[k]:>12}{rep[k]:>12}")
    if live["requests"] != rep["requests"] or live["failed"] or rep["failed"]:
        ok = False
    diffs = {}
    for k in ("input_tokens", "output_tokens"):
        diffs[k] = 100.0 * abs(rep[k] - live[k]) / max(live[k], 1)
        ok &= diffs[k] <= pct
    worst = 0.0
    if len(live["gaps"]) != len(rep["gaps"]):
        ok = False
    for a, b in zip(live["gaps"], rep["gaps"]):
        d = abs(a[3] - b[3])
        worst = max(worst, d)
        print(f"  {a[0]:12} turn {a[1]} step {a[2]}: gap recorded {a[3]:9.2f} ms, replay {b[3]:9.2f} ms, "
              f"diff {d:6.3f} ms (replay send lag {b[4]:.2f} ms)")
    ok &= worst <= gap_ms
    print(json.dumps({"ok": ok, "requests": [live["requests"], rep["requests"]],
                      "input_tokens_diff_pct": round(diffs["input_tokens"], 3),
                      "output_tokens_diff_pct": round(diffs["output_tokens"], 3),
                      "worst_gap_diff_ms": round(worst, 3), "gaps": len(live["gaps"]),
                      "worst_replay_send_lag_ms": round(max([g[4] for g in rep["gaps"]] or [0]), 3)}))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
