#!/usr/bin/env python3
"""A hostile LLM-API server, written independently of spark-bench's simulator.

Python standard library only, raw sockets, its own HTTP/1.x, SSE, chunked and WebSocket
framing. One misbehaviour per endpoint: the fault is the first path segment after /f/, so a
target's base_url is  http://127.0.0.1:PORT/f/<fault>/v1  and the client's
POST /f/<fault>/v1/responses (SSE) or GET /f/<fault>/v1/responses (WebSocket upgrade)
gets that fault. `ok` / `ws-ok` behave.

A second port speaks HTTP/2 (h2c, prior knowledge) with raw frames written here (its own
frame and HPACK encoding; nothing decoded but frame heads): the request's HEADERS are not
decoded (HPACK), so the fault there is the `model` of the JSON body (a target's
`model = "<fault>"`). Faults whose name starts with `chat-` answer in the Chat Completions
shape.

    python3 tests/hostile/server.py [--port 0] [--scale small|full]

prints `listening on http://127.0.0.1:PORT`, then `h2 on http://127.0.0.1:PORT2`, and
serves until killed. `--scale full` uses
the issue's sizes (a 50 MB SSE line, a 100 MB WebSocket frame); `small` (the default, for
the test suite) sizes that still cross every limit.
"""

import argparse
import base64
import gzip
import hashlib
import json
import socket
import struct
import sys
import threading
import time

SCALE = {"small": {"line": 17 << 20, "frame": 17 << 20, "pings": 500},
         "full": {"line": 50_000_000, "frame": 100_000_000, "pings": 5000}}
SIZES = SCALE["small"]
WS_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


# ---------------------------------------------------------------- building blocks

def sse(event, obj):
    data = obj if isinstance(obj, (bytes, bytearray)) else json.dumps(obj).encode()
    return b"event: " + event.encode() + b"\ndata: " + data + b"\n\n"


def created():
    return {"type": "response.created",
            "response": {"id": "resp_hostile", "status": "in_progress"}}


def delta(text):
    return {"type": "response.output_text.delta", "delta": text}


def completed():
    return {"type": "response.completed",
            "response": {"id": "resp_hostile", "status": "completed",
                         "usage": {"input_tokens": 3, "output_tokens": 2}}}


GOOD_EVENTS = [("response.created", created()),
               ("response.output_text.delta", delta("he")),
               ("response.output_text.delta", delta("llo")),
               ("response.completed", completed())]


def good_stream():
    return b"".join(sse(e, o) for e, o in GOOD_EVENTS)


