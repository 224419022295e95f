#!/usr/bin/env python3
"""Summarise bench/serve-perfstat.sh's output directory: per transaction,
the server's CPU (perf's task-clock, and user/system time from /proc),
sysbench's CPU, the host's idle and stolen CPUs (averaged over the window), context switches, wakeups and each counted syscall. Prints a table and
writes summary.json beside the runs."""
import glob
import json
import os
import re
import sys


def main(out):
    rows = []
    for perf in sorted(glob.glob(os.path.join(out, "run-*.perf.txt"))):
        k, n = re.search(r"run-(\d+)-(\d+)\.perf\.txt$", perf).groups()
        base = perf[: -len(".perf.txt")]
        sb = open(base + ".sysbench.txt").read()
        m = re.search(r"transactions:\s*\d+\s*\(([\d.]+)", sb)
        if not m:
            print(f"{base}: sysbench reported no transactions", file=sys.stderr)
            continue
        tps = float(m.group(1))
        text = open(perf).read()
        elapsed = float(re.search(r"([\d.]+) seconds time elapsed", text).group(1))
        counts = {}
        for c in re.finditer(r"^\s*([\d,.]+)\s+(?:msec\s+)?(\S+)", text, re.M):
            counts[c.group(2)] = float(c.group(1).replace(",", ""))
        u0, s0, u1, s1, hz = map(int, open(base + ".cpu.txt").read().split())
        txns = tps * elapsed
        row = {"run": int(k), "threads": int(n), "tps": tps,
               "cpu_us": round(counts["task-clock"] * 1000 / txns, 1),
               "user_us": round((u1 - u0) * 1e6 / hz / txns, 1),
               "sys_us": round((s1 - s0) * 1e6 / hz / txns, 1)}
        host = base + ".host.txt"
        if os.path.exists(host):
            cu0, cs0, cu1, cs1, i0, st0, i1, st1 = map(int, open(host).read().split())
            row["client_us"] = round((cu1 - cu0 + cs1 - cs0) * 1e6 / hz / txns, 1)
            row["idle_cpus"] = round((i1 - i0) / hz / elapsed, 2)
            row["steal_cpus"] = round((st1 - st0) / hz / elapsed, 2)
        for name, v in counts.items():
            if name not in ("task-clock", "seconds"):
                row[name.split(":")[-1].replace("sys_enter_", "")] = round(v / txns, 3)
        rows.append(row)
    if not rows:
        sys.exit("no runs found")
    keys = list(rows[0])
    print(" | ".join(keys))
    for r in rows:
        print(" | ".join(str(r.get(k, "")) for k in keys))
    json.dump(rows, open(os.path.join(out, "summary.json"), "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
