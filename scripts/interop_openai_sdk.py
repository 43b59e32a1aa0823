#!/usr/bin/env python3
"""Interop check: the official `openai` Python SDK against the spark-bench simulator.

Usage: interop_openai_sdk.py BASE_URL   (e.g. http://127.0.0.1:8089/v1)

Exercises Responses over SSE, Chat Completions over SSE with include_usage, and the
Responses WebSocket mode (`client.responses.connect()`): a `generate: false` warm-up, then two
turns chained by `previous_response_id`. Exits non-zero on the first broken expectation.
For an https URL, point SSL_CERT_FILE at the PEM that `spark-bench serve --tls` printed.
"""
import sys

import openai
from openai import OpenAI


def check(cond, msg):
    if not cond:
        print(f"FAIL: {msg}", file=sys.stderr)
        sys.exit(1)


def responses_sse(client):
    types = []
    text = []
    final = None
    stream = client.responses.create(
        model="sim", input="Write a snake game in Python", max_output_tokens=60, stream=True,
    )
    for ev in stream:
        types.append(ev.type)
        if ev.type == "response.output_text.delta":
            text.append(ev.delta)
        if ev.type == "response.completed":
            final = ev.response
    print("responses SSE events:", " ".join(dict.fromkeys(types)))
    check(types[0] == "response.created", "first event is response.created")
    check(types[-1] == "response.completed", "last event is response.completed")
    check(final.usage.output_tokens > 0, "usage.output_tokens > 0")
    check(final.output_text == "".join(text), "output_text equals the concatenated deltas")
    print(f"  {len(text)} deltas, usage {final.usage.input_tokens} in / {final.usage.output_tokens} out")


def chat_sse(client):
    chunks = list(client.chat.completions.create(
        model="sim", messages=[{"role": "user", "content": "Write fizzbuzz"}], max_tokens=40,
        stream=True, stream_options={"include_usage": True},
    ))
    content = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    usage = chunks[-1].usage
    print(f"chat SSE: {len(chunks)} chunks, {len(content)} with content, finish {finish}, usage {usage.completion_tokens}")
    check(finish == ["stop"], "one finish_reason=stop")
    check(chunks[-1].choices == [] and usage is not None, "last chunk carries usage with choices=[]")
    check(usage.completion_tokens >= len(content), "usage counts every content token")


def drain(conn, label):
    types = []
    for ev in conn:
        types.append(ev.type)
        if ev.type == "error":
            check(False, f"{label}: error event {ev}")
        if ev.type == "response.completed":
            print(f"ws {label}:", " ".join(dict.fromkeys(types)))
            return ev.response
    check(False, f"{label}: connection closed before response.completed")


def ws_mode(client):
    with client.responses.connect() as conn:
        warm = {"type": "response.create", "model": "sim", "store": False, "generate": False,
                "instructions": "You are a coding assistant.", "input": "Write a snake game"}
        conn.send(warm)  # raw event: `generate` is sent as a plain field
        r0 = drain(conn, "warm-up")
        check(r0.output == [], "warm-up has no output")
        conn.response.create(model="sim", store=False, previous_response_id=r0.id, input=[], max_output_tokens=40)
        r1 = drain(conn, "turn 1")
        check(r1.usage.output_tokens > 0, "turn 1 produced output")
        conn.response.create(
            model="sim", store=False, previous_response_id=r1.id, max_output_tokens=40,
            input=[{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Now add tests."}]}],
        )
        r2 = drain(conn, "turn 2")
        cached = r2.usage.input_tokens_details.cached_tokens
        print(f"  turn 2: {r2.usage.input_tokens} input tokens, {cached} cached, {r2.usage.output_tokens} output")
        check(r2.previous_response_id == r1.id, "turn 2 chains from turn 1")
        check(cached > 0, "turn 2 continued from the connection cache")


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    print(f"openai {openai.__version__} against {sys.argv[1]}")
    client = OpenAI(base_url=sys.argv[1], api_key="sk-sim", max_retries=0)
    responses_sse(client)
    chat_sse(client)
    ws_mode(client)
    print("interop OK")


if __name__ == "__main__":
    main()
