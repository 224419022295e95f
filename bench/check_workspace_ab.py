#!/usr/bin/env python3
"""Medians and new/base ratios of the runs bench/workspace-ab.sh made.

usage: check_workspace_ab.py OUT_DIR [--min-ratio R]
Prints one line per (shape, threads): base and new TPS medians, their
ratio, and p95 latency; exits 1 if a ratio is below --min-ratio (default:
report only)."""
import glob
import json
import statistics
import sys


def load(out, name):
    runs = {}
    for path in sorted(glob.glob(f"{out}/{name}-oltp-r*.json")):
        with open(path) as f:
            for row in json.load(f)["rows"]:
                runs.setdefault((row["shape"], row["threads"]), []).append(row)
    return runs


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    min_ratio = None
    if "--min-ratio" in sys.argv:
        min_ratio = float(sys.argv[sys.argv.index("--min-ratio") + 1])
    base, new = load(out, "base"), load(out, "new")
    if not base or not new:
        sys.exit(f"no runs in {out}")
    print(f"{'shape':18} {'thr':>4} {'base tps':>10} {'new tps':>10} {'new/base':>8} "
          f"{'base p95':>9} {'new p95':>9} runs")
    worst = None
    for key in sorted(base, key=lambda k: (k[0], k[1])):
        if key not in new:
            continue
        b = statistics.median(r["tps"] for r in base[key])
        n = statistics.median(r["tps"] for r in new[key])
        bp = statistics.median(r["p95_us"] for r in base[key])
        np_ = statistics.median(r["p95_us"] for r in new[key])
        ratio = n / b if b else float("nan")
        worst = ratio if worst is None else min(worst, ratio)
        print(f"{key[0]:18} {key[1]:>4} {b:>10.0f} {n:>10.0f} {ratio:>8.3f} "
              f"{bp:>9.0f} {np_:>9.0f} {len(base[key])}+{len(new[key])}")
    print(f"lowest new/base ratio: {worst:.3f}")
    if min_ratio is not None and worst < min_ratio:
        sys.exit(1)


if __name__ == "__main__":
    main()
