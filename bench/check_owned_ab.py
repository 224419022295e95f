#!/usr/bin/env python3
"""Medians and ratios of the runs bench/owned-ab.sh made.

usage: check_owned_ab.py OUT_DIR
One line per (workload, threads): TPS medians of the binary before the
change (base), borrowed and owned transactions, and borrowed/base and
owned/borrowed."""
import glob
import json
import statistics
import sys


def load(out, name):
    runs = {}
    for path in sorted(glob.glob(f"{out}/{name}-r*.json")):
        with open(path) as f:
            for row in json.load(f)["rows"]:
                runs.setdefault((row["workload"], row["threads"]), []).append(row["tps"])
    return runs


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    v = {name: load(out, name) for name in ("base", "borrowed", "owned")}
    if not all(v.values()):
        sys.exit(f"missing runs in {out}")
    print(f"{'workload':18} {'thr':>4} {'base':>9} {'borrowed':>9} {'owned':>9} "
          f"{'borr/base':>9} {'own/borr':>9} runs")
    for key in sorted(v["base"]):
        if not all(key in v[n] for n in v):
            continue
        b, br, o = (statistics.median(v[n][key]) for n in ("base", "borrowed", "owned"))
        print(f"{key[0]:18} {key[1]:>4} {b:>9.0f} {br:>9.0f} {o:>9.0f} "
              f"{br / b:>9.3f} {o / br:>9.3f} {len(v['base'][key])}")


if __name__ == "__main__":
    main()
