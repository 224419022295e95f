#!/usr/bin/env python3
"""Kill -9 `quill serve` while clients commit, restart it, and check that
every commit a client saw acknowledged is there, and nothing else is
half there.

Clients (psycopg2, autocommit, like sysbench's write statements) insert
rows with ids of their own and update a counter row per client; each
records what the server acknowledged. After SIGKILL the server restarts
on the same directory (recovery runs), and the check is: every
acknowledged insert is present, every counter is at least its last
acknowledged value (a commit in flight at the kill may or may not have
landed, but at most one more), and `quill check` passes.

  tests/e2e/crash.py --quill target/release/quill [--seconds 3] [--clients 8]
"""

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(quill, data, port, log):
    p = subprocess.Popen([quill, "serve", "--dir", data, "--listen", f"127.0.0.1:{port}"],
                         stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 60
    while time.time() < deadline:
        if p.poll() is not None:
            raise SystemExit(f"quill serve exited with {p.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return p
        except OSError:
            time.sleep(0.1)
    raise SystemExit("quill serve did not start")


def main():
    import psycopg2

    ap = argparse.ArgumentParser()
    ap.add_argument("--quill", default="target/release/quill")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="quill-crash-")
    data = os.path.join(tmp, "data")
    log = open(os.path.join(tmp, "server.log"), "w")
    port = free_port()
    server = start(args.quill, data, port, log)
    dsn = f"host=127.0.0.1 port={port} dbname=crash user=crash"
    c = psycopg2.connect(dsn)
    c.set_session(autocommit=True)
    c.cursor().execute("CREATE TABLE rows (id bigint PRIMARY KEY, client int NOT NULL, pad varchar(100))")
    c.cursor().execute("CREATE TABLE counters (client int PRIMARY KEY, n bigint NOT NULL)")
    for i in range(args.clients):
        c.cursor().execute("INSERT INTO counters VALUES (%s, 0)", (i,))
    c.close()
    acked_rows = [set() for _ in range(args.clients)]
    acked_count = [0] * args.clients
    next_id = [i * 10_000_000 for i in range(args.clients)]
    failures = []
    for rnd in range(args.rounds):
        stop = threading.Event()

        def client(i):
            try:
                conn = psycopg2.connect(dsn)
                conn.set_session(autocommit=True)
                cur = conn.cursor()
                while not stop.is_set():
                    rid = next_id[i]
                    cur.execute("INSERT INTO rows VALUES (%s, %s, %s)", (rid, i, "x" * 50))
                    acked_rows[i].add(rid)
                    next_id[i] += 1
                    cur.execute("UPDATE counters SET n = n + 1 WHERE client = %s", (i,))
                    acked_count[i] += 1
            except psycopg2.Error:
                return  # the kill

        threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
        for t in threads:
            t.start()
        time.sleep(args.seconds)
        server.send_signal(signal.SIGKILL)
        server.wait()
        stop.set()
        for t in threads:
            t.join()
        server = start(args.quill, data, port, log)
        conn = psycopg2.connect(dsn)
        cur = conn.cursor()
        cur.execute("SELECT id FROM rows")
        present = {r[0] for r in cur.fetchall()}
        cur.execute("SELECT client, n FROM counters ORDER BY client")
        counts = dict(cur.fetchall())
        conn.close()
        total = sum(len(s) for s in acked_rows)
        for i in range(args.clients):
            missing = acked_rows[i] - present
            if missing:
                failures.append(f"round {rnd}: client {i}: {len(missing)} acknowledged rows missing, e.g. {sorted(missing)[:3]}")
            n = counts.get(i)
            if n is None or not (acked_count[i] <= n <= acked_count[i] + 1):
                failures.append(f"round {rnd}: client {i}: counter {n}, acknowledged {acked_count[i]}")
            # Whatever landed for an unacknowledged in-flight insert counts
            # as done from now on.
            for rid in list(present):
                if rid // 10_000_000 == i and rid >= next_id[i]:
                    next_id[i] = rid + 1
                    acked_rows[i].add(rid)
            acked_count[i] = counts.get(i, acked_count[i])
        print(f"round {rnd}: killed after {args.seconds} s; {total} acknowledged inserts, all present: {not failures}")
    server.send_signal(signal.SIGTERM)
    server.wait()
    check = subprocess.run([args.quill, "check", data], capture_output=True, text=True)
    print(f"quill check: exit {check.returncode}")
    if check.returncode != 0:
        failures.append("quill check failed:\n" + check.stdout + check.stderr)
    if failures:
        print("FAILED:\n" + "\n".join(failures), file=sys.stderr)
        print(f"data directory and server log kept in {tmp}", file=sys.stderr)
        sys.exit(1)
    shutil.rmtree(tmp, ignore_errors=True)
    print("crash test: ok")


if __name__ == "__main__":
    main()
