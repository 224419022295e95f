#!/usr/bin/env python3
"""Sum up bench/scan-ab.sh: per build, the median over rounds of Quill's
throughput over the best peer's in the same run, per sysbench shape and
Insert Benchmark step.
    python3 bench/scan-ab-summary.py OUT"""
import glob
import json
import os
import statistics
import sys

out = sys.argv[1]
ratios = {}  # (build, test) -> [ratio per round]
rates = {}  # (build, test, engine) -> [rate per round]


def add(build, test, by_engine):
    quill = by_engine.get("quill")
    peers = [v for e, v in by_engine.items() if e != "quill" and v]
    if quill is None or not peers:
        return
    ratios.setdefault((build, test), []).append(quill / max(peers))
    for e, v in by_engine.items():
        rates.setdefault((build, test, e), []).append(v)


for path in sorted(glob.glob(os.path.join(out, "oltp-*-*.json"))):
    build = os.path.basename(path)[len("oltp-"):].rsplit("-", 1)[0]
    rows = json.load(open(path))["rows"]
    for shape in sorted({r["shape"] for r in rows}):
        add(build, shape, {r["engine"]: r["tps"] for r in rows if r["shape"] == shape})
for path in sorted(glob.glob(os.path.join(out, "insert-*-*.json"))):
    build = os.path.basename(path)[len("insert-"):].rsplit("-", 1)[0]
    rows = json.load(open(path))["rows"]
    for step in sorted({r["step"] for r in rows}):
        def rate(r):
            return r["queries_per_sec"] if step.startswith("q") else r["rows_per_sec"]
        add(build, step, {r["engine"]: rate(r) for r in rows if r["step"] == step})

builds = sorted({b for b, _ in ratios})
tests = sorted({t for _, t in ratios})
print("Quill / best peer, median over rounds (each round: all engines in one run)")
print("test".ljust(14) + "".join(b.rjust(22) for b in builds))
for t in tests:
    cells = []
    for b in builds:
        r = ratios.get((b, t), [])
        cells.append(
            (f"{statistics.median(r):.2f} ({', '.join(f'{x:.2f}' for x in r)})" if r else "-").rjust(22)
        )
    print(t.ljust(14) + "".join(cells))
print()
print("median rate per engine (tps, rows/s or queries/s)")
for t in tests:
    for b in builds:
        parts = []
        for e in ("quill", "sqlite", "rocksdb"):
            v = rates.get((b, t, e))
            if v:
                parts.append(f"{e} {statistics.median(v):,.0f}")
        print(f"{t:14} {b:10} " + ", ".join(parts))
