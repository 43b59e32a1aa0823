#!/usr/bin/env python3
"""Stand-in for GNU `time -v` where it is not installed (a bare machine, a container).

    scripts/rusage.py [-o FILE] COMMAND [ARG...]

Runs COMMAND, waits for it, and writes the four lines of `time -v` that the benchmark scripts
read (user and system CPU seconds, peak resident set size of the child, wall time) to FILE,
or to stderr. Exits with COMMAND's status. The CPU and the peak are the kernel's rusage of the
one child (RUSAGE_CHILDREN), as GNU time reports them.
"""
import resource
import subprocess
import sys
import time


def main(argv):
    out = None
    if argv[:1] == ["-o"]:
        out, argv = argv[1], argv[2:]
    if not argv:
        sys.exit(__doc__)
    t0 = time.monotonic()
    rc = subprocess.call(argv)
    wall = time.monotonic() - t0
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    text = (
        f"\tUser time (seconds): {r.ru_utime:.2f}\n"
        f"\tSystem time (seconds): {r.ru_stime:.2f}\n"
        f"\tElapsed (wall clock) time (h:mm:ss or m:ss): {int(wall // 60)}:{wall % 60:05.2f}\n"
        f"\tMaximum resident set size (kbytes): {r.ru_maxrss}\n"
    )
    if out:
        with open(out, "w") as f:
            f.write(text)
    else:
        sys.stderr.write(text)
    return rc if rc >= 0 else 128 - rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
