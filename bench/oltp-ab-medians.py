#!/usr/bin/env python3
"""Medians of an A/B by bench/oltp-ab.sh: for each shape and thread count,
each build's median TPS, CPU per transaction (us) and redo payload per
transaction (bytes) over its rounds.

    python3 bench/oltp-ab-medians.py OUT/ab.txt > OUT/medians.txt
"""
import collections
import re
import statistics
import sys

# "round R NAME: quill SHAPE THREADS tps qps fsync/c [logw/c [hist]] p50 p95 p99
#  cpu csw wbytes log redo data dblw [undo]" (the columns of `quill bench oltp`;
# logw/c since 2026-11-28, then hist, then undo pg/c). Counted from the end,
# so every layout parses: undo pg/c has a decimal point, dblw B/tx never.
# (Until 2026-11-29 the script did not know undo pg/c: medians of runs with
# it read csw/tx as cpu us/tx and data B/tx as redo B/tx; tps was right.)
LINE = re.compile(r"round (\d+) (\S+): quill\s+(.*)$")


def fields(rest):
    """(shape, threads, tps, cpu us/tx, redo B/tx) of one table line."""
    f = rest.split()
    end = -1 if "." in f[-1] else 0
    return f[0], int(f[1]), int(f[2]), float(f[end - 7]), float(f[end - 3])


def main(path):
    runs = collections.defaultdict(list)
    with open(path) as f:
        for line in f:
            m = LINE.match(line)
            if m:
                shape, threads, tps, cpu, redo = fields(m[3])
                runs[(shape, threads, m[2])].append((tps, cpu, redo))
    builds = sorted({k[2] for k in runs})
    for shape, threads in sorted({(s, t) for s, t, _ in runs}):
        row = [f"{shape:17} {threads:3}"]
        for b in builds:
            v = runs.get((shape, threads, b), [])
            if v:
                tps = statistics.median(x[0] for x in v)
                cpu = statistics.median(x[1] for x in v)
                redo = statistics.median(x[2] for x in v)
                row.append(f"{b}: tps {tps:7.0f} cpu {cpu:6.1f} redo {redo:5.0f} (n={len(v)})")
        print("  ".join(row))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
