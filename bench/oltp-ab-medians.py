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

# "round R NAME: quill SHAPE THREADS tps qps fsync/c p50 p95 p99 cpu csw
#  wbytes log redo data dblw" (the columns of `quill bench oltp`).
LINE = re.compile(
    r"round (\d+) (\S+): quill\s+(\S+)\s+(\d+)\s+(\d+)\s+\S+\s+\S+\s+\S+\s+\S+\s+\S+"
    r"\s+(\S+)\s+\S+\s+\S+\s+\S+\s+(\S+)"
)


def main(path):
    runs = collections.defaultdict(list)
    with open(path) as f:
        for line in f:
            m = LINE.match(line)
            if m:
                key = (m[3], int(m[4]), m[2])
                runs[key].append((int(m[5]), float(m[6]), float(m[7])))
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
