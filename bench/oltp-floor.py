#!/usr/bin/env python3
r"""How far each engine's 1-thread write transactions sit above the floor a
durable commit has on the host of a run.

The floor is the median time to make one aligned 4 KiB write durable, by
the fastest of the methods `quill bench fsync` measured just before and
just after the run (the lower of the two): with one client there is nobody
to share a sync with, so no engine that acknowledges a commit only once it
is durable can commit faster than that, on average, in the same minutes.
For each write shape at 1 thread the script prints each engine's mean
transaction time (1e6 / TPS) and its excess over the floor, Quill's ratio
to the best peer, and the *ceiling*: the best peer's time over the floor,
the ratio Quill would reach if its transactions cost nothing but their
durable write.

    python3 bench/oltp-floor.py DIR [DIR ...]

A DIR holds `oltp.json` (from `quill bench oltp --json`, all three
engines or Quill and SQLite) with `fsync-before.json` and
`fsync-after.json` (from `quill bench fsync --json`), as
bench/oltp-acceptance.sh writes them; or rounds `oltp-N.json` with
`fsync-N-before.json` and `fsync-N-after.json`. Exits 2 on unusable input.
"""
import json
import pathlib
import re
import signal
import sys

WRITE_SHAPES = ["write-only", "update-index", "update-non-index", "insert", "delete"]
ROUND = re.compile(r"^oltp(-\d+)?\.json$")


def fail(msg):
    print(msg, file=sys.stderr)
    sys.exit(2)


def read_json(path):
    try:
        return json.loads(path.read_text())["rows"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        fail(f"{path}: not a `quill bench --json` result ({e})")


def floor_us(path):
    """The fastest method's median in one `quill bench fsync` result."""
    rows = [r for r in read_json(path) if r.get("p50_us")]
    if not rows:
        fail(f"{path}: no measured sync method")
    best = min(rows, key=lambda r: r["p50_us"])
    how = f"{best['preparation']} + {best['method']}" + ("" if best["direct"] else ", buffered")
    return best["p50_us"], how


def report(oltp):
    suffix = ROUND.match(oltp.name)[1] or ""
    floors = [floor_us(oltp.with_name(f"fsync{suffix}-{w}.json")) for w in ("before", "after")]
    floor, how = min(floors)
    print(f"{oltp}: floor {floor:.1f} us ({how}; before {floors[0][0]:.1f}, after {floors[1][0]:.1f})")
    rows = read_json(oltp)
    mean = {(r["engine"], r["shape"]): 1e6 / r["tps"]
            for r in rows if r["threads"] == 1 and r["tps"] > 0}
    engines = sorted({e for e, _ in mean}, key=lambda e: (e != "quill", e))
    for shape in WRITE_SHAPES:
        if ("quill", shape) not in mean:
            continue
        peers = [mean[(e, shape)] for e in engines if e != "quill" and (e, shape) in mean]
        cells = "  ".join(f"{e} {mean[(e, shape)]:6.1f} (+{mean[(e, shape)] - floor:5.1f})"
                          for e in engines if (e, shape) in mean)
        line = f"  {shape:17} {cells}"
        if peers:
            best = min(peers)
            line += f"  ratio {best / mean[('quill', shape)]:.2f}  ceiling {best / floor:.2f}"
        print(line)


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    for d in argv[1:]:
        found = sorted(p for p in pathlib.Path(d).glob("oltp*.json") if ROUND.match(p.name))
        if not found:
            fail(f"{d}: no oltp.json or oltp-N.json")
        for oltp in found:
            report(oltp)
    print("(mean us per transaction at 1 thread, and in brackets its excess over the floor)")
    return 0


if __name__ == "__main__":
    # Output piped into `head` ends quietly, as other command-line tools do.
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(main(sys.argv))
