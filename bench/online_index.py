#!/usr/bin/env python3
"""Writers during CREATE INDEX, plain and CONCURRENTLY, against `quill serve`.

Starts a server on a fresh data directory, loads ROWS rows into
t(k bigint primary key, v bigint not null, pad varchar(100)), and runs
WRITERS threads (psycopg 3, autocommit), each updating the indexed column
of random rows as fast as it can. Then, per round, it builds an index on
v with plain CREATE INDEX (it waits for the transactions older than it,
then builds in bulk while writers wait, as PostgreSQL's does, or online
if newer ones keep starting) and with CREATE INDEX CONCURRENTLY (writers go on), and
reports for each build: its duration, the writers' commits during it
(and per second, against the second before it), and their longest and
99th-percentile commit latency during it. After each build the index must
agree with the table (a count through the index against a full count),
and after the last round `quill check` must find the database clean.

    bench/online_index.py --quill target/release/quill [--rows 300000]
        [--writers 4] [--rounds 1] [--json out.json] [--require-online]
        [--attempts 3]

--writers 0 times the two builds alone.

--require-online fails the run unless, during every CONCURRENTLY build,
writers committed at least a quarter as fast as before it (the build takes
its share of the CPU) and no commit took
longer than a quarter of the build (so the build did not hold them off).
A build that fails this is built again, up to --attempts (3) builds per
round, and the run fails only if every one of them did: a build that
holds writers off does so every time, while a disk or CPU stall of a
shared host (a few hundred milliseconds once) falls in one build.
"""

import argparse
import json
import os
import platform
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import psycopg


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def steal_ticks():
    with open("/proc/stat") as f:
        fields = f.readline().split()
    return int(fields[8]) if len(fields) > 8 else 0


def connect(port):
    return psycopg.connect(f"host=127.0.0.1 port={port} user=bench dbname=bench", autocommit=True)


class Writers:
    """WRITERS threads updating random rows; each commit's end and latency."""

    def __init__(self, port, n, rows):
        self.stop = threading.Event()
        self.commits = []  # (end time, latency), appended by all threads
        self.errors = []
        self.lock = threading.Lock()
        self.threads = [
            threading.Thread(target=self.run, args=(port, rows, i), daemon=True) for i in range(n)
        ]

    def start(self):
        for t in self.threads:
            t.start()

    def run(self, port, rows, seed):
        rng = random.Random(seed)
        conn = connect(port)
        local = []
        while not self.stop.is_set():
            k = rng.randrange(rows)
            t0 = time.monotonic()
            try:
                conn.execute("UPDATE t SET v = %s WHERE k = %s", (rng.randrange(1 << 40), k))
            except psycopg.Error as e:
                with self.lock:
                    self.errors.append(str(e))
                continue
            t1 = time.monotonic()
            local.append((t1, t1 - t0))
            if len(local) >= 64:
                with self.lock:
                    self.commits.extend(local)
                local = []
        with self.lock:
            self.commits.extend(local)
        conn.close()

    def snapshot(self):
        with self.lock:
            return list(self.commits)

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join()


def percentile(xs, p):
    if not xs:
        return 0.0
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]


def one_build(port, writers, mode):
    """Build the index on v with `mode` ("plain" or "concurrently")."""
    time.sleep(1.0)
    before_start = time.monotonic() - 1.0
    conn = connect(port)
    t0 = time.monotonic()
    sql = "CREATE INDEX CONCURRENTLY t_v ON t (v)" if mode == "concurrently" else "CREATE INDEX t_v ON t (v)"
    conn.execute(sql)
    t1 = time.monotonic()
    time.sleep(0.5)  # commits that were held off land after the build
    commits = writers.snapshot()
    before = [c for c in commits if before_start <= c[0] < t0]
    # A commit overlaps the build if it ended after the build began and
    # began before it ended.
    during = [c for c in commits if c[0] > t0 and c[0] - c[1] < t1]
    ended_during = [c for c in commits if t0 < c[0] <= t1]
    build_s = t1 - t0
    (through_index,) = conn.execute("SELECT count(*) FROM t WHERE v >= 0").fetchone()
    plan = [r[0] for r in conn.execute("EXPLAIN SELECT count(*) FROM t WHERE v >= 0").fetchall()]
    (total,) = conn.execute("SELECT count(*) FROM t").fetchone()
    if not any("t_v" in line for line in plan):
        raise SystemExit(f"the count did not use the index: {plan}")
    if through_index != total:
        raise SystemExit(f"{mode}: {through_index} rows through the index, {total} in the table")
    conn.execute("DROP INDEX t_v")
    conn.close()
    lat = [c[1] for c in during]
    longest = max(during, key=lambda c: c[1], default=None)
    return {
        "mode": mode,
        "build_s": round(build_s, 3),
        "commits_per_s_before": round(len(before) / 1.0, 1),
        "commits_ended_during_build": len(ended_during),
        "commits_per_s_during": round(len(ended_during) / build_s, 1) if build_s > 0 else 0.0,
        "max_commit_latency_s": round(max(lat, default=0.0), 4),
        # When the longest commit began, in seconds from the build's start
        # (near 0 or near build_s: it waited for a catalog change; below 0:
        # it began before the build).
        "longest_commit_began_s": round(longest[0] - longest[1] - t0, 3) if longest else None,
        "max_commit_latency_before_s": round(max((c[1] for c in before), default=0.0), 4),
        "p99_commit_latency_s": round(percentile(lat, 0.99), 4),
        "median_commit_latency_s": round(statistics.median(lat), 5) if lat else 0.0,
        "index_rows": through_index,
    }


