#!/usr/bin/env python3
"""Helper of scripts/aiperf-side-by-side.sh: AIPerf and spark-bench against one simulator.

Subcommands (the shell script calls them; each does one small thing):

  cpu OUT.json -- CMD...   run CMD as a child subreaper: every process of its tree (AIPerf
                           spawns a dozen services and workers) is reaped here, so
                           getrusage(RUSAGE_CHILDREN) holds the CPU time of all of them.
                           Writes {"cpu_s", "user_s", "sys_s", "wall_s", "rc", "maxrss_kb"}
                           (the largest peak RSS of one process of the tree). The
                           benchmark scripts (cpu-per-chunk.sh, memory-run.sh) time
                           their runs with it too.
  proc-cpu PID             CPU-seconds (user + sys) a running process has used so far.
  tokenizer CORPUS DIR     (run with the venv's python) trains an offline byte-level BPE
                           tokenizer on CORPUS: AIPerf needs a tokenizer and its `builtin`
                           one downloads tiktoken's o200k_base at start.
  aiperf-isl DIR           the mean prompt tokens the server reported for AIPerf's requests.
  aiperf-rate DIR          AIPerf's achieved request rate, requests per second.
  row ...                  one result row (JSON line) from a tool's output, its CPU file and
                           the simulator's measured TTFT over the run (GET /v1/sim/ttft).
  table ROWS.jsonl         the side-by-side table, ratios included.

Only the standard library, except `tokenizer`.
"""

import ctypes
import json
import os
import resource
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36


def cmd_cpu(argv):
    out, sep, cmd = argv[0], argv[1], argv[2:]
    if sep != "--" or not cmd:
        sys.exit("usage: cpu OUT.json -- CMD...")
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        sys.exit("prctl(PR_SET_CHILD_SUBREAPER) failed")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    child = subprocess.Popen(cmd)
    rc = child.wait()
    wall = time.monotonic() - t0
    # Orphaned grandchildren were re-parented to us: wait for every one of them.
    while True:
        try:
            os.wait()
        except ChildProcessError:
            break
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    user = after.ru_utime - before.ru_utime
    sys_ = after.ru_stime - before.ru_stime
    res = {
        "cpu_s": user + sys_,
        "user_s": user,
        "sys_s": sys_,
        "wall_s": wall,
        "rc": rc,
        "maxrss_kb": after.ru_maxrss,
    }
    with open(out, "w") as f:
        json.dump(res, f)
    sys.exit(rc)


def cmd_proc_cpu(argv):
    with open(f"/proc/{argv[0]}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    # After ")": state is field 0, utime field 11, stime field 12.
    print((int(fields[11]) + int(fields[12])) / tick)


def cmd_tokenizer(argv):
    corpus, out = argv
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=8000,
        special_tokens=["<unk>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train([corpus], trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>"
    )
    fast.save_pretrained(out)
    text = open(corpus, encoding="utf-8").read()[:200_000]
    print(f"tokenizer: {len(text) / len(tok.encode(text).ids):.2f} characters per token")


def load(path):
    with open(path) as f:
        return json.load(f)


def cmd_aiperf_isl(argv):
    d = load(os.path.join(argv[0], "profile_export_aiperf.json"))
    print(round(d["usage_prompt_tokens"]["avg"]))


def cmd_aiperf_rate(argv):
    d = load(os.path.join(argv[0], "profile_export_aiperf.json"))
    print(f'{d["request_throughput"]["avg"]:.3f}')


def aiperf_figures(out_dir):
    d = load(os.path.join(out_dir, "profile_export_aiperf.json"))
    return {
        "requests": int(d["request_count"]["avg"]),
        "errors": int(d["request_count"]["avg"] - d["completed_request_count"]["avg"])
        if "completed_request_count" in d
        else None,
        "output_tok_s": d["output_token_throughput"]["avg"],
        "ttft_p50_ms": d["time_to_first_token"]["p50"],
        "input_tokens": d["usage_prompt_tokens"]["avg"],
        "output_tokens": d["usage_completion_tokens"]["avg"],
        "span_s": d["benchmark_duration"]["avg"],
    }


def sb_figures(out_dir):
    runs = [os.path.join(out_dir, r) for r in sorted(os.listdir(out_dir))]
    runs = [r for r in runs if os.path.isfile(os.path.join(r, "summary.json"))]
    cell = load(os.path.join(runs[-1], "summary.json"))["cells"][0]
    m = cell["metrics"]
    return {
        "requests": cell["requests"],
        "errors": cell["failed"],
        # Over the whole span, as AIPerf's (summary.json's aggregate_output_tok_s divides by
        # the time with a request in flight, which an open loop's idle gaps leave out).
        "output_tok_s": cell["output_tokens"] / cell["span_s"],
        "ttft_p50_ms": m["ttft"]["p50"],
        "input_tokens": cell.get("mean_input_tokens"),
        "output_tokens": cell.get("mean_output_tokens"),
        "span_s": cell["span_s"],
        "server_ttft_p50_ms": m.get("server_ttft", {}).get("p50"),
    }


