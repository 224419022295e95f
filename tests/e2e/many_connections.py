#!/usr/bin/env python3
"""1,024 connections at once against `quill serve` (issue 14 part 5).

Opens N connections together (psycopg 3, asyncio), then each runs short
read-write transactions (BEGIN; UPDATE one random row; SELECT it; COMMIT)
for the given seconds. Passes when every connection opened, no
transaction failed (a serialization failure or deadlock, which this
workload cannot cause, would also count), the counter sums match the
commits, and the server's thread count (sampled from /proc every 100 ms)
stayed below the bound its execution model promises: the admission limit
plus tokio's workers and a few helpers, however many connections there
are.

    tests/e2e/many_connections.py PORT SERVER_PID [--connections 1024] [--seconds 10]
"""

import argparse
import asyncio
import json
import os
import random
import sys
import time

import psycopg

ROWS = 1000


def threads_of(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    raise RuntimeError("no Threads line")


async def sample_threads(pid, stop, out):
    while not stop.is_set():
        out.append(threads_of(pid))
        await asyncio.sleep(0.1)


async def client(port, seconds, start, stats):
    conn = await psycopg.AsyncConnection.connect(
        f"host=127.0.0.1 port={port} user=many dbname=many", autocommit=True
    )
    stats["open"] += 1
    await start.wait()
    deadline = time.monotonic() + seconds
    rng = random.Random()
    try:
        while time.monotonic() < deadline:
            row = rng.randrange(ROWS)
            try:
                async with conn.transaction():
                    await conn.execute("UPDATE counters SET n = n + 1 WHERE id = %s", (row,))
                    cur = await conn.execute("SELECT n FROM counters WHERE id = %s", (row,))
                    (n,) = await cur.fetchone()
                    assert n >= 1, n
                stats["commits"] += 1
            except psycopg.Error as e:
                stats["errors"].append(f"{e.sqlstate}: {e}")
                if len(stats["errors"]) > 20:
                    raise
    finally:
        await conn.close()


async def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("port", type=int)
    ap.add_argument("server_pid", type=int)
    ap.add_argument("--connections", type=int, default=1024)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--max-threads", type=int, default=None,
                    help="thread bound to check (default: 480 admitted + cores + 32)")
    a = ap.parse_args()

    with psycopg.connect(f"host=127.0.0.1 port={a.port} user=many dbname=many", autocommit=True) as c:
        c.execute("DROP TABLE IF EXISTS counters")
        c.execute("CREATE TABLE counters (id int PRIMARY KEY, n bigint NOT NULL)")
        for lo in range(0, ROWS, 500):
            vals = ", ".join(f"({i}, 0)" for i in range(lo, min(lo + 500, ROWS)))
            c.execute(f"INSERT INTO counters VALUES {vals}")

    stats = {"open": 0, "commits": 0, "errors": []}
    start = asyncio.Event()
    stop = asyncio.Event()
    threads = []
    sampler = asyncio.create_task(sample_threads(a.server_pid, stop, threads))
    t0 = time.monotonic()
    tasks = [asyncio.create_task(client(a.port, a.seconds, start, stats)) for _ in range(a.connections)]
    while stats["open"] < a.connections:
        if any(t.done() for t in tasks):
            break
        await asyncio.sleep(0.05)
    opened = time.monotonic() - t0
    start.set()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    stop.set()
    await sampler
    failures = [r for r in results if isinstance(r, BaseException)]

    with psycopg.connect(f"host=127.0.0.1 port={a.port} user=many dbname=many", autocommit=True) as c:
        (total,) = c.execute("SELECT sum(n) FROM counters").fetchone()

    bound = a.max_threads or (480 + (os.cpu_count() or 2) + 32)
    report = {
        "connections": a.connections,
        "opened": stats["open"],
        "open_seconds": round(opened, 2),
        "seconds": a.seconds,
        "commits": stats["commits"],
        "tps": round(stats["commits"] / a.seconds, 1),
        "errors": len(stats["errors"]),
        "counter_sum": total,
        "server_threads_max": max(threads) if threads else None,
        "server_threads_bound": bound,
    }
    print(json.dumps(report))
    problems = []
    if failures:
        problems.append(f"{len(failures)} connections failed, first: {failures[0]!r}")
    if stats["open"] != a.connections:
        problems.append(f"only {stats['open']} of {a.connections} connections opened")
    if stats["errors"]:
        problems.append(f"{len(stats['errors'])} transactions failed, first: {stats['errors'][0]}")
    if total != stats["commits"]:
        problems.append(f"counters sum to {total}, but {stats['commits']} transactions committed")
    if stats["commits"] == 0:
        problems.append("no transaction committed")
    if threads and max(threads) > bound:
        problems.append(f"the server ran {max(threads)} threads, over the bound {bound}")
    if problems:
        for p in problems:
            print("FAIL:", p, file=sys.stderr)
        sys.exit(1)
    print(f"ok: {a.connections} connections, {stats['commits']} commits, no errors, "
          f"at most {max(threads)} server threads")


if __name__ == "__main__":
    asyncio.run(main())
