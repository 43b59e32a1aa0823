#!/usr/bin/env python3
"""Print spark-bench's module import graph, read from the source (python3 stdlib only).

Usage:  scripts/module_graph.py [--src DIR] [--dot] [--level 1|2]

Reads every `src/**/*.rs`, strips comments and string literals, follows `mod` declarations
(files and inline blocks) to learn the module tree, and resolves every path that starts with
`crate::`, `super::` or `self::` (in `use` trees and inline in code) to the module it names.
It prints:

* the edges between top-level modules (`a -> b  refs=N files=M`, where a reference is one
  path naming an item of `b` and `files` counts the files of `a` that hold one),
* the import cycles between top-level modules, and between the sibling modules of one
  top-level module (e.g. `sim/http <-> sim/chat`),
* every file outside `src/clock/` that reads the clock (`Instant::now`, `SystemTime::now`,
  `clock_gettime`),
* every upward import: an edge from a module to one in a higher layer of LAYERS below, and
  every import by the simulator of client code (the simulator may import only SIM_MAY_USE).

`--dot` prints the top-level graph in Graphviz format instead; `--level 2` adds the edges
between the modules one level down. `tests/integration/architecture.rs` checks the same
rules in Rust (keep the two layer tables alike).
"""

import argparse
import os
import re
import sys
from collections import defaultdict

# The intended data flow, bottom first. A module may import its own layer and lower ones.
# Modules that do not exist (yet) are ignored. `sys` (the C library's calls) sits below
# everything and imports nothing of ours. `clock` shares its layer with `priority` (the
# thread scheduling its timer relies on) and `provenance` (a run's counts of how its stamps
# were taken); `cli` (the clap argument types) sits with the `commands` that read them.
LAYERS = [
    ["sys"],
    ["vocab"],
    ["clock", "priority", "provenance"],
    ["scenario", "units", "rng", "tls", "link"],
    ["plan"],
    ["transport"],
    ["backend"],
    ["driver"],
    ["recorder"],
    ["store"],
    ["report", "progress"],
    ["compare"],
    ["runner", "capture"],
    ["commands", "cli"],
    ["lib", "main"],
]
# The simulator stands beside the client: it imports nothing of the client.
SIM = "sim"
SIM_MAY_USE = {"sys", "vocab", "clock", "tls", "units", "rng", "link", "priority"}
# Who may start the simulator.
# (`capture`, the recording proxy, starts none: it counts tokens by the simulator's rule.)
SIM_USERS = {"runner", "capture", "commands", "lib", "main"}

# Reading the clock: only `src/clock/` may do it (`src/sys/` holds the raw calls it makes,
# `sys::time`).
CLOCK_READ = re.compile(
    r"\b(Instant::now|SystemTime::now|clock_gettime|sys::time)\b|\.elapsed\(\)")

WORD = r"[A-Za-z_][A-Za-z0-9_]*"


