#!/usr/bin/env python3
"""The hostile-server matrix: every fault of tests/hostile/expected.tsv over every transport
it applies to, one `spark-bench run` subprocess each, against tests/hostile/server.py.

    python3 tests/hostile/matrix.py [--bin target/release/spark-bench] [--scale full]
                                    [--request-timeout 20s] [--stall-timeout 5s]
                                    [--only FAULT[,FAULT…]] [--markdown docs/x.md]

Prints one row per fault x transport: the recorded kind (and whether it is the expected
one), the run's exit code, its peak RSS (/usr/bin/time -v), its wall time, panics, and the
recorded error (first 90 characters). Exits 1 when a kind differs from the expectation, a
run panics, exits with an undocumented code or outlives its timeouts by more than 10 s.
Python standard library only.
"""

import argparse
import csv
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
TRANSPORTS = {"h": "http", "p": "http-pooled", "2": "http2", "w": "ws"}
KEY = "sk-hostile-0123456789-secret"
# README "Exit codes and JSON": 0, or 3 when a cell's requests all failed (each fault is one
# cell, so every failing fault exits 3; its results are still written in full).
DOCUMENTED_EXIT = {0, 3}
# Cells whose transport probe says the transport is absent (as in tests/integration/hostile.rs):
# run with --force-transports, their record is `unsupported-transport`.
PROBED_ABSENT = {("garbage-head", "ws"), ("h2-refused", "http2"), ("wrong-content-type", "ws"),
                 ("ws-426", "ws")}


def expectations(only=None):
    rows = []
    for line in (HERE / "expected.tsv").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        fault, transports, kind, what = line.split("\t")
        if only and fault not in only:
            continue
        for t in transports.split(","):
            rows.append((fault, TRANSPORTS[t], kind, what))
    return rows


def target_of(fault, port, h2_port):
    """The port and API a fault is asked on (see expected.tsv)."""
    if fault.startswith("h2-") and fault != "h2-refused":
        port = h2_port
    return port, "chat-completions" if fault.startswith("chat-") else "responses"


def scenario(ports, fault, transport, rt, st):
    port, api = target_of(fault, *ports)
    return f"""name = "hostile-{fault}"
seed = 1
max_output_tokens = 8
link = "none"

[load]
sessions = 1
concurrency = 1

[matrix]
targets = ["t"]
transports = ["{transport}"]

[[turns]]
prompt = "hi"

[targets.t]
base_url = "http://127.0.0.1:{port}/f/{fault}/v1"
api = "{api}"
model = "{fault}"
api_key_env = "HOSTILE_KEY"
request_timeout = "{rt}"
stall_timeout = "{st}"
ws_warmup = false
transports = ["{transport}"]
"""


def seconds(spec):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s)", spec)
    return float(m.group(1)) / (1000 if m.group(2) == "ms" else 1)


def one(binary, ports, fault, transport, rt, st, work):
    d = pathlib.Path(tempfile.mkdtemp(dir=work))
    (d / "s.toml").write_text(scenario(ports, fault, transport, rt, st))
    env = dict(os.environ, HOSTILE_KEY=KEY)
    t0 = time.monotonic()
    p = subprocess.run(["/usr/bin/time", "-v", binary, "run", str(d / "s.toml"), "--out", str(d / "out"),
                        "--quiet", "--no-report", "--force-transports"], capture_output=True, text=True, env=env,
                       timeout=seconds(rt) + 60)
    wall = time.monotonic() - t0
    rss = re.search(r"Maximum resident set size \(kbytes\): (\d+)", p.stderr)
    code = re.search(r"Exit status: (\d+)", p.stderr)
    runs = list((d / "out").glob("*/requests.csv"))
    kind, err, leaked = "(no record)", "", False
    if runs:
        with open(runs[0], newline="") as f:
            recs = list(csv.DictReader(f))
        if len(recs) == 1:
            kind, err = recs[0]["outcome"], recs[0].get("error", "")
        else:
            kind = f"({len(recs)} records)"
        for name in ("requests.csv", "timeline.json", "manifest.json"):
            path = runs[0].parent / name
            if path.exists() and KEY in path.read_text(errors="replace"):
                leaked = True
    return {
        "kind": kind,
        "error": err,
        "exit": int(code.group(1)) if code else p.returncode,
        "rss_mb": int(rss.group(1)) / 1024 if rss else float("nan"),
        "wall": wall,
        "panic": "panicked" in p.stderr,
        "leaked": leaked,
        "stderr": p.stderr,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=str(ROOT / "target" / "release" / "spark-bench"))
    ap.add_argument("--scale", choices=["small", "full"], default="full")
    ap.add_argument("--request-timeout", default="20s")
    ap.add_argument("--stall-timeout", default="5s")
    ap.add_argument("--only", default="")
    ap.add_argument("--markdown", help="also write the table to this file")
    args = ap.parse_args()
    only = set(filter(None, args.only.split(",")))
    server = subprocess.Popen([sys.executable, str(HERE / "server.py"), "--scale", args.scale],
                              stdout=subprocess.PIPE, text=True)
    try:
        ports = tuple(int(server.stdout.readline().rsplit(":", 1)[1]) for _ in range(2))
        bad = 0
        lines = ["| fault | transport | kind | expected | exit | peak RSS | wall | error |",
                 "|---|---|---|---|---|---|---|---|"]
        print(lines[0]); print(lines[1])
        limit = seconds(args.request_timeout) + 10
        with tempfile.TemporaryDirectory() as work:
            for fault, transport, want, _what in expectations(only):
                if (fault, transport) in PROBED_ABSENT:
                    want = "unsupported-transport"
                r = one(args.bin, ports, fault, transport, args.request_timeout, args.stall_timeout, work)
                ok = (r["kind"] == want and not r["panic"] and not r["leaked"]
                      and r["exit"] in DOCUMENTED_EXIT and r["wall"] < limit)
                bad += not ok
                flag = "" if ok else " **FAIL**"
                extra = (" PANIC" if r["panic"] else "") + (" KEY-LEAKED" if r["leaked"] else "")
                err = r["error"].replace("|", "/").replace("\n", " ")[:90]
                line = (f"| {fault} | {transport} | {r['kind']}{extra}{flag} | {want} | {r['exit']} | "
                        f"{r['rss_mb']:.0f} MB | {r['wall']:.1f} s | {err} |")
                lines.append(line)
                print(line, flush=True)
                if not ok and os.environ.get("HOSTILE_VERBOSE"):
                    print(r["stderr"][-2000:], file=sys.stderr)
        summary = f"{len(lines) - 2} runs, {bad} unexpected; scale {args.scale}, request_timeout {args.request_timeout}, stall_timeout {args.stall_timeout}"
        print(summary)
        if args.markdown:
            pathlib.Path(args.markdown).write_text("\n".join(lines + ["", summary, ""]))
        return 1 if bad else 0
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    sys.exit(main())
