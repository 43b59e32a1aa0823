#!/usr/bin/env bash
# 20,000 concurrent WebSocket sessions from 4 shards against the simulator on this machine
# (deploy/local/ws-20k.sh): merged with 0 failed requests, the kernel counting 20,000
# established connections on the server port at once, no accept failure on the server side.
# Uses the debug binary `cargo test` built (deps optimised). Cost: ~75 s on a loaded
# 2-core host; ~1.3 GB of memory at the peak (4 shards, 2 simulator processes).
source "$(dirname "$0")/../lib.sh"

need_command ss iproute2
timeout 600 cargo build --quiet --locked --bin spark-bench
BIN=target/debug/spark-bench timeout 300 bash deploy/local/ws-20k.sh target/ci-ws-20k
rm -rf target/ci-ws-20k
