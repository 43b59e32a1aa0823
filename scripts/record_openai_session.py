#!/usr/bin/env python3
"""A small coding-agent session driven by the official `openai` SDK, for `spark-bench record`.

Usage: record_openai_session.py BASE_URL MODE [--no-tools] [--no-warmup] [--parallel] [--include-usage]
  MODE  sse   Responses over HTTP/SSE, the full history resent every request
        ws    the Responses WebSocket mode (client.responses.connect()), a generate:false
              warm-up, then every request chained by previous_response_id on one socket
        chat  Chat Completions over SSE (full history; the SDK's default options: no
              stream_options.include_usage unless --include-usage)
  --no-tools   the server cannot be made to call tools: text turns only
  --no-warmup  (ws) no generate:false warm-up (for servers that answer it with response.created only)
  --parallel   (sse, ws) the first turn's two tool calls in one response (parallel calls,
               asked for with tool_choice allowed_tools mode required)

Three user turns: the first makes two tool calls (read_file, then run_tests; the tool "runs"
for 120 ms and 200 ms before its result is sent; with --parallel both at once, 120 ms), then
answers; after 300 ms of "thinking" the second asks for a summary, after 200 ms the third
for a test. The API key and the first prompt hold a planted fake key
(sk-proj-…) that must appear in nothing the recorder writes. Prints one JSON line with what
the client saw (requests, token totals) and exits non-zero on a broken expectation.
"""
import json
import sys
import time

from openai import OpenAI

FAKE_KEY = "sk-proj-PLANTEDfakeKEY0123456789abcdefXYZ"
SYSTEM = "You are a coding agent with tools read_file(path) and run_tests(selector). Be terse."
TURNS = [
    {"prompt": f"CI fails in tests/test_totals.py since the refactor; fix it. (My key is {FAKE_KEY}, do not leak it.)",
     "tools": [("read_file", 0.12, "def total(xs):\n    return round(sum(xs), 2)\n" * 12),
               ("run_tests", 0.20, "tests/test_totals.py::test_round ... FAILED\n" * 20)],
     "max": 90},
    {"prompt": "Summarise what you changed as a commit message.", "tools": [], "max": 60, "think": 0.30},
    {"prompt": "Now add a test for the half-even case.", "tools": [], "max": 40, "think": 0.20},
]
TOOLS = [{"type": "function", "name": n, "description": f"The {n} tool.",
          "parameters": {"type": "object", "properties": {}}} for n in ("read_file", "run_tests")]


def steps_of(turn, with_tools):
    """The turn's tool steps: (names, tool time, output) each; --parallel merges them into one."""
    steps = [([n], t, o) for n, t, o in turn["tools"]] if with_tools else []
    if steps and "--parallel" in sys.argv:
        steps = [([n for s in steps for n in s[0]], steps[0][1], steps[0][2])]
    return steps


def choice(names):
    if len(names) == 1:
        return {"type": "function", "name": names[0]}
    return {"type": "allowed_tools", "mode": "required",
            "tools": [{"type": "function", "name": n} for n in names]}


def fail(msg):
    print(f"FAIL: {msg}", file=sys.stderr)
    sys.exit(1)


def user(text):
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]}


def responses_sse(client, with_tools, seen):
    history = []
    for turn in TURNS:
        time.sleep(turn.get("think", 0))
        history.append(user(turn["prompt"]))
        steps = steps_of(turn, with_tools)
        for i in range(len(steps) + 1):
            kw = {}
            if with_tools:
                kw["tools"] = TOOLS
                kw["tool_choice"] = choice(steps[i][0]) if i < len(steps) else "none"
            stream = client.responses.create(model="sim", instructions=SYSTEM, input=history,
                                             max_output_tokens=turn["max"], store=False, stream=True, **kw)
            final = None
            for ev in stream:
                if ev.type == "response.completed":
                    final = ev.response
            if final is None:
                fail("no response.completed")
            seen(final.usage)
            calls = [o for o in final.output if o.type == "function_call"]
            for o in final.output:
                if o.type == "function_call":
                    history.append({"type": "function_call", "call_id": o.call_id, "name": o.name,
                                    "arguments": o.arguments})
                elif o.type == "message":
                    history.append({"role": "assistant", "content": final.output_text})
            if i < len(steps):
                if len(calls) != len(steps[i][0]):
                    fail(f"expected calls of {steps[i][0]}, got {len(calls)}")
                time.sleep(steps[i][1])
                for c in calls:
                    history.append({"type": "function_call_output", "call_id": c.call_id, "output": steps[i][2]})


