#!/usr/bin/env python3
"""Check the acceptance criteria of issue 4 against a txn-acceptance run.

usage: check_txn.py OUT   (the directory bench/txn-acceptance.sh wrote)
Prints one line per criterion (PASS/FAIL with the measured figure) and
exits 1 if any failed.
"""
import json
import os
import statistics
import sys


def load_rows(path):
    if not os.path.exists(path):
        return None
    return json.load(open(path))["rows"]


def main():
    out = sys.argv[1]
    rows = json.load(open(f"{out}/txn.json"))["rows"]
    by = {(r["workload"], r["threads"]): r for r in rows}
    checks = []

    def row(w, t):
        return by.get((w, t))

    for r in rows:
        if r["workload"] == "update-non-index":
            checks.append((f"fsyncs/commit <= 1.0 at {r['threads']} clients",
                           r["fsyncs_per_commit"] <= 1.0, f"{r['fsyncs_per_commit']:.4f}"))
    u64 = row("update-non-index", 64)
    u16 = row("update-non-index", 16)
    if u64:
        checks.append(("fsyncs/commit <= 0.1 at 64 clients", u64["fsyncs_per_commit"] <= 0.1,
                       f"{u64['fsyncs_per_commit']:.4f}"))
        checks.append(("update-non-index >= 50,000 TPS at 64 clients", u64["tps"] >= 50000,
                       f"{u64['tps']:.0f}"))
    if u16:
        checks.append(("update-non-index >= 30,000 TPS at 16 clients", u16["tps"] >= 30000,
                       f"{u16['tps']:.0f}"))
    p4, p64 = row("point-select", 4), row("point-select", 64)
    pairs = load_rows(f"{out}/point-select-pairs.json")
    if pairs:
        # Interleaved 4/64 runs: compare medians (the sweep's single pair
        # is within the host's noise either way).
        m4 = statistics.median(r["tps"] for r in pairs if r["threads"] == 4)
        m64 = statistics.median(r["tps"] for r in pairs if r["threads"] == 64)
        checks.append(("point-select at 64 clients not slower than at 4 (medians of 5 interleaved pairs)",
                       m64 >= m4, f"{m64:.0f} vs {m4:.0f} ({(m64 / m4 - 1) * 100:+.1f}%)"))
    elif p4 and p64:
        checks.append(("point-select at 64 clients not slower than at 4", p64["tps"] >= p4["tps"],
                       f"{p64['tps']:.0f} vs {p4['tps']:.0f}"))
    failed = 0
    for name, ok, fig in checks:
        print(f"{'PASS' if ok else 'FAIL'}  {name}: {fig}")
        failed += 0 if ok else 1
    print(f"{len(checks) - failed} of {len(checks)} criteria met")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
