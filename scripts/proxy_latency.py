#!/usr/bin/env python3
"""The recording proxy's added latency per chunk, against a direct connection.

Usage: proxy_latency.py SPARK_BENCH_BINARY [CHUNKS] [GAP_US]

A paced upstream (a thread of this process: HTTP/1.1, chunked SSE, one event every GAP_US,
default 1500) stamps each event as it writes it; a client in this process reads the stream
with TCP_NODELAY and stamps each event as it arrives (same monotonic clock). The stream is
read once directly and once through `spark-bench record`; per-chunk latency = arrival −
write. Prints p50 and p99 of each and the proxy's addition (p50/p99 through − direct), and
checks that both streams carried the same bytes. Loopback only; a loaded machine inflates
both sides' tails.
"""
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time


def upstream(n, gap, stamps, ready):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    ready.append(srv.getsockname()[1])

    def serve():
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            buf = b""
            while b"\r\n\r\n" not in buf:
                buf += c.recv(65536)
            head, _, body = buf.partition(b"\r\n\r\n")
            length = int([l.split(b":")[1] for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")][0])
            while len(body) < length:
                body += c.recv(65536)
            c.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
            mine = []
            for i in range(n):
                time.sleep(gap / 1e9)
                ev = b'data: {"i":%d}\n\n' % i
                mine.append(time.perf_counter_ns())
                c.sendall(b"%x\r\n%s\r\n" % (len(ev), ev))
            c.sendall(b"0\r\n\r\n")
            stamps.append(mine)
            c.close()

    threading.Thread(target=serve, daemon=True).start()
    return srv


def read(port, n):
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    body = b'{"model":"m","stream":true,"input":"hi"}'
    s.sendall(b"POST /v1/responses HTTP/1.1\r\nhost: x\r\nauthorization: Bearer sk-proj-latencyTESTkey0123456789\r\n"
              b"content-type: application/json\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))
    data, arrivals, seen = b"", [], 0
    while True:
        k = s.recv(65536)
        t = time.perf_counter_ns()
        if not k:
            break
        data += k
        ev = data.count(b"\n\n")
        arrivals += [t] * (ev - seen)
        seen = ev
        if data.endswith(b"0\r\n\r\n"):
            break
    s.close()
    payload = b"".join(l for l in data.split(b"\r\n") if l.startswith(b"data: "))
    return arrivals, payload


def pct(xs, p):
    xs = sorted(xs)
    return xs[int((len(xs) - 1) * p)]


def main():
    if len(sys.argv) < 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    # The writer thread and the reader share the GIL: hand it over quickly.
    sys.setswitchinterval(1e-5)
    binary = sys.argv[1]
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    gap = int(sys.argv[3]) * 1000 if len(sys.argv) > 3 else 1_500_000
    stamps, ready = [], []
    srv = upstream(n, gap, stamps, ready)
    up = ready[0]
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    pport = probe.getsockname()[1]
    probe.close()
    tmp = tempfile.mkdtemp()
    proc = subprocess.Popen([binary, "record", "--upstream", f"http://127.0.0.1:{up}/v1", "--listen",
                             f"127.0.0.1:{pport}", "--out", os.path.join(tmp, "r.toml"), "--results",
                             os.path.join(tmp, "results")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", pport), 0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    result = {}
    for name, port in (("direct", up), ("proxy", pport)):
        arrivals, payload = read(port, n)
        writes = stamps.pop(0)
        if len(arrivals) != n:
            print(f"{name}: {len(arrivals)} events, expected {n}", file=sys.stderr)
            sys.exit(1)
        lat = [(a - w) / 1e3 for a, w in zip(arrivals, writes)]
        result[name] = (pct(lat, 0.5), pct(lat, 0.99), payload)
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=60)
    srv.close()
    same = result["direct"][2] == result["proxy"][2]
    for k in ("direct", "proxy"):
        print(f"{k:7} p50 {result[k][0]:8.1f} us  p99 {result[k][1]:8.1f} us")
    print(f"added   p50 {result['proxy'][0] - result['direct'][0]:8.1f} us  "
          f"p99 {result['proxy'][1] - result['direct'][1]:8.1f} us  ({n} chunks, bytes equal: {same})")
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
