# Sourced by scripts/cpu-per-chunk.sh and scripts/instructions-per-chunk.sh: the one-turn
# bench file, the `ext` targets pointing at a separate `serve --profile fast`, and that serve
# process (paced or not). Uses WORK, BIN, PORT; sets SP (serve's pid, for the caller's trap).

# write_bench FILE NAME SESSIONS CONCURRENCY TOKENS
write_bench() {
    cat >"$1" <<EOF
name = "$2"
description = "harness cost: one short turn against a separate serve process"
seed = 1
max_output_tokens = $5

[load]
sessions = $3
concurrency = $4

[matrix]
targets = ["ext"]

[[turns]]
prompt = "Write a Python function that reverses a string."
EOF
}

# write_targets: $WORK/targets-chat-completions.toml and $WORK/targets-responses.toml.
# WS_TIMING=off: the Responses target sets `request_timing = false` (no
# `responsesapi.websocket_timing` event per response; read_floor's `--ws-timing off`).
write_targets() {
    local api timing=""
    [ "${WS_TIMING:-on}" = off ] && timing="request_timing = false"
    for api in chat-completions responses; do
        cat >"$WORK/targets-$api.toml" <<EOF
[targets.ext]
base_url = "http://127.0.0.1:$PORT/v1"
api = "$api"
model = "sim"
hardware = "serve --profile fast"
$([ "$api" = responses ] && echo "$timing")
EOF
    done
}

# start_serve CPU PACE: `serve --profile fast` pinned to CPU; with PACE (tokens/s), every
# stream paced at that rate, one token per chunk, no jitter.
start_serve() {
    local profile_args=(--profile fast)
    if [ -n "$2" ]; then
        cat >"$WORK/paced.toml" <<EOF
decode_tok_s = $2
chunk_tokens = [1.0]
step_jitter = 0.0
EOF
        profile_args+=(--profile-file "$WORK/paced.toml")
    fi
    taskset -c "$1" "$BIN" serve "${profile_args[@]}" --listen "127.0.0.1:$PORT" \
        >"$WORK/serve.log" 2>&1 &
    SP=$!
    for _ in $(seq 50); do
        grep -q "127.0.0.1:$PORT" "$WORK/serve.log" 2>/dev/null && break
        sleep 0.1
    done
    kill -0 "$SP" 2>/dev/null || {
        echo "serve did not start (port $PORT in use?):" >&2
        cat "$WORK/serve.log" >&2
        exit 2
    }
}
