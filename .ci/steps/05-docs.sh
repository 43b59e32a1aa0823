#!/usr/bin/env bash
# The API docs build without warnings (broken intra-doc links, bad HTML in doc comments).
source "$(dirname "$0")/../lib.sh"

RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --lib --locked

# Every relative link and anchor in README.md, docs/ and scenarios/README.md resolves.
python3 scripts/check_links.py