def held_off(res):
    """Whether writers were held off during a build (see --require-online)."""
    slow = res["commits_per_s_during"] < 0.25 * res["commits_per_s_before"]
    held = res["max_commit_latency_s"] > 0.25 * res["build_s"]
    return slow or held


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quill", required=True, help="the quill binary")
    ap.add_argument("--rows", type=int, default=300_000)
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--require-online", action="store_true")
    ap.add_argument("--attempts", type=int, default=3, help="CONCURRENTLY builds per round before --require-online fails")
    args = ap.parse_args()
    if args.attempts < 1:
        ap.error("--attempts must be at least 1")

    port = free_port()
    tmp = tempfile.mkdtemp(prefix="quill-online-index-")
    data = os.path.join(tmp, "data")
    log = open(os.path.join(tmp, "server.log"), "w")
    server = subprocess.Popen(
        [args.quill, "serve", "--dir", data, "--listen", f"127.0.0.1:{port}"], stdout=log, stderr=log
    )
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), 1).close()
                break
            except OSError:
                time.sleep(0.1)
        conn = connect(port)
        conn.execute("CREATE TABLE t (k bigint PRIMARY KEY, v bigint NOT NULL, pad varchar(100))")
        t0 = time.monotonic()
        batch = 1000
        for lo in range(0, args.rows, batch):
            hi = min(args.rows, lo + batch)
            values = ",".join(f"({k},{k * 7919 % 1000003},'row {k:010d} padding padding')" for k in range(lo, hi))
            conn.execute(f"INSERT INTO t VALUES {values}")
        print(f"loaded {args.rows} rows in {time.monotonic() - t0:.1f} s", file=sys.stderr)
        conn.close()

        writers = Writers(port, args.writers, args.rows)
        steal0 = steal_ticks()
        writers.start()
        results = []
        for r in range(args.rounds):
            for mode in ("plain", "concurrently"):
                # A CONCURRENTLY build that held writers off is built again
                # (up to --attempts builds): a build that holds writers does
                # so every time, a stall of the host's disk or CPU does not.
                for attempt in range(1, args.attempts + 1):
                    res = one_build(port, writers, mode)
                    res["round"] = r + 1
                    res["attempt"] = attempt
                    results.append(res)
                    print(
                        f"round {r + 1} {mode:>12}: build {res['build_s']:.2f} s; writers "
                        f"{res['commits_per_s_before']:.0f}/s before, {res['commits_per_s_during']:.0f}/s during "
                        f"({res['commits_ended_during_build']} commits), longest commit "
                        f"{res['max_commit_latency_s']:.3f} s, p99 {res['p99_commit_latency_s']:.4f} s "
                        f"(longest began {res['longest_commit_began_s']} s in; longest in the second before: "
                        f"{res['max_commit_latency_before_s']:.3f} s)",
                        flush=True,
                    )
                    if mode != "concurrently" or not args.require_online or not held_off(res):
                        break
                    if attempt < args.attempts:
                        print(f"round {r + 1}: writers were held off; building again", flush=True)
        writers.finish()
        steal = steal_ticks() - steal0
        if writers.errors:
            raise SystemExit(f"{len(writers.errors)} writer errors, first: {writers.errors[0]}")
    finally:
        server.terminate()
        server.wait()
        log.close()
    check = subprocess.run([args.quill, "check", data], capture_output=True, text=True)
    if check.returncode != 0:
        raise SystemExit(f"quill check failed:\n{check.stdout}\n{check.stderr}")
    out = {
        "benchmark": "online_index",
        "command": " ".join(sys.argv),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"nproc": os.cpu_count(), "kernel": platform.release()},
        "steal_ticks": steal,
        "rows": args.rows,
        "writers": args.writers,
        "results": results,
        "quill_check": "clean",
    }
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)
    print(json.dumps(out, indent=2))
    if args.require_online:
        for r in range(args.rounds):
            tries = [res for res in results if res["mode"] == "concurrently" and res["round"] == r + 1]
            if all(held_off(res) for res in tries):
                raise SystemExit(
                    f"writers were held off by CREATE INDEX CONCURRENTLY in all {len(tries)} builds "
                    f"of round {r + 1}: {tries}"
                )
    subprocess.run(["rm", "-rf", tmp])


if __name__ == "__main__":
    main()
