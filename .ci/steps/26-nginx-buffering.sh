#!/usr/bin/env bash
# Buffering detection against a real reverse proxy: Debian's nginx (nginx-light) in front of
# the embedded simulator, started by the ignored `nginx_*` integration tests themselves (each
# writes its own config into a temp dir: no daemon, no master process, a free port). With
# `proxy_buffering on` the run must flag the cell and name it in its warning; with `off` it
# must not. Each test runs three spark-bench runs. Bounded: the tests time out.
source "$(dirname "$0")/../lib.sh"

need_command nginx nginx-light
nginx -v 2>&1

timeout 600 cargo test --locked --test integration nginx -- --ignored --test-threads 1 --nocapture
