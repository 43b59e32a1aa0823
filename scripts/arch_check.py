#!/usr/bin/env python3
"""Check spark-bench's structure rules, read from the source (python3 stdlib only).

Usage:  scripts/arch_check.py [--src DIR] [--max-lines N] [--list]

Counts, and exits 1 when any is not zero:

* import circles: between top-level modules, and between the child modules of any one module
  at every depth (`store/merge <-> store/reader`, `report/charts/a <-> report/charts/b`);
  unit-test modules (`mod tests`) are leaves and not counted (they may use their whole crate);
* imports running up a layer (the LAYERS table in `scripts/module_graph.py`, which
  `tests/integration/architecture.rs` mirrors), and simulator <-> client imports;
* functions in `src/` longer than `--max-lines` (default 120), from the `fn` line to the line
  of its closing brace;
* `libc::` outside `src/sys/` (the one module that talks to the operating system).

`--list` prints every offender, not just the counts. The module graph itself is printed by
`scripts/module_graph.py` (never stored: a stored copy goes stale).
"""

import argparse
import os
import re
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import module_graph as mg  # noqa: E402


def circles(crate):
    """Import circles between siblings: at the top level, and among the children of every module."""
    by_parent = defaultdict(dict)  # parent path -> {(a, b): 1}
    for _, src, dst in crate.refs:
        if "tests" in src:
            continue  # a unit-test module is a leaf: it may use anything of its crate
        # The deepest common parent, then the two children of it on each side.
        k = 0
        while k < min(len(src), len(dst)) and src[k] == dst[k]:
            k += 1
        if k >= len(src) or k >= len(dst):
            continue  # a module importing its own ancestor or descendant
        parent = "/".join(src[:k]) or "crate"
        a, b = "/".join(src[:k + 1]), "/".join(dst[:k + 1])
        by_parent[parent][(a, b)] = 1
    found = []
    for parent in sorted(by_parent):
        for c in mg.cycles(by_parent[parent]):
            found.append((parent, c))
    return found


def long_functions(crate_src, max_lines):
    """(file, line, name, lines) of every `fn` with a body longer than `max_lines` lines."""
    out = []
    fn_re = re.compile(r"\bfn\s+(" + mg.WORD + r")")
    for root, _, names in os.walk(crate_src):
        for name in sorted(names):
            if not name.endswith(".rs"):
                continue
            path = os.path.join(root, name)
            rel = os.path.relpath(path, crate_src).replace(os.sep, "/")
            with open(path, encoding="utf-8") as f:
                text = mg.strip(f.read())
            for m in fn_re.finditer(text):
                # The body starts at the first `{` after the signature; a `;` first means a
                # declaration without a body (a trait method, an extern fn).
                i = m.end()
                paren = 0
                while i < len(text):
                    ch = text[i]
                    if ch in "(<[":
                        paren += 1
                    elif ch in ")>]":
                        paren = max(0, paren - 1) if ch != ">" or text[i - 1] != "-" else paren
                    elif ch == ";" and paren == 0:
                        i = -1
                        break
                    elif ch == "{" and paren == 0:
                        break
                    i += 1
                if i < 0 or i >= len(text):
                    continue
                depth, j = 0, i
                while j < len(text):
                    if text[j] == "{":
                        depth += 1
                    elif text[j] == "}":
                        depth -= 1
                        if depth == 0:
                            break
                    j += 1
                first = text.count("\n", 0, m.start()) + 1
                last = text.count("\n", 0, j) + 1
                if last - first + 1 > max_lines:
                    out.append((rel, first, m.group(1), last - first + 1))
    return out


def libc_outside_sys(crate):
    return sorted(
        (rel, len(re.findall(r"\blibc::", text)))
        for rel, text in crate.files.items()
        if not rel.startswith("sys/") and re.search(r"\blibc::", text)
    )


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", default=os.path.join(here, "..", "src"))
    ap.add_argument("--max-lines", type=int, default=120)
    ap.add_argument("--list", action="store_true", help="print every offender")
    args = ap.parse_args()
    crate = mg.Crate(args.src)

    circ = circles(crate)
    up = mg.upward(crate.edges(1))
    longs = long_functions(args.src, args.max_lines)
    libc = libc_outside_sys(crate)

    rows = [
        ("import circles", len(circ)),
        ("imports running up a layer", len(up)),
        (f"functions over {args.max_lines} lines", len(longs)),
        ("files calling libc outside src/sys/", len(libc)),
    ]
    print(f"# structure of {len(crate.files)} files under src/")
    for what, n in rows:
        print(f"{n:5d}  {what}")
    if args.list or any(n for _, n in rows):
        for parent, c in circ:
            print(f"circle in {parent}: " + " <-> ".join(c))
        for a, b, n, f, why in up:
            print(f"upward: {a} -> {b} refs={n} files={f} ({why})")
        for rel, line, name, n in sorted(longs, key=lambda x: -x[3]):
            print(f"long fn: src/{rel}:{line} {name} ({n} lines)")
        for rel, n in libc:
            print(f"libc: src/{rel} ({n} calls)")
    return 1 if any(n for _, n in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