def head(status, reason, headers, version="HTTP/1.1"):
    lines = ["%s %d %s" % (version, status, reason)] + ["%s: %s" % kv for kv in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def sse_head(extra=()):
    return head(200, "OK", [("Content-Type", "text/event-stream"),
                            ("Transfer-Encoding", "chunked")] + list(extra))


def chunk(data):
    return b"%x\r\n" % len(data) + data + b"\r\n"


def full_response(status, reason, ctype, body, extra=()):
    return head(status, reason, [("Content-Type", ctype),
                                 ("Content-Length", str(len(body)))] + list(extra)) + body


def reset(sock):
    """Close with RST (SO_LINGER 0)."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    except OSError:
        pass
    sock.close()


def sleep_or_closed(sock, seconds):
    """Waits; returns early when the client went away (so stalls do not pile up)."""
    end = time.monotonic() + seconds
    sock.settimeout(0.2)
    while time.monotonic() < end:
        try:
            if sock.recv(1, socket.MSG_PEEK) == b"":
                return True
        except socket.timeout:
            continue
        except OSError:
            return True
    return False


def send_forever(sock, piece, gap=0.0, limit_s=120):
    """Sends `piece` until the client goes away (or `limit_s`)."""
    end = time.monotonic() + limit_s
    try:
        while time.monotonic() < end:
            sock.sendall(piece)
            if gap:
                time.sleep(gap)
    except OSError:
        pass


def chat_chunk(content=None, **extra):
    obj = {"id": "chatcmpl-hostile", "object": "chat.completion.chunk",
           "choices": [{"index": 0, "delta": {} if content is None else {"content": content}}]}
    obj.update(extra)
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


BOM = b"\xef\xbb\xbf"


def extra_fault(fault, sock, req_headers):
    """The faults of the second round (protocol truth); True when `fault` was one."""
    if fault == "sse-bom":
        # A UTF-8 byte order mark before the first line, a `data:` line (the SSE spec strips it).
        first = b"data: " + json.dumps(GOOD_EVENTS[0][1]).encode() + b"\n\n"
        rest = b"".join(sse(e, o) for e, o in GOOD_EVENTS[1:])
        sock.sendall(sse_head() + chunk(BOM + first + rest) + b"0\r\n\r\n")
    elif fault == "chat-bom":
        body = BOM + chat_chunk("he") + chat_chunk("llo") + b"data: [DONE]\n\n"
        sock.sendall(sse_head() + chunk(body) + b"0\r\n\r\n")
    elif fault == "no-created":
        # A Responses stream that starts with its deltas (no response.created).
        sock.sendall(sse_head() + chunk(b"".join(sse(e, o) for e, o in GOOD_EVENTS[1:])) + b"0\r\n\r\n")
    elif fault == "gzip":
        # Compressed although the client asked for identity (a client that did not ask is
        # told so with a 400, so the test also checks the request header).
        if req_headers.get("accept-encoding", "").strip().lower() != "identity":
            sock.sendall(full_response(400, "Bad Request", "application/json",
                                       b'{"error":{"message":"the client did not send accept-encoding: identity"}}'))
        else:
            sock.sendall(sse_head([("Content-Encoding", "gzip")]) + chunk(gzip.compress(good_stream())) + b"0\r\n\r\n")
    elif fault in ("headers-150", "headers-600"):
        n = int(fault.split("-")[1])
        extra = [("X-H%d" % i, "v") for i in range(n)]
        sock.sendall(sse_head(extra) + chunk(good_stream()) + b"0\r\n\r\n")
    elif fault == "204":
        sock.sendall(head(204, "No Content", []))
    elif fault == "empty-200":
        sock.sendall(head(200, "OK", [("Content-Type", "text/event-stream"), ("Content-Length", "0")]))
    elif fault == "chat-choices-null":
        body = (chat_chunk("he") + chat_chunk("llo")
                + b'data: {"id":"chatcmpl-hostile","choices":null,"usage":{"prompt_tokens":3,"completion_tokens":2}}\n\n'
                + b"data: [DONE]\n\n")
        sock.sendall(sse_head() + chunk(body) + b"0\r\n\r\n")
    elif fault == "chat-usage-impossible":
        # Three chunks of 7 bytes, then a usage of 4,294,967,295 output tokens.
        body = (chat_chunk("abcdefg") + chat_chunk("hijklmn") + chat_chunk("opqrstu")
                + b'data: {"id":"chatcmpl-hostile","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4294967295}}\n\n'
                + b"data: [DONE]\n\n")
        sock.sendall(sse_head() + chunk(body) + b"0\r\n\r\n")
    elif fault == "error-200-sse":
        # An error envelope (no type) inside a 200 event stream.
        body = sse(*GOOD_EVENTS[0]) + b'data: {"error":{"code":"overloaded","message":"engine overloaded"}}\n\n'
        sock.sendall(sse_head() + chunk(body) + b"0\r\n\r\n")
    elif fault == "chat-error-200":
        body = chat_chunk("he") + b'data: {"error":{"code":200,"message":"engine overloaded"}}\n\n'
        sock.sendall(sse_head() + chunk(body) + b"0\r\n\r\n")
    else:
        return False
    return True


# ---------------------------------------------------------------- HTTP faults

def http_fault(fault, sock, req_headers):
    auth = req_headers.get("authorization", "")
    if extra_fault(fault, sock, req_headers):
        return
    body_500 = json.dumps({"error": {"message": "injected failure", "type": "server_error"}}).encode()
    html = b"<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body></html>"
    if fault == "ok":
        sock.sendall(sse_head() + chunk(good_stream()) + b"0\r\n\r\n")
    elif fault == "429-retry-after":
        sock.sendall(full_response(429, "Too Many Requests", "application/json",
                                   b'{"error":{"message":"rate limited","type":"rate_limit"}}',
                                   [("Retry-After", "2")]))
    elif fault == "429":
        sock.sendall(full_response(429, "Too Many Requests", "application/json",
                                   b'{"error":{"message":"rate limited"}}'))
    elif fault == "500-json":
        sock.sendall(full_response(500, "Internal Server Error", "application/json", body_500))
    elif fault == "500-html":
        sock.sendall(full_response(500, "Internal Server Error", "text/html", html.replace(b"502 Bad Gateway", b"500 Internal Server Error")))
    elif fault == "502-html":
        sock.sendall(full_response(502, "Bad Gateway", "text/html", html))
    elif fault == "503-json":
        sock.sendall(full_response(503, "Service Unavailable", "application/json",
                                   b'{"error":{"message":"overloaded"}}'))
    elif fault == "503-html":
        sock.sendall(full_response(503, "Service Unavailable", "text/html",
                                   html.replace(b"502 Bad Gateway", b"503 Service Unavailable")))
    elif fault == "401-echo-key":
        body = json.dumps({"error": {"message": "Incorrect API key provided: %s" % auth,
                                     "type": "invalid_request_error"}}).encode()
        sock.sendall(full_response(401, "Unauthorized", "application/json", body))
    elif fault == "reset-before-headers":
        reset(sock)
        return
    elif fault == "reset-after-headers":
        sock.sendall(sse_head())
        time.sleep(0.05)
        reset(sock)
        return
    elif fault == "reset-mid-chunk":
        data = good_stream()
        sock.sendall(sse_head() + b"%x\r\n" % len(data) + data[:40])
        time.sleep(0.05)
        reset(sock)
        return
    elif fault == "stall-before-first-byte":
        sleep_or_closed(sock, 60)
    elif fault == "stall-mid-stream":
        sock.sendall(sse_head() + chunk(sse(*GOOD_EVENTS[0]) + sse(*GOOD_EVENTS[1])))
        sleep_or_closed(sock, 60)
    elif fault == "malformed-sse-lines":
        # Lines with no known field, a bare word, a comment: the SSE spec ignores them.
        noise = b"garbage without colon\nretry: banana\n: comment\nid\n\n"
        sock.sendall(sse_head() + chunk(noise + good_stream() ) + b"0\r\n\r\n")
    elif fault == "data-not-json":
        sock.sendall(sse_head() + chunk(sse(*GOOD_EVENTS[0]) + b"event: response.output_text.delta\ndata: this is not json\n\n") + b"0\r\n\r\n")
    elif fault == "json-wrong-shape":
        sock.sendall(sse_head() + chunk(sse(*GOOD_EVENTS[0]) + sse("response.output_text.delta", {"type": "response.output_text.delta", "delta": {"nested": [1, 2]}})) + b"0\r\n\r\n")
    elif fault == "invalid-utf8":
        bad = b'{"type":"response.output_text.delta","delta":"caf\xc3\x28 \xff\xfe"}'
        sock.sendall(sse_head() + chunk(sse(*GOOD_EVENTS[0]) + sse("response.output_text.delta", bad)) + b"0\r\n\r\n")
    elif fault == "huge-line":
        n = SIZES["line"]
        sock.sendall(sse_head() + chunk(sse(*GOOD_EVENTS[0])))
        prefix = b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":"'
        try:
            sock.sendall(b"%x\r\n" % (len(prefix) + n) + prefix)
            piece = b"x" * (1 << 20)
            sent = 0
            while sent < n:
                k = min(len(piece), n - sent)
                sock.sendall(piece[:k])
                sent += k
            sock.sendall(b"\r\n" + chunk(b'"}\n\n' + sse(*GOOD_EVENTS[3])) + b"0\r\n\r\n")
        except OSError:
            pass
    elif fault == "endless-line":
        # One SSE line that never ends: 1 MiB every 10 ms, no newline.
        sock.sendall(sse_head() + chunk(sse(*GOOD_EVENTS[0]) + b"data: "))
        send_forever(sock, chunk(b"y" * (1 << 20)), gap=0.01)
    elif fault == "endless-stream":
        # Valid deltas forever, never completed, 50 per second.
        sock.sendall(sse_head() + chunk(sse(*GOOD_EVENTS[0])))
        send_forever(sock, chunk(sse(*GOOD_EVENTS[1])), gap=0.02)
    elif fault == "event-flood":
        # Deltas as fast as the socket takes them, never completed.
        sock.sendall(sse_head() + chunk(sse(*GOOD_EVENTS[0])))
        send_forever(sock, chunk(sse(*GOOD_EVENTS[1]) * 2000))
    elif fault == "many-chunks":
        # More content chunks than a record keeps (100,000), then a proper end with usage.
        n = 100_005
        done = completed()
        done["response"]["usage"]["output_tokens"] = n
        body = sse(*GOOD_EVENTS[0]) + sse("response.output_text.delta", delta("x")) * n
        sock.sendall(sse_head() + chunk(body) + chunk(sse("response.completed", done)) + b"0\r\n\r\n")
    elif fault == "wrong-content-type":
        sock.sendall(full_response(200, "OK", "text/html", b"<html><body>Welcome to nginx!</body></html>"))
    elif fault == "http10-close-delimited":
        sock.sendall(head(200, "OK", [("Content-Type", "text/event-stream")], version="HTTP/1.0") + good_stream())
    elif fault == "broken-chunked":
        sock.sendall(sse_head() + chunk(sse(*GOOD_EVENTS[0])) + b"zz-not-hex\r\nhello\r\n")
        time.sleep(0.1)
    elif fault == "chunked-cut-in-size-line":
        sock.sendall(sse_head() + chunk(sse(*GOOD_EVENTS[0])) + b"1")
        time.sleep(0.05)
    elif fault == "slow-headers":
        data = sse_head() + chunk(good_stream()) + b"0\r\n\r\n"
        try:
            for b in data:
                sock.sendall(bytes([b]))
                if sleep_or_closed(sock, 1.0):
                    break
        except OSError:
            pass
    elif fault == "garbage-head":
        sock.sendall(b"SSH-2.0-OpenSSH_9.6\r\n\x00\x01\x02 not http at all\r\n\r\n")
        time.sleep(0.1)
    elif fault == "oversized-head":
        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nX-Big: " + b"a" * (2 << 20) + b"\r\n\r\n")
        time.sleep(0.1)
    else:
        sock.sendall(full_response(404, "Not Found", "text/plain", b"unknown fault " + fault.encode()))


# ---------------------------------------------------------------- WebSocket

def ws_frame(opcode, payload, fin=True):
    b0 = (0x80 if fin else 0) | opcode
    n = len(payload)
    if n < 126:
        hdr = struct.pack("!BB", b0, n)
    elif n < 65536:
        hdr = struct.pack("!BBH", b0, 126, n)
    else:
        hdr = struct.pack("!BBQ", b0, 127, n)
    return hdr + payload


def ws_text(obj):
    return ws_frame(0x1, json.dumps(obj).encode())


def ws_close(code=None, reason=b""):
    return ws_frame(0x8, b"" if code is None else struct.pack("!H", code) + reason)


def recv_exact(sock, n):
    buf = b""
    while len(buf) < n:
        got = sock.recv(n - len(buf))
        if not got:
            raise ConnectionError("eof")
        buf += got
    return buf


def ws_read(sock):
    """One client frame (clients mask): (opcode, payload)."""
    b0, b1 = recv_exact(sock, 2)
    n = b1 & 0x7F
    if n == 126:
        n = struct.unpack("!H", recv_exact(sock, 2))[0]
    elif n == 127:
        n = struct.unpack("!Q", recv_exact(sock, 8))[0]
    mask = recv_exact(sock, 4) if b1 & 0x80 else b"\0\0\0\0"
    data = bytearray(recv_exact(sock, n))
    for i in range(n):
        data[i] ^= mask[i % 4]
    return b0 & 0x0F, bytes(data)


def ws_read_message(sock):
    while True:
        op, data = ws_read(sock)
        if op in (0x1, 0x2):
            return data
        if op == 0x8:
            raise ConnectionError("client closed")


def ws_fault(fault, sock, req_headers):
    auth = req_headers.get("authorization", "")
    if fault == "ws-426":
        sock.sendall(full_response(426, "Upgrade Required", "text/plain", b"use HTTP/2", [("Upgrade", "h2c")]))
        return
    if fault == "ws-401-echo-key":
        body = ("refused: Authorization header %r is not valid" % auth).encode()
        sock.sendall(full_response(401, "Unauthorized", "text/plain", body))
        return
    if fault == "ws-500-upgrade":
        sock.sendall(full_response(500, "Internal Server Error", "application/json",
                                   b'{"error":{"message":"injected failure"}}'))
        return
    key = req_headers.get("sec-websocket-key", "").encode()
    accept = base64.b64encode(hashlib.sha1(key + WS_GUID).digest()).decode()
    extra = [("Sec-WebSocket-Extensions", "permessage-deflate")] if fault == "ws-deflate" else []
    sock.sendall(head(101, "Switching Protocols", [("Upgrade", "websocket"), ("Connection", "Upgrade"),
                                                   ("Sec-WebSocket-Accept", accept)] + extra))
    while True:
        try:
            ws_read_message(sock)
        except (ConnectionError, OSError):
            return
        if not ws_turn(fault, sock):
            return


def ws_turn(fault, sock):
    """One reply; returns False when the socket is done."""
    msgs = [o for _, o in GOOD_EVENTS]
    if fault == "ws-ok":
        sock.sendall(b"".join(ws_text(m) for m in msgs))
        return True
    if fault == "ws-deflate":
        # Uncompressed frames after an unrequested permessage-deflate (RFC 6455: fail it).
        sock.sendall(b"".join(ws_text(m) for m in msgs))
        return True
    if fault == "ws-foreign-ids":
        # Events of three response ids in one turn.
        other = {"type": "response.created", "response": {"id": "resp_other", "status": "in_progress"}}
        third = completed()
        third["response"]["id"] = "resp_third"
        sock.sendall(ws_text(msgs[0]) + ws_text(msgs[1]) + ws_text(other) + ws_text(msgs[2]) + ws_text(third))
        return True
    if fault == "ws-error-200":
        sock.sendall(ws_text({"type": "error", "status": 200,
                              "error": {"code": "overloaded", "message": "engine overloaded"}}))
        return True
    if fault == "ws-error-500":
        sock.sendall(ws_text({"type": "error", "status": 500,
                              "error": {"type": "server_error", "message": "injected failure"}}))
        return True
    if fault == "ws-close-1011":
        sock.sendall(ws_text(msgs[0]) + ws_close(1011, b"internal error"))
    elif fault == "ws-close-no-status":
        sock.sendall(ws_text(msgs[0]) + ws_close(None))
    elif fault == "ws-close-before-completed":
        sock.sendall(ws_text(msgs[0]) + ws_text(msgs[1]) + ws_close(1000, b"bye"))
    elif fault == "ws-binary-frame":
        sock.sendall(ws_text(msgs[0]) + ws_frame(0x2, b"\x00\x01binary"))
    elif fault == "ws-invalid-utf8":
        sock.sendall(ws_text(msgs[0]) + ws_frame(0x1, b'{"type":"response.output_text.delta","delta":"\xff\xfe"}'))
    elif fault == "ws-huge-frame":
        n = SIZES["frame"]
        try:
            sock.sendall(ws_text(msgs[0]) + struct.pack("!BBQ", 0x81, 127, n))
            piece = b"x" * (1 << 20)
            sent = 0
            while sent < n:
                k = min(len(piece), n - sent)
                sock.sendall(piece[:k])
                sent += k
        except OSError:
            pass
    elif fault == "ws-ping-flood":
        # 5,000 (small: 500) pings, then the reply: pongs must not pile up, the turn completes.
        try:
            sock.sendall(ws_text(msgs[0]) + ws_frame(0x9, b"p") * SIZES["pings"] + b"".join(ws_text(m) for m in msgs[1:]))
        except OSError:
            return False
        return True
    elif fault == "ws-stall":
        sock.sendall(ws_text(msgs[0]))
        sleep_or_closed(sock, 60)
    elif fault == "ws-reset-mid-stream":
        sock.sendall(ws_text(msgs[0]))
        time.sleep(0.05)
        reset(sock)
        return False
    elif fault == "ws-endless-stream":
        sock.sendall(ws_text(msgs[0]))
        send_forever(sock, ws_text(msgs[1]), gap=0.02)
    else:
        sock.sendall(ws_close(1008, b"unknown fault"))
    time.sleep(0.05)
    return False


# ---------------------------------------------------------------- HTTP/2 (raw frames)

H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, RST_STREAM, SETTINGS, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = 0, 1, 3, 4, 6, 7, 8, 9
END_STREAM, END_HEADERS, ACK, PADDED = 0x1, 0x4, 0x1, 0x8
# HPACK: `:status: 200` (static index 8), then content-type (static name 31) as a literal
# without indexing, no Huffman.
H2_SSE_HEAD = b"\x88" + b"\x0f\x10" + bytes([17]) + b"text/event-stream"


def h2_frame(kind, flags, stream, payload=b""):
    return struct.pack("!I", len(payload))[1:] + bytes([kind, flags]) + struct.pack("!I", stream) + payload


def h2_read_frame(sock):
    hdr = recv_exact(sock, 9)
    n = struct.unpack("!I", b"\0" + hdr[:3])[0]
    return hdr[3], hdr[4], struct.unpack("!I", hdr[5:9])[0] & 0x7FFFFFFF, recv_exact(sock, n)


def h2_flood(sock, piece, limit_s=120):
    """Sends `piece` again and again until the client goes away (or `limit_s`)."""
    send_forever(sock, piece * 256, limit_s=limit_s)


def h2_answer(sock, stream, fault):
    """The answer to a request on `stream`; False when the connection is done."""
    ok_head = h2_frame(HEADERS, END_HEADERS, stream, H2_SSE_HEAD)
    first = sse(*GOOD_EVENTS[0])
    if fault == "h2-flow-control-overflow":
        # A connection WINDOW_UPDATE that takes the client's send window past 2^31-1
        # (RFC 9113 6.9.1: a FLOW_CONTROL_ERROR of the connection, GOAWAY).
        sock.sendall(ok_head + h2_frame(DATA, 0, stream, first)
                     + h2_frame(WINDOW_UPDATE, 0, 0, struct.pack("!I", 0x7FFFFFFF)))
        sleep_or_closed(sock, 10)
        return False
    if fault == "h2-continuation-flood":
        # A HEADERS frame without END_HEADERS, then CONTINUATION frames that never end it.
        sock.sendall(h2_frame(HEADERS, 0, stream, b"\x88"))
        h2_flood(sock, h2_frame(CONTINUATION, 0, stream, b""))
        return False
    if fault == "h2-empty-data-flood":
        # The response head and first event, then empty DATA frames forever.
        sock.sendall(ok_head + h2_frame(DATA, 0, stream, first))
        h2_flood(sock, h2_frame(DATA, 0, stream, b""))
        return False
    if fault == "h2-rst-protocol":
        # The server resets the stream with PROTOCOL_ERROR after the first event.
        sock.sendall(ok_head + h2_frame(DATA, 0, stream, first)
                     + h2_frame(RST_STREAM, 0, stream, struct.pack("!I", 1)))
        return True
    # h2-ok and anything else: a well-formed stream.
    sock.sendall(ok_head + h2_frame(DATA, END_STREAM, stream, good_stream()))
    return True


def handle_h2(sock):
    """One h2c connection: SETTINGS first, then requests; the fault is the body's `model`."""
    try:
        if recv_exact(sock, len(H2_PREFACE)) != H2_PREFACE:
            return
        sock.sendall(h2_frame(SETTINGS, 0, 0))
        bodies = {}
        while True:
            kind, flags, stream, payload = h2_read_frame(sock)
            if kind == SETTINGS and not flags & ACK:
                sock.sendall(h2_frame(SETTINGS, ACK, 0))
            elif kind == PING and not flags & ACK:
                sock.sendall(h2_frame(PING, ACK, 0, payload))
            elif kind == GOAWAY:
                return
            elif kind == HEADERS:
                bodies[stream] = b""
                if flags & END_STREAM and not h2_answer(sock, stream, "h2-ok"):
                    return
            elif kind == DATA and stream in bodies:
                if flags & PADDED:
                    payload = payload[1:len(payload) - payload[0]]
                bodies[stream] += payload
                if flags & END_STREAM:
                    try:
                        fault = str(json.loads(bodies.pop(stream)).get("model", "h2-ok"))
                    except ValueError:
                        fault = "h2-ok"
                    if not h2_answer(sock, stream, fault):
                        return
    except (ConnectionError, OSError):
        pass
    finally:
        try:
            sock.close()
        except OSError:
            pass


def serve(srv, handler):
    while True:
        conn, _ = srv.accept()
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=handler, args=(conn,), daemon=True).start()