def cmd_row(argv):
    # row TOOL CONCURRENCY OUT_DIR CPU.json SMALL_CPU.json SMALL_REQUESTS SIM_CPU_S SIM_TTFT_MS
    #     SIM_MEASURED.json (GET /v1/sim/ttft after the run)
    tool, conc, out_dir, cpu_file, small_cpu, small_n, sim_cpu, sim_ttft, measured = argv
    fig = aiperf_figures(out_dir) if tool == "aiperf" else sb_figures(out_dir)
    cpu = load(cpu_file)
    row = {"tool": tool, "concurrency": int(conc), **fig, **cpu}
    row["small_cpu_s"] = load(small_cpu)["cpu_s"] if small_cpu != "-" else None
    row["small_requests"] = int(small_n)
    row["sim_ttft_ms"] = float(sim_ttft)
    row["sim_cpu_s"] = float(sim_cpu)
    m = load(measured)
    if m["responses"] != row["requests"]:
        print(f"warning: {measured}: the simulator measured the TTFT of {m['responses']} "
              f"responses of this run, the tool counted {row['requests']} requests "
              f"(failed ones have no first chunk)", file=sys.stderr)
    row["sim_measured_ttft_p50_ms"] = m["p50_ms"]
    print(json.dumps(row))


def marginal_ms(r):
    """CPU-ms per request net of the tool's fixed cost: the difference between the full run
    and a short run of the same tool and concurrency, over the difference in requests."""
    n = r["requests"] - r["small_requests"]
    if r["small_cpu_s"] is None:
        return float("nan")
    return 1000 * (r["cpu_s"] - r["small_cpu_s"]) / n if n > 0 else float("nan")


def over_measured(r):
    """TTFT p50 over the simulator's measured TTFT p50 (request read → first chunk written):
    the client's share, with the simulator's wait for its own CPU taken out."""
    if r.get("sim_measured_ttft_p50_ms") is None:
        return float("nan")
    return r["ttft_p50_ms"] - r["sim_measured_ttft_p50_ms"]


def cmd_table(argv):
    rows = [json.loads(line) for line in open(argv[0]) if line.strip()]
    head = (
        "tool", "conc", "requests", "err", "in/out tok", "wall s", "client CPU-s",
        "CPU-ms/req", "marginal", "out tok/s", "sim cores", "TTFT p50 ms", "sim TTFT ms", "inflation ms",
        "sim measured ms", "over it ms",
    )
    lines = [head]
    for r in rows:
        lines.append((
            r["tool"], str(r["concurrency"]), str(r["requests"]), str(r["errors"]),
            f"{r['input_tokens']:.0f}/{r['output_tokens']:.0f}",
            f"{r['wall_s']:.1f}", f"{r['cpu_s']:.2f}",
            f"{1000 * r['cpu_s'] / r['requests']:.3f}", f"{marginal_ms(r):.3f}",
            f"{r['output_tok_s']:,.0f}",
            f"{r['sim_cpu_s'] / r['span_s']:.2f}",
            f"{r['ttft_p50_ms']:.3f}", f"{r['sim_ttft_ms']:.3f}",
            f"{r['ttft_p50_ms'] - r['sim_ttft_ms']:.3f}",
            f"{r['sim_measured_ttft_p50_ms'] or float('nan'):.3f}", f"{over_measured(r):.3f}",
        ))
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    for i, line in enumerate(lines):
        print("  ".join(c.rjust(w) for c, w in zip(line, widths)))
        if i == 0:
            print("  ".join("-" * w for w in widths))
    print()
    print("ratios, spark-bench / AIPerf (the issue's aim: CPU per request <= 0.02, "
          "TTFT inflation <= 0.10):")
    for conc in sorted({r["concurrency"] for r in rows}):
        a = [r for r in rows if r["concurrency"] == conc and r["tool"] == "aiperf"]
        s = [r for r in rows if r["concurrency"] == conc and r["tool"] == "spark-bench"]
        if not a or not s:
            continue
        a, s = a[-1], s[-1]
        cpu = (s["cpu_s"] / s["requests"]) / (a["cpu_s"] / a["requests"])
        marg = marginal_ms(s) / marginal_ms(a)
        infl = (s["ttft_p50_ms"] - s["sim_ttft_ms"]) / (a["ttft_p50_ms"] - a["sim_ttft_ms"])
        tput = s["output_tok_s"] / a["output_tok_s"]
        over = over_measured(s) / over_measured(a)
        print(f"  concurrency {conc}: CPU per request {cpu:.4f} (1/{1 / cpu:.0f}; "
              f"marginal {marg:.4f}, 1/{1 / marg:.0f}), "
              f"TTFT inflation {infl:.4f} (1/{1 / infl:.0f}), output tok/s {tput:.1f}x")
        print(f"    TTFT over the simulator's measured TTFT: {over:.4f} (1/{1 / over:.0f})")
        o = [r for r in rows if r["concurrency"] == conc and r["tool"] == "sb@aiperf-rate"]
        if o:
            o = o[-1]
            infl = (o["ttft_p50_ms"] - o["sim_ttft_ms"]) / (a["ttft_p50_ms"] - a["sim_ttft_ms"])
            cpu = (o["cpu_s"] / o["requests"]) / (a["cpu_s"] / a["requests"])
            over = over_measured(o) / over_measured(a)
            print(f"    open loop at AIPerf's request rate: CPU per request {cpu:.4f} "
                  f"(1/{1 / cpu:.0f}), TTFT inflation {infl:.4f} (1/{1 / infl:.0f}), "
                  f"over the simulator's measured TTFT {over:.4f} (1/{1 / over:.0f})")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    cmds = {
        "cpu": cmd_cpu, "proc-cpu": cmd_proc_cpu, "tokenizer": cmd_tokenizer,
        "aiperf-isl": cmd_aiperf_isl, "aiperf-rate": cmd_aiperf_rate, "row": cmd_row, "table": cmd_table,
    }
    if sys.argv[1] not in cmds:
        sys.exit(__doc__)
    cmds[sys.argv[1]](sys.argv[2:])


if __name__ == "__main__":
    main()
