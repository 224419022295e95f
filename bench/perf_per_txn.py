#!/usr/bin/env python3
"""Per-transaction CPU of two `perf record` profiles of the server, side
by side: microseconds per transaction in the kernel, in quill's own code
and in libc, then the symbols whose cost grew most from A to B.

Record each profile over a known number of transactions, e.g. 12 s of a
sysbench or pgbench run at a known TPS, sampling at 2 kHz:

    perf record -e cpu-clock -F 2000 -g -p SERVER_PID -o A.data -- sleep 12
    bench/perf_per_txn.py A.data TXNS_A B.data TXNS_B [--hz 2000] [--top 40]
"""

import argparse
import subprocess


def load(path, txns, hz):
    out = subprocess.run(
        ["perf", "report", "-i", path, "--no-children", "--stdio", "-q", "-g", "none",
         "--sort", "dso,sym", "-F", "sample,dso,sym"],
        capture_output=True, text=True, check=True,
    ).stdout
    us_per_sample = 1e6 / hz
    costs = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 3 or not parts[0].isdigit():
            continue
        key = parts[1][:20] + " " + " ".join(parts[3:])[:90]
        costs[key] = costs.get(key, 0.0) + int(parts[0]) * us_per_sample / txns
    return costs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a")
    ap.add_argument("txns_a", type=float)
    ap.add_argument("b")
    ap.add_argument("txns_b", type=float)
    ap.add_argument("--hz", type=float, default=2000, help="perf's sampling rate (-F)")
    ap.add_argument("--top", type=int, default=40)
    args = ap.parse_args()
    a = load(args.a, args.txns_a, args.hz)
    b = load(args.b, args.txns_b, args.hz)
    print(f"total us/txn: {sum(a.values()):.1f} -> {sum(b.values()):.1f}")
    for group in ["[kernel", "quill", "libc"]:
        ga = sum(v for k, v in a.items() if k.startswith(group))
        gb = sum(v for k, v in b.items() if k.startswith(group))
        print(f"{group.strip('['):8} {ga:6.1f} -> {gb:6.1f}")
    keys = sorted(set(a) | set(b), key=lambda k: -(b.get(k, 0) - a.get(k, 0)))
    for k in keys[:args.top]:
        print(f"{a.get(k, 0):6.2f} {b.get(k, 0):6.2f} {b.get(k, 0) - a.get(k, 0):+6.2f} {k}")


if __name__ == "__main__":
    try:
        main()
    except BrokenPipeError:
        pass