# ---------------------------------------------------------------- connection handling

def read_request(sock):
    buf = b""
    while b"\r\n\r\n" not in buf:
        got = sock.recv(65536)
        if not got:
            return None
        buf += got
        if len(buf) > 1 << 20:
            return None
    head_bytes, rest = buf.split(b"\r\n\r\n", 1)
    lines = head_bytes.decode("latin-1").split("\r\n")
    method, path, _ = (lines[0].split(" ") + ["", "", ""])[:3]
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    n = int(headers.get("content-length", "0") or 0)
    while len(rest) < n:
        got = sock.recv(65536)
        if not got:
            break
        rest += got
    return method, path, headers


def fault_of(path):
    parts = path.split("/")
    # /f/<fault>/v1/responses
    return parts[2] if len(parts) > 2 and parts[1] == "f" else "ok"


def handle(sock):
    try:
        while True:
            req = read_request(sock)
            if req is None:
                return
            method, path, headers = req
            fault = fault_of(path)
            if headers.get("upgrade", "").lower() == "websocket":
                if fault.startswith("ws-"):
                    ws_fault(fault, sock, headers)
                else:
                    # An HTTP fault as the answer to the upgrade request.
                    http_fault(fault, sock, headers)
                return
            if method == "PRI" or fault == "h2-refused":
                # An HTTP/2 prior-knowledge client: this server speaks HTTP/1.1 only.
                sock.sendall(full_response(505, "HTTP Version Not Supported", "text/plain", b"HTTP/1.1 only"))
                time.sleep(0.05)
                return
            http_fault(fault, sock, headers)
            if fault not in ("ok", "malformed-sse-lines"):
                return
    except OSError:
        pass
    finally:
        try:
            sock.close()
        except OSError:
            pass


def main():
    global SIZES
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--scale", choices=sorted(SCALE), default="small")
    args = ap.parse_args()
    SIZES = SCALE[args.scale]
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", args.port))
    srv.listen(256)
    h2 = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    h2.bind(("127.0.0.1", 0))
    h2.listen(256)
    print("listening on http://127.0.0.1:%d" % srv.getsockname()[1], flush=True)
    print("h2 on http://127.0.0.1:%d" % h2.getsockname()[1], flush=True)
    threading.Thread(target=serve, args=(h2, handle_h2), daemon=True).start()
    serve(srv, handle)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(0)