def strip(text):
    """Blank out comments, string literals and char literals, keeping line structure."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            i = j
            continue
        if text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append("\n" * text.count("\n", i, j))
            i = j
            continue
        m = re.match(r'b?r(#*)"', text[i:i + 260])
        if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            end = '"' + m.group(1)
            j = text.find(end, i + m.end())
            j = n if j < 0 else j + len(end)
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
            continue
        if c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j + 1
            continue
        if c == "'":
            m = re.match(r"'(\\.[^']*|[^\\'])'", text[i:i + 16])
            if m:
                out.append("' '")
                i += m.end()
                continue
        out.append(c)
        i += 1
    return "".join(out)


def file_module(rel):
    """`sim/http.rs` -> ['sim', 'http']; `lib.rs` -> []; `main.rs` -> ['main']."""
    parts = rel[:-3].split("/")
    if parts == ["lib"]:
        return []
    if parts[-1] == "mod":
        parts = parts[:-1]
    return parts


def expand_use(tree):
    """`a::{b, c::{d, e}}` -> ['a::b', 'a::c::d', 'a::c::e'] (aliases and globs dropped)."""
    tree = re.sub(r"\s+", "", tree)
    i = tree.find("{")
    if i < 0:
        return [re.sub(r"as\w+$", "", tree.replace("::*", ""))] if tree else []
    prefix, body = tree[:i], tree[i + 1:tree.rfind("}")]
    items, depth, cur = [], 0, ""
    for ch in body:
        if ch == "," and depth == 0:
            items.append(cur)
            cur = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur += ch
    items.append(cur)
    paths = []
    for it in items:
        for p in expand_use(it):
            paths.append(prefix + p if p != "self" else prefix.rstrip(":"))
    return [p.rstrip(":") for p in paths if p]


class Crate:
    def __init__(self, src):
        self.src = src
        self.files = {}  # rel path -> stripped text
        for root, _, names in os.walk(src):
            for name in names:
                if name.endswith(".rs"):
                    path = os.path.join(root, name)
                    rel = os.path.relpath(path, src).replace(os.sep, "/")
                    with open(path, encoding="utf-8") as f:
                        self.files[rel] = strip(f.read())
        self.modules = set()
        for rel in self.files:
            mod = file_module(rel)
            for k in range(1, len(mod) + 1):
                self.modules.add(tuple(mod[:k]))
        # (file, module path of the reference site, resolved target module path)
        self.refs = []
        for rel, text in sorted(self.files.items()):
            self.scan(rel, text)

    def scan(self, rel, text):
        base = file_module(rel)
        # Inline `mod x {` blocks: track brace depth to know the module of each position.
        stack = []  # (brace depth at which the block closes, name)
        depth = 0
        inline = re.compile(r"\bmod\s+(" + WORD + r")\s*\{")
        marks = {m.start(): m.group(1) for m in inline.finditer(text)}
        mod_at = []  # (offset, module path) change points
        pending = None
        for i, ch in enumerate(text):
            if i in marks:
                pending = marks[i]
            if ch == "{":
                depth += 1
                if pending is not None:
                    stack.append((depth, pending))
                    self.modules.add(tuple(base + [s[1] for s in stack]))
                    mod_at.append((i, base + [s[1] for s in stack]))
                    pending = None
            elif ch == "}":
                if stack and stack[-1][0] == depth:
                    stack.pop()
                    mod_at.append((i, base + [s[1] for s in stack]))
                depth -= 1

        def module_at(off):
            cur = base
            for o, m in mod_at:
                if o > off:
                    break
                cur = m
            return cur

        for m in re.finditer(r"\buse\s+([^;]*);", text):
            for p in expand_use(m.group(1)):
                self.add(rel, module_at(m.start()), p)
        use_spans = [(m.start(), m.end()) for m in re.finditer(r"\buse\s+[^;]*;", text)]
        path_re = re.compile(r"(?<![\w:])((?:crate|super|self)(?:::" + WORD + r")+)")
        for m in path_re.finditer(text):
            if any(a <= m.start() < b for a, b in use_spans):
                continue
            self.add(rel, module_at(m.start()), m.group(1))

    def add(self, rel, here, path):
        segs = path.split("::")
        if segs[0] == "crate":
            target, rest = [], segs[1:]
        elif segs[0] in ("super", "self"):
            target = list(here)
            rest = segs
            while rest and rest[0] in ("super", "self"):
                if rest[0] == "super":
                    target = target[:-1]
                rest = rest[1:]
        else:
            return  # an external crate or a local name
        # The longest prefix that is a module of ours.
        full = target + rest
        k = len(target)
        while k < len(full) and tuple(full[:k + 1]) in self.modules:
            k += 1
        resolved = full[:k]
        if not resolved:
            return  # an item of the crate root (macros, lib.rs items)
        self.refs.append((rel, tuple(file_module(rel)) or ("lib",), tuple(resolved)))

    def edges(self, level):
        """{(from, to): (refs, files)} between module paths cut to `level` segments."""
        counts = defaultdict(int)
        files = defaultdict(set)
        for rel, src_mod, dst in self.refs:
            a, b = "/".join(src_mod[:level]), "/".join(dst[:level])
            if level > 1 and src_mod[0] != dst[0]:
                continue  # level-2 edges only inside one top-level module
            if a == b or len(src_mod) < level and level > 1 or len(dst) < level and level > 1:
                continue
            counts[(a, b)] += 1
            files[(a, b)].add(rel)
        return {e: (counts[e], len(files[e])) for e in counts}


def cycles(edges):
    """Strongly connected components with more than one node (Tarjan)."""
    graph = defaultdict(set)
    for a, b in edges:
        graph[a].add(b)
        graph[b]
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def rank(module):
    for i, layer in enumerate(LAYERS):
        if module in layer:
            return i
    return None


def upward(edges):
    """Edges that go against LAYERS, and simulator imports of client code."""
    bad = []
    for (a, b), (n, f) in sorted(edges.items()):
        if a == SIM:
            if b not in SIM_MAY_USE:
                bad.append((a, b, n, f, "the simulator imports client code"))
            continue
        if b == SIM:
            if a not in SIM_USERS:
                bad.append((a, b, n, f, "client code imports the simulator"))
            continue
        ra, rb = rank(a), rank(b)
        if ra is None or rb is None:
            bad.append((a, b, n, f, "module not in the layer table"))
        elif rb > ra:
            bad.append((a, b, n, f, f"layer {ra} imports layer {rb}"))
    return bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--src", default=os.path.join(here, "..", "src"))
    ap.add_argument("--dot", action="store_true", help="print Graphviz dot")
    ap.add_argument("--level", type=int, default=1, choices=(1, 2))
    args = ap.parse_args()
    crate = Crate(args.src)
    top = crate.edges(1)
    if args.dot:
        print("digraph modules {\n  rankdir=BT;")
        for (a, b), (n, _) in sorted(top.items()):
            print(f'  "{a}" -> "{b}" [label="{n}"];')
        print("}")
        return
    lines = sum(t.count("\n") for t in crate.files.values())
    print(f"# module graph of {len(crate.files)} files under src/")
    print("# layers, bottom first: " + " < ".join("/".join(layer) for layer in LAYERS))
    print()
    print("## edges between top-level modules (refs = paths naming the target, files = importing files)")
    for (a, b), (n, f) in sorted(top.items()):
        print(f"{a} -> {b}  refs={n} files={f}")
    sub = crate.edges(2)
    if args.level == 2:
        print()
        print("## edges between modules inside one top-level module")
        for (a, b), (n, f) in sorted(sub.items()):
            print(f"{a} -> {b}  refs={n} files={f}")
    print()
    cyc_top, cyc_sub = cycles(top), cycles(sub)
    print(f"## import cycles: {len(cyc_top)} between top-level modules, "
          f"{len(cyc_sub)} between sibling modules")
    for c in cyc_top + cyc_sub:
        print(" <-> ".join(c))
    print()
    bad = upward(top)
    print(f"## upward imports: {len(bad)} edges, {sum(x[2] for x in bad)} refs")
    for a, b, n, f, why in bad:
        print(f"{a} -> {b}  refs={n} files={f}  ({why})")
    for a, b, n, f, why in bad:
        users = sorted({rel for rel, s, d in crate.refs
                        if "/".join(s[:1]) == a and "/".join(d[:1]) == b})
        print(f"  {a} -> {b}: " + ", ".join(users))
    print()
    readers = sorted(rel for rel, text in crate.files.items()
                     if not rel.startswith(("clock/", "sys/")) and CLOCK_READ.search(text))
    print(f"## files outside clock/ that read the clock: {len(readers)}")
    for rel in readers:
        print(rel)
    print()
    print(f"# {lines} lines in src/")


if __name__ == "__main__":
    main()
