#!/usr/bin/env python3
r"""The margins table of bench/results/oltp.md, built from the runs' JSON.

For each write shape and thread count: Quill's, SQLite's and RocksDB's TPS
in the last run given, Quill's ratio to the best peer there, the margin of
the run of record (run 4), the ratio in every run given (in the order
given, so give them oldest first), their median (of an even number, the
mean of the middle two), and whether that median meets run 4's margin as
the tables print it (rounded to two places). Read-only and read-write at
1 thread are checked against SQLite: the median, unrounded, >= 1.2x.

    python3 bench/oltp-margins.py RUN4_DIR DIR [DIR ...]
    e.g. python3 bench/oltp-margins.py bench/results/oltp-20261126 \
        bench/results/oltp-20261202d bench/results/oltp-20261202e \
        bench/results/oltp-20261203a bench/results/oltp-20261203b \
        bench/results/oltp-20261203c

Each DIR holds an `oltp.json` from `quill bench oltp --json` with all three
engines. Prints a Markdown table and a summary line; exits 1 when a median
is below its margin (so a script can check the acceptance), 2 on unusable
input.
"""
import json
import signal
import statistics
import sys

WRITE_SHAPES = ["write-only", "update-index", "update-non-index", "insert", "delete"]
READ_SHAPES = ["read-only", "read-write"]
PEERS = ["sqlite", "rocksdb"]
READ_GOAL = 1.2


def fail(msg):
    print(msg, file=sys.stderr)
    sys.exit(2)


def load(d):
    try:
        with open(f"{d}/oltp.json") as f:
            rows = json.load(f)["rows"]
        return {(r["engine"], r["shape"], r["threads"]): r["tps"] for r in rows}
    except (OSError, ValueError, KeyError, TypeError) as e:
        fail(f"{d}/oltp.json: not a `quill bench oltp --json` result ({e})")


def tps(run, engine, shape, threads):
    v = run.get((engine, shape, threads))
    if v is None or v <= 0:
        fail(f"a run given has no {engine} figure for {shape} at {threads} threads")
    return v


def ratio(run, shape, threads, peers=PEERS):
    return tps(run, "quill", shape, threads) / max(tps(run, p, shape, threads) for p in peers)


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    base = load(argv[1])
    runs = [load(d) for d in argv[2:]]
    last = runs[-1]
    threads = sorted({t for (_, s, t) in last if s in WRITE_SHAPES})
    print("| shape | threads | Quill | SQLite | RocksDB | Quill / best peer | run 4 "
          f"| last {len(runs)} runs | median | |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | --- |")
    met = total = 0
    below = []
    for shape in WRITE_SHAPES:
        for t in threads:
            goal = ratio(base, shape, t)
            hist = [ratio(r, shape, t) for r in runs]
            med = statistics.median(hist)
            ok = med >= round(goal, 2)
            total += 1
            met += ok
            if not ok:
                below.append(f"{shape} {t} ({med:.2f} < {goal:.2f})")
            rates = [tps(last, e, shape, t) for e in ["quill"] + PEERS]
            print(f"| {shape} | {t} | " + " | ".join(f"{x:,.0f}" for x in rates)
                  + f" | {hist[-1]:.2f} | {goal:.2f} | "
                  + " / ".join(f"{h:.2f}" for h in hist)
                  + f" | {med:.2f} | {'met' if ok else '**below**'} |")
    for shape in READ_SHAPES:
        hist = [ratio(r, shape, 1, ["sqlite"]) for r in runs]
        med = statistics.median(hist)
        ok = med >= READ_GOAL
        total += 1
        met += ok
        if not ok:
            below.append(f"{shape} 1 ({med:.3f} < {READ_GOAL})")
        print(f"\n{shape} at 1 thread against SQLite: "
              + " / ".join(f"{h:.3f}" for h in hist)
              + f", median {med:.3f} (goal {READ_GOAL}): {'met' if ok else 'below'}")
    print(f"\nmedians meeting their margin: {met} of {total}"
          + (f"; below: {', '.join(below)}" if below else ""))
    return 0 if not below else 1


if __name__ == "__main__":
    # Output piped into `head` ends quietly, as other command-line tools do.
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(main(sys.argv))
