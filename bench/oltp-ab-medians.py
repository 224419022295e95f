#!/usr/bin/env python3
"""Medians of an A/B by bench/oltp-ab.sh: for each shape and thread count,
each build's median TPS, CPU per transaction (us) and redo payload per
transaction (bytes) over its rounds, read from the JSON each round wrote
(OUT/NAME-ROUND.json; Quill's rows). When the rounds ran peers too
(ENGINES), a line per peer follows with its median TPS beside each
build and the median of Quill's per-round ratio to it.

    python3 bench/oltp-ab-medians.py OUT > OUT/medians.txt

(Until 2026-12-02 it parsed the table lines of OUT/ab.txt by position; the
JSON does not change when a column is added.)
"""
import collections
import json
import pathlib
import re
import statistics
import sys

NAME = re.compile(r"^(.+)-(\d+)\.json$")


def main(out):
    runs = collections.defaultdict(list)
    # (shape, threads, build, peer) -> [(Quill's TPS, the peer's TPS)] for
    # every round that ran both.
    peers = collections.defaultdict(list)
    for path in sorted(pathlib.Path(out).glob("*.json")):
        m = NAME.match(path.name)
        if not m:
            continue
        rows = load_rows(path)
        quill = {}
        for r in rows:
            if r.get("engine") == "quill":
                quill[(r["shape"], r["threads"])] = r["tps"]
                runs[(r["shape"], r["threads"], m[1])].append(
                    (r["tps"], r["cpu_us_per_op"], r["redo_bytes_per_op"] or 0.0)
                )
        for r in rows:
            e, key = r.get("engine"), (r["shape"], r["threads"])
            if e not in (None, "quill") and key in quill and r["tps"]:
                peers[key + (m[1], e)].append((quill[key], r["tps"]))
    if not runs:
        sys.exit(f"no NAME-ROUND.json results of quill in {out}")
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
        for peer in sorted({k[3] for k in peers if k[:2] == (shape, threads)}):
            row = [f"{'':17} {'':3}"]
            for b in builds:
                v = peers.get((shape, threads, b, peer), [])
                if v:
                    tps = statistics.median(x[1] for x in v)
                    ratio = statistics.median(q / p for q, p in v)
                    row.append(f"{b}: {peer} tps {tps:7.0f}, quill/{peer} {ratio:.3f} (n={len(v)})")
            print("  ".join(row))


def load_rows(path):
    """The result rows of one round's JSON; exits with a message (status 2)
    on a file that is not one."""
    try:
        rows = json.loads(path.read_text()).get("rows", [])
        if all({"shape", "threads", "tps"} <= r.keys() for r in rows):
            return rows
        e = "a row without shape, threads or tps"
    except (OSError, ValueError, AttributeError) as err:
        e = repr(err)
    print(f"{path}: not a round's results of quill bench oltp --json ({e})", file=sys.stderr)
    sys.exit(2)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
