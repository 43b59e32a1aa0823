# Shared set-up for .ci/steps/*.sh. Every step starts with
#
#   source "$(dirname "$0")/../lib.sh"
#
# which sets `set -euo pipefail`, moves to the repository root and defines:
#
#   venv_with DIR PIN...          a Python venv at DIR with exactly these `name==version` pins
#                                 (pip runs only when one is missing or at another version;
#                                 PIP_TIMEOUT=SECONDS bounds it, default unbounded)
#   pin NAME                      prints NAME's `name==version` line of .ci/py-venv.pins (the
#                                 shared venv target/py-venv), or fails
#   llmsim_bin                    prints the path of llmsim $LLMSIM_VERSION (crates.io):
#                                 $SPARK_BENCH_LLMSIM when that is this version, else
#                                 target/llmsim/bin/llmsim, installed there first if missing
#   free_port                     prints a free TCP port on 127.0.0.1
#   on_exit COMMAND               runs COMMAND (a shell string) when the step exits, after the
#                                 ones registered before it; never fails the step
#   start_bg LOG COMMAND...       starts COMMAND in the background with its output in LOG, sets
#                                 BG_PID, and kills it when the step exits
#   wait_until SECONDS PID CMD... polls CMD every 0.1 s until it succeeds; fails when PID exits
#                                 or SECONDS pass
#   wait_http URL PID SECONDS     waits until URL answers 2xx
#   wait_port PORT PID SECONDS    waits until 127.0.0.1:PORT accepts a connection
#   need_command CMD PACKAGE      installs Debian's PACKAGE when CMD is not on PATH
#   kill_holding DIR              stops every process other than the step's shell with its
#                                 working directory or an open file under DIR (SIGTERM, up
#                                 to 5 s, then SIGKILL): the daemons and jobs of a cluster
#                                 whose logs and outputs the step put in DIR
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

venv_with() {
  local dir=$1
  shift
  if [ ! -x "$dir/bin/python" ]; then
    python3 -m venv "$dir"
  fi
  # Extras (`openai[realtime]`) are part of what pip installs, not of the version check.
  if ! "$dir/bin/python" - "$@" 2>/dev/null <<'EOF'; then
import importlib.metadata as m, re, sys
for pin in sys.argv[1:]:
    name, version = pin.split("==")
    if m.version(re.sub(r"\[.*\]", "", name)) != version:
        sys.exit(1)
EOF
    # `python -m pip`, not bin/pip: a venv whose directory was copied keeps working.
    timeout "${PIP_TIMEOUT:-0}" "$dir/bin/python" -m pip install --quiet --disable-pip-version-check "$@"
  fi
}

pin() {
  local line
  line=$(grep -E "^$1(\\[[^]]*\\])?==" .ci/py-venv.pins) || {
    echo "no pin for $1 in .ci/py-venv.pins" >&2
    return 1
  }
  printf '%s\n' "$line"
}

# The llmsim that steps 20 and 28 run, and that .ci/run installs in the background.
LLMSIM_VERSION="0.6.0"
llmsim_bin() {
  local bin=${SPARK_BENCH_LLMSIM:-target/llmsim/bin/llmsim}
  if ! "$bin" --version 2>/dev/null | grep -q "$LLMSIM_VERSION"; then
    bin=target/llmsim/bin/llmsim
    if ! "$bin" --version 2>/dev/null | grep -q "$LLMSIM_VERSION"; then
      timeout 900 cargo install --quiet --locked llmsim --version "$LLMSIM_VERSION" \
        --root target/llmsim >&2
    fi
  fi
  printf '%s\n' "$bin"
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

_ci_on_exit=()
_ci_run_on_exit() {
  local cmd
  for cmd in "${_ci_on_exit[@]}"; do
    eval "$cmd" 2>/dev/null || true
  done
}
on_exit() {
  _ci_on_exit+=("$1")
  trap _ci_run_on_exit EXIT
}

start_bg() {
  local log=$1
  shift
  "$@" >"$log" 2>&1 &
  BG_PID=$!
  on_exit "kill $BG_PID"
}

wait_until() {
  local secs=$1 pid=$2
  shift 2
  local deadline=$(($(date +%s) + secs))
  while :; do
    if "$@" >/dev/null 2>&1; then return 0; fi
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "process $pid exited while waiting for: $*" >&2
      return 1
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
      echo "not ready after ${secs}s: $*" >&2
      return 1
    fi
    sleep 0.1
  done
}

wait_http() {
  wait_until "$3" "$2" curl -fsS -o /dev/null "$1"
}

wait_port() {
  wait_until "$3" "$2" python3 -c \
    'import socket, sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 0.2)' "$1"
}

need_command() {
  if ! command -v "$1" >/dev/null 2>&1; then
    echo "installing Debian's $2"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "$2" >/dev/null
  fi
}

_holding() {
  find /proc/[0-9]*/cwd /proc/[0-9]*/fd/ -maxdepth 1 \( -lname "$1/*" -o -lname "$1" \) \
    2>/dev/null | cut -d/ -f3 | sort -u | grep -vx "$$" || true
}
kill_holding() {
  local dir=$1 sig pid hit alive state deadline
  # Only an absolute directory below / (an empty or relative one would match everything or
  # nothing).
  case "$dir" in
    /?*) ;;
    *) echo "kill_holding: '$dir' is not an absolute directory below /" >&2; return 1 ;;
  esac
  dir=${dir%/}
  for sig in TERM KILL; do
    hit=$(_holding "$dir")
    [ -n "$hit" ] || return 0
    # shellcheck disable=SC2086
    kill -s "$sig" $hit 2>/dev/null || true
    [ "$sig" = TERM ] || return 0
    # Up to 5 s for all of them to exit (a zombie has exited: its parent may not be us).
    deadline=$((SECONDS + 5))
    while [ "$SECONDS" -lt "$deadline" ]; do
      alive=""
      for pid in $hit; do
        state=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1)
        if [ -n "$state" ] && [ "$state" != Z ]; then alive+=" $pid"; fi
      done
      [ -n "$alive" ] || return 0
      sleep 0.1
    done
  done
}
