#!/usr/bin/env python3
"""Medians of the interleaved A/B rounds of reliability-ab.sh, and the
ratio new / base per row: commits/s and CPU per commit of the commit
benchmark, TPS and CPU per transaction of the txn benchmark. Prints a
markdown table; exit status 0."""
import glob
import json
import os
import statistics
import sys

out = sys.argv[1]


def rows(kind, name):
    per = {}
    for f in sorted(glob.glob(os.path.join(out, f"{name}-{kind}-r*.json"))):
        d = json.load(open(f))
        for r in d["rows"]:
            if kind == "commit":
                key = f"commit {r['clients']} clients"
                per.setdefault(key, []).append((r["commits_per_s"], r["cpu_us_per_commit"]))
            else:
                key = f"txn {r['workload']} {r['threads']} threads"
                per.setdefault(key, []).append((r["tps"], r["cpu_us_per_txn"]))
    return per


print("| row | base (median) | new (median) | new/base | base CPU us | new CPU us | rounds |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
for kind in ["commit", "txn"]:
    base, new = rows(kind, "base"), rows(kind, "new")
    for key in base:
        if key not in new:
            continue
        b = statistics.median(x for x, _ in base[key])
        n = statistics.median(x for x, _ in new[key])
        bc = statistics.median(c for _, c in base[key])
        nc = statistics.median(c for _, c in new[key])
        print(f"| {key} | {b:,.0f} | {n:,.0f} | {n / b:.3f} | {bc:.1f} | {nc:.1f} | {min(len(base[key]), len(new[key]))} |")
