"""Run one spark-bench plan as N shards on a Ray cluster, then merge them.

Ray schedules the shards: each shard is a `ray.remote` task that runs
`spark-bench run SCENARIO --shard I/N` on whichever node and worker process Ray picks. There
is no coordinator of spark-bench's own: the shards share nothing but the plan (the scenario
file and flags, identical in every task) and write ordinary results directories, which
`spark-bench merge` folds into one.

    python deploy/ray/run_shards.py --address 127.0.0.1:6379 --shards 4 \
        --binary target/release/spark-bench --out results/ray -- scenarios/smoke.toml

The results root (--out) must be visible to every node at the same path (on one machine, or
a shared filesystem); on a real cluster, write each shard to node-local disk and copy the
directories to one place before `spark-bench merge`.

Exit status: 0 when every shard ran and the merge succeeded, 1 otherwise (each failed
shard's stderr tail is printed).
"""

import argparse
import glob
import os
import socket
import subprocess
import sys
import time

import ray


@ray.remote(num_cpus=1, max_retries=0)
def run_shard(index, count, binary, run_args, root):
    """One shard: `spark-bench run … --shard index/count --out root/shard-index`."""
    out = os.path.join(root, f"shard-{index}")
    cmd = [binary, "run", *run_args, "--shard", f"{index}/{count}", "--out", out,
           "--quiet", "--no-report"]
    started = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    dirs = sorted(glob.glob(os.path.join(out, "*", "manifest.json")))
    return {
        "index": index,
        "rc": proc.returncode,
        "dir": os.path.dirname(dirs[-1]) if dirs else None,
        "node": ray.get_runtime_context().get_node_id()[:12],
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "seconds": round(time.time() - started, 2),
        "stderr": proc.stderr[-3000:],
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--address", required=True, help="the Ray cluster (head's GCS address)")
    p.add_argument("--shards", type=int, required=True, help="N: shards to schedule")
    p.add_argument("--binary", required=True, help="the spark-bench binary (same path on every node)")
    p.add_argument("--out", required=True, help="results root: shard-I/ and merged/ go here")
    p.add_argument("run_args", nargs=argparse.REMAINDER,
                   help="after --: the scenario and `spark-bench run` flags, the same for every shard")
    a = p.parse_args()
    run_args = [x for x in a.run_args if x != "--"] if a.run_args[:1] == ["--"] else a.run_args
    binary = os.path.abspath(a.binary)
    root = os.path.abspath(a.out)
    os.makedirs(root, exist_ok=True)

    ray.init(address=a.address, logging_level="WARNING", log_to_driver=False)
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    print(f"ray: {len(nodes)} node(s), {int(ray.cluster_resources().get('CPU', 0))} CPUs; "
          f"scheduling {a.shards} shards", flush=True)
    results = ray.get([run_shard.remote(i, a.shards, binary, run_args, root)
                       for i in range(a.shards)])
    ray.shutdown()
    failed = [r for r in results if r["rc"] != 0 or not r["dir"]]
    for r in sorted(results, key=lambda r: r["index"]):
        print(f"shard {r['index']}/{a.shards}: exit {r['rc']} in {r['seconds']} s on node "
              f"{r['node']} ({r['host']}), worker pid {r['pid']}: {r['dir']}", flush=True)
    for r in failed:
        print(f"--- shard {r['index']} stderr ---\n{r['stderr']}", file=sys.stderr)
    if failed:
        return 1
    merged = os.path.join(root, "merged")
    dirs = [r["dir"] for r in sorted(results, key=lambda r: r["index"])]
    return subprocess.run([binary, "merge", *dirs, "--out", merged]).returncode


if __name__ == "__main__":
    sys.exit(main())
