#!/usr/bin/env python3
"""Checks the relative links of the user documentation: every `[text](path#anchor)` in
README.md, docs/*.md and scenarios/README.md must name a file that exists and, with an
anchor, a heading of that file (GitHub's anchor rule: lower case, punctuation other than
`-` and `_` dropped, spaces to `-`). External links (http, https, mailto) are not fetched.
Exit 1 with one line per broken link. Python stdlib only (CI step 05)."""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")


def anchors(path):
    seen = {}
    out = set()
    in_fence = False
    for line in open(path, encoding="utf-8"):
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence or not line.startswith("#"):
            continue
        text = line.lstrip("#").strip().lower()
        slug = re.sub(r"[^\w\- ]", "", text).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def links(path):
    in_fence = False
    for no, line in enumerate(open(path, encoding="utf-8"), 1):
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        # Inline code spans are not links.
        for m in LINK.finditer(re.sub(r"`[^`]*`", "", line)):
            yield no, m.group(1)


def main():
    files = [os.path.join(ROOT, "README.md"), os.path.join(ROOT, "scenarios", "README.md")]
    docs = os.path.join(ROOT, "docs")
    for dirpath, _, names in os.walk(docs):
        files += [os.path.join(dirpath, n) for n in sorted(names) if n.endswith(".md")]
    bad = 0
    for f in files:
        for no, target in links(f):
            if re.match(r"^[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(f), path)) if path else f
            rel = os.path.relpath(f, ROOT)
            if not os.path.exists(dest):
                print(f"{rel}:{no}: {target}: no such file")
                bad += 1
            elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
                print(f"{rel}:{no}: {target}: no heading #{anchor} in {os.path.relpath(dest, ROOT)}")
                bad += 1
    print(f"check_links: {len(files)} files, {bad} broken links")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
