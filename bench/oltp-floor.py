#!/usr/bin/env python3
r"""How far each engine's 1-thread write transactions sit above the floor a
durable commit has on the host of a run.

The floor is the mean time to make one aligned 4 KiB write durable, by
the fastest of the methods `quill bench fsync` measured (the lowest mean),
averaged over the measurement just before the run and the one just after
(on a shared host the two can differ by 20 us): with one client there is
nobody to share a sync with, so an engine that acknowledges a commit only
once it is durable waits about that long per commit in the same minutes.
An estimate, not a bound: it is measured beside the run, not inside it,
and with a 4 KiB write where an engine may write more.

For each write shape at 1 thread the script prints each engine's mean
transaction time (1e6 / TPS) and its excess over the floor, Quill's ratio
to the best peer, and the *ceiling*: the best peer's time over the floor,
the ratio Quill would reach if its transactions cost nothing but their
durable write. Where the result records it (`user_cpu_us_per_op`, absent
from older results), each engine's user-mode CPU per transaction follows
its excess: the code's own work, harness and background threads included,
without the kernel's I/O, scheduling and wake-ups. A `quill bench commit
--json` result of one client beside its floors (`commit-N.json`) is read
the same way: the log's own append and commit, with no transaction around
them.

    python3 bench/oltp-floor.py DIR [DIR ...]

A DIR holds `oltp.json` (from `quill bench oltp --json`, all three
engines or Quill and SQLite) with `fsync-before.json` and
`fsync-after.json` (from `quill bench fsync --json`), as
bench/oltp-acceptance.sh writes them; or rounds `oltp-N.json` (or
`commit-N.json`) with `fsync-N-before.json` and `fsync-N-after.json`.
Exits 2 on unusable input.
"""
import json
import pathlib
import re
import signal
import sys

WRITE_SHAPES = ["write-only", "update-index", "update-non-index", "insert", "delete"]
ROUND = re.compile(r"^(oltp|commit)(-\d+)?\.json$")


def fail(msg):
    print(msg, file=sys.stderr)
    sys.exit(2)


def read_json(path):
    if not path.exists():
        fail(f"{path}: missing (acceptance runs before 8cd05dd measured no floor)")
    try:
        return json.loads(path.read_text())["rows"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        fail(f"{path}: not a `quill bench --json` result ({e})")


def floor_us(path):
    """The fastest method's mean in one `quill bench fsync` result."""
    rows = [r for r in read_json(path) if r.get("mean_us")]
    if not rows:
        fail(f"{path}: no measured sync method")
    best = min(rows, key=lambda r: r["mean_us"])
    how = f"{best.get('preparation', '?')} + {best.get('method', '?')}"
    return best["mean_us"], how + ("" if best.get("direct", True) else ", buffered")


def means_at_one(path):
    """(engine, shape) -> (mean us per transaction at 1 thread (1 client),
    user-mode CPU us per transaction or None)."""
    rows = read_json(path)
    if path.name.startswith("commit"):
        # Only 1-client durable commits on the real device are a floor's peer.
        rows = [r for r in rows if r.get("clients") == 1 and r.get("durability") == "sync"
                and not r.get("async") and not r.get("fsync_delay_ms")
                and r.get("commits_per_s", 0) > 0]
        if len(rows) != 1:
            fail(f"{path}: {len(rows)} rows of 1 client, sync, no delay, not async (want one)")
        return {("quill log only", "append + commit"): (1e6 / rows[0]["commits_per_s"], None)}
    return {(r["engine"], r["shape"]): (1e6 / r["tps"], r.get("user_cpu_us_per_op"))
            for r in rows if r["threads"] == 1 and r["tps"] > 0}


def cell(engine, mean, user, floor):
    user = "" if user is None else f"; user {user:5.1f}"
    return f"{engine} {mean:6.1f} ({mean - floor:+6.1f}{user})"


def report(path):
    suffix = ROUND.match(path.name)[2] or ""
    floors = [floor_us(path.with_name(f"fsync{suffix}-{w}.json")) for w in ("before", "after")]
    floor = (floors[0][0] + floors[1][0]) / 2
    print(f"{path}: floor {floor:.1f} us (before {floors[0][0]:.1f}, {floors[0][1]}; "
          f"after {floors[1][0]:.1f}, {floors[1][1]})")
    measured = means_at_one(path)
    engines = sorted({e for e, _ in measured}, key=lambda e: (not e.startswith("quill"), e))
    for shape in WRITE_SHAPES + ["append + commit"]:
        here = [e for e in engines if (e, shape) in measured]
        if not here:
            continue
        cells = "  ".join(cell(e, *measured[(e, shape)], floor) for e in here)
        line = f"  {shape:17} {cells}"
        peers = [measured[(e, shape)][0] for e in here if not e.startswith("quill")]
        if peers and ("quill", shape) in measured:
            best = min(peers)
            quill = measured[("quill", shape)][0]
            line += f"  ratio {best / quill:.2f}  ceiling {best / floor:.2f}"
        print(line)
    return any(u is not None for _, u in measured.values())


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    users = False
    for d in argv[1:]:
        found = sorted(p for p in pathlib.Path(d).glob("*.json") if ROUND.match(p.name))
        if not found:
            fail(f"{d}: no oltp.json, oltp-N.json or commit-N.json")
        for oltp in found:
            users |= report(oltp)
    print("(mean us per transaction at 1 thread, and in brackets its excess over the floor"
          + (" and its user-mode CPU us)" if users else ")"))
    return 0


if __name__ == "__main__":
    # Output piped into `head` ends quietly, as other command-line tools do.
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    sys.exit(main(sys.argv))
