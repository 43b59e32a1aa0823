#!/usr/bin/env bash
# The API docs build without warnings (broken intra-doc links, bad HTML in doc comments).
set -euo pipefail
cd "$(dirname "$0")/../.."
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --lib --locked