def drain(conn):
    for ev in conn:
        if ev.type == "error":
            fail(f"error event {ev}")
        if ev.type == "response.completed":
            return ev.response
    fail("socket closed before response.completed")


def responses_ws(client, with_tools, seen):
    with client.responses.connect() as conn:
        prev = None
        if "--no-warmup" not in sys.argv:
            conn.send({"type": "response.create", "model": "sim", "store": False, "generate": False,
                       "instructions": SYSTEM, "input": []})
            prev = drain(conn).id
        for turn in TURNS:
            time.sleep(turn.get("think", 0))
            new = [user(turn["prompt"])]
            steps = steps_of(turn, with_tools)
            for i in range(len(steps) + 1):
                kw = {}
                if with_tools:
                    kw["tools"] = TOOLS
                    kw["tool_choice"] = choice(steps[i][0]) if i < len(steps) else "none"
                if prev:
                    kw["previous_response_id"] = prev
                conn.response.create(model="sim", store=False, instructions=SYSTEM,
                                     input=new, max_output_tokens=turn["max"], **kw)
                final = drain(conn)
                seen(final.usage)
                prev = final.id
                calls = [o for o in final.output if o.type == "function_call"]
                new = []
                if i < len(steps):
                    if len(calls) != len(steps[i][0]):
                        fail(f"expected calls of {steps[i][0]}, got {len(calls)}")
                    time.sleep(steps[i][1])
                    new = [{"type": "function_call_output", "call_id": c.call_id, "output": steps[i][2]}
                           for c in calls]


def chat_sse(client, with_tools, seen):
    msgs = [{"role": "system", "content": SYSTEM}]
    ctools = [{"type": "function", "function": {"name": t["name"], "description": t["description"],
                                                "parameters": t["parameters"]}} for t in TOOLS]
    for turn in TURNS:
        time.sleep(turn.get("think", 0))
        msgs.append({"role": "user", "content": turn["prompt"]})
        steps = turn["tools"] if with_tools else []
        for i in range(len(steps) + 1):
            kw = {}
            if with_tools:
                kw["tools"] = ctools
                kw["tool_choice"] = ({"type": "function", "function": {"name": steps[i][0]}}
                                     if i < len(steps) else "none")
            text, calls, usage = [], {}, None
            if "--include-usage" in sys.argv:
                kw["stream_options"] = {"include_usage": True}
            for ch in client.chat.completions.create(model="sim", messages=msgs, max_tokens=turn["max"],
                                                     stream=True, **kw):
                if ch.usage:
                    usage = ch.usage
                for c in ch.choices:
                    if c.delta.content:
                        text.append(c.delta.content)
                    for tc in c.delta.tool_calls or []:
                        d = calls.setdefault(tc.index, {"id": "", "name": "", "args": ""})
                        d["id"] = tc.id or d["id"]
                        d["name"] += (tc.function.name or "") if tc.function else ""
                        d["args"] += (tc.function.arguments or "") if tc.function else ""
            if usage is None and "--include-usage" in sys.argv:
                fail("no usage chunk")
            seen(type("U", (), {"input_tokens": usage.prompt_tokens if usage else 0,
                                "output_tokens": usage.completion_tokens if usage else 0}))
            msg = {"role": "assistant", "content": "".join(text)}
            if calls:
                msg["tool_calls"] = [{"id": c["id"], "type": "function",
                                      "function": {"name": c["name"], "arguments": c["args"]}} for c in calls.values()]
            msgs.append(msg)
            if i < len(steps):
                if not calls:
                    fail(f"expected a call of {steps[i][0]}")
                time.sleep(steps[i][1])
                for c in calls.values():
                    msgs.append({"role": "tool", "tool_call_id": c["id"], "content": steps[i][2]})


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 2 or args[1] not in ("sse", "ws", "chat"):
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    with_tools = "--no-tools" not in sys.argv
    client = OpenAI(base_url=args[0], api_key=FAKE_KEY, max_retries=0, timeout=30)
    totals = {"requests": 0, "input_tokens": 0, "output_tokens": 0}

    def seen(u):
        totals["requests"] += 1
        totals["input_tokens"] += u.input_tokens or 0
        totals["output_tokens"] += u.output_tokens or 0

    {"sse": responses_sse, "ws": responses_ws, "chat": chat_sse}[args[1]](client, with_tools, seen)
    print(json.dumps({"mode": args[1], **totals}))


if __name__ == "__main__":
    main()
