#!/usr/bin/env bash
# Structure rules (issue 21): no import circles, no imports running up a layer, no function
# in src/ over 120 lines, no libc outside src/sys/. Python stdlib only.
set -euo pipefail
cd "$(dirname "$0")/../.."
python3 scripts/arch_check.py
