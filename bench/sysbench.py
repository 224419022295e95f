#!/usr/bin/env python3
"""sysbench 1.0 (Debian's, --db-driver=pgsql) against `quill serve`.

Starts a server on a fresh data directory and a free local port, then
for each test: prepare, one run per thread count, cleanup; stops the
server and runs `quill check` on the directory. Prints a line per run
and writes JSON (one record per run: test, threads, tps, p95 latency in
ms, ignored errors, exit status) for a script to check.

sysbench counts 40001, 40P01 and 23505 as "ignored errors" and retries
the event; any other error ends the run with a non-zero exit, recorded
here as `ok: false`.

`--clients sysbench,pgbench` also runs each test's statement from
PostgreSQL's pgbench (`-M prepared`, `--pgbench-jobs` client threads,
default 1), right after sysbench at the same connection count, on the
same table (oltp_update_non_index and oltp_point_select only). sysbench
runs one client thread per connection, so at 1,024 connections its own
threads share the machine with the server, and on a loopback connection
the kernel wakes the sleeping client thread inside the server's send;
pgbench multiplexes every connection over its few threads. Each record
names its client; the server's log payload bytes per commit (from
`SHOW quill.status`, when psql is installed) are recorded for both, to
show they did the same work. sysbench picks rows with its default
`--rand-type=special` (three quarters of the events on 1% of the rows)
unless `--rand-type uniform` is given; pgbench's scripts pick them
uniformly, so compare the two clients with `--rand-type uniform`.

Example:
  bench/sysbench.py --quill target/release/quill --threads 1,16,64 --time 10
  bench/sysbench.py --tests oltp_update_non_index --threads 64,1024 --time 60 \
    --clients sysbench,pgbench --server-cpus 1 --client-cpus 0
"""

import argparse
import json
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

TESTS = [
    "oltp_point_select",
    "oltp_read_only",
    "oltp_read_write",
    "oltp_write_only",
    "oltp_update_index",
    "oltp_update_non_index",
    "oltp_insert",
    "oltp_delete",
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid):
    """User + system CPU seconds of a process so far (/proc/PID/stat)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return 0.0


def steal_ticks():
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("cpu "):
                return int(line.split()[8])
    return 0


def wait_for_port(port, proc, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"quill serve exited with {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"quill serve did not listen on {port} within {timeout} s")


# The statement of a sysbench test as a pgbench script (`-M prepared`,
# so `:name` variables travel as Bind parameters, as sysbench's do).
# oltp_update_non_index sets `c` to 119 characters of digit groups, as
# sysbench does, whose first group varies.
PGBENCH_SCRIPTS = {
    "oltp_update_non_index": (
        "\\set id random(1, {size})\n"
        "\\set r random(10000000000, 99999999999)\n"
        "UPDATE sbtest1 SET c = :r || '-" + "-".join(["68487932199"] * 9) + "' WHERE id = :id;\n"
    ),
    "oltp_point_select": (
        "\\set id random(1, {size})\n"
        "SELECT c FROM sbtest1 WHERE id = :id;\n"
    ),
}


def figures(out, patterns):
    """`{key: convert(first group)}` for each `(key, regex, convert)` that
    matches `out`."""
    r = {}
    for key, regex, convert in patterns:
        m = re.search(regex, out)
        if m:
            r[key] = convert(m.group(1))
    return r


def parse_pgbench(out):
    """The figures of one pgbench run's report."""
    return figures(out, [
        ("transactions", r"number of transactions actually processed:\s+(\d+)", int),
        ("failed", r"number of failed transactions:\s+(\d+)", int),
        ("tps", r"tps = ([\d.]+)", float),
        ("avg_ms", r"latency average = ([\d.]+) ms", float),
    ])


def status(port, names):
    """Counters of the server's `SHOW quill.status`, by name (none
    without psql; `-w`: never prompt for a password)."""
    if shutil.which("psql") is None:
        return {}
    p = subprocess.run(
        ["psql", "-X", "-w", "-At", "-h", "127.0.0.1", "-p", str(port), "-U", "sbtest", "-d", "sbtest",
         "-c", "SHOW quill.status"],
        capture_output=True, text=True,
    )
    out = {}
    for line in p.stdout.splitlines():
        name, _, value = line.partition("|")
        if name in names:
            try:
                out[name] = float(value)
            except ValueError:
                pass
    return out


def parse(out):
    """The figures of one sysbench run's report."""
    return figures(out, [
        ("transactions", r"transactions:\s+(\d+)\s+\([\d.]+ per sec", int),
        ("tps", r"transactions:\s+\d+\s+\(([\d.]+) per sec", float),
        ("qps", r"queries:\s+\d+\s+\(([\d.]+) per sec", float),
        ("ignored_errors", r"ignored errors:\s+(\d+)", int),
        ("p95_ms", r"95th percentile:\s+([\d.]+)", float),
        ("avg_ms", r"avg:\s+([\d.]+)", float),
    ])


def run_one(client, test, threads, args, common, client_pin, server_pid, port):
    """One run of `test` at `threads` connections from `client`: its
    figures, the server's CPU per transaction (from /proc) and, from the
    server's own counters, its log bytes per transaction."""
    counters = ["txn.commits", "store.log.append_payload_bytes"]
    before = status(port, counters)
    cpu0 = cpu_seconds(server_pid)
    client0 = os.times()
    if client == "sysbench":
        p = subprocess.run(
            [*client_pin, "sysbench", test, *common, f"--threads={threads}", f"--time={args.time}",
             "--report-interval=0", *([f"--rand-type={args.rand_type}"] if args.rand_type else []), "run"],
            capture_output=True, text=True,
        )
    else:
        with tempfile.NamedTemporaryFile("w", suffix=".sql") as script:
            script.write(PGBENCH_SCRIPTS[test].format(size=args.table_size))
            script.flush()
            p = subprocess.run(
                [*client_pin, "pgbench", "-n", "-M", "prepared", "-h", "127.0.0.1", "-p", str(port),
                 "-U", "sbtest", "-c", str(threads), "-j", str(min(args.pgbench_jobs, threads)),
                 "-T", str(args.time), "-f", script.name, "sbtest"],
                capture_output=True, text=True,
            )
    cpu = cpu_seconds(server_pid) - cpu0
    client1 = os.times()
    # The client's CPU (user + system of the finished child process).
    client_cpu = (client1.children_user - client0.children_user) + (
        client1.children_system - client0.children_system)
    after = status(port, counters)
    r = {"test": test, "client": client, "threads": threads, "seconds": args.time,
         "ok": p.returncode == 0}
    r.update(parse(p.stdout) if client == "sysbench" else parse_pgbench(p.stdout))
    if r.get("failed"):
        r["ok"] = False
    if r.get("transactions"):
        # Server CPU (user + system) per transaction, from /proc.
        r["server_cpu_us_per_txn"] = round(cpu * 1e6 / r["transactions"], 1)
        r["server_cpu_share"] = round(cpu / args.time, 2)
        r["client_cpu_us_per_txn"] = round(client_cpu * 1e6 / r["transactions"], 1)
        r["client_cpu_share"] = round(client_cpu / args.time, 2)
    commits = after.get("txn.commits", 0) - before.get("txn.commits", 0)
    if commits > 0:
        logged = after.get("store.log.append_payload_bytes", 0) - before.get("store.log.append_payload_bytes", 0)
        r["log_payload_bytes_per_commit"] = round(logged / commits, 1)
    if not r["ok"]:
        r["output"] = (p.stdout + p.stderr)[-2000:]
    return r


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quill", default="target/release/quill", help="the quill binary")
    ap.add_argument("--tests", default=",".join(TESTS), help="comma-separated sysbench tests")
    ap.add_argument("--threads", default="1,16,64", help="comma-separated thread counts")
    ap.add_argument("--time", type=int, default=10, help="seconds per run")
    ap.add_argument("--table-size", type=int, default=10000, help="rows per table")
    ap.add_argument("--tables", type=int, default=1)
    ap.add_argument("--dir", help="data directory (default: a fresh temporary one)")
    ap.add_argument("--out", help="write the JSON results here")
    ap.add_argument("--server-log", help="keep the server's output here")
    ap.add_argument("--server-cpus", help="run the server on these CPUs only (taskset -c LIST)")
    ap.add_argument("--client-cpus", help="run the client (sysbench, pgbench) on these CPUs only (taskset -c LIST)")
    ap.add_argument("--rand-type", help="sysbench's --rand-type (its default: special; pgbench's scripts: uniform)")
    ap.add_argument("--clients", default="sysbench",
                    help="comma-separated: sysbench, pgbench (each run at every thread count, in this order)")
    ap.add_argument("--pgbench-jobs", type=int, default=1, help="pgbench's client threads (-j)")
    args = ap.parse_args()
    clients = args.clients.split(",")
    for c in clients:
        if c not in ("sysbench", "pgbench"):
            raise SystemExit(f"unknown client {c!r}: sysbench or pgbench")
    if "pgbench" in clients:
        if shutil.which("pgbench") is None:
            raise SystemExit("pgbench not found: apt-get install postgresql-15 (Debian ships pgbench with the server)")
        unsupported = [t for t in args.tests.split(",") if t not in PGBENCH_SCRIPTS]
        if unsupported:
            raise SystemExit(f"pgbench runs only {', '.join(PGBENCH_SCRIPTS)}, not {', '.join(unsupported)}")
        if args.tables != 1:
            raise SystemExit("pgbench's scripts use sbtest1 only: run them with --tables 1")
    server_pin = ["taskset", "-c", args.server_cpus] if args.server_cpus else []
    client_pin = ["taskset", "-c", args.client_cpus] if args.client_cpus else []

    if shutil.which("sysbench") is None:
        raise SystemExit("sysbench not found: apt-get install sysbench")
    tmp = None
    data_dir = args.dir
    if data_dir is None:
        tmp = tempfile.mkdtemp(prefix="quill-sysbench-")
        data_dir = os.path.join(tmp, "data")
    port = free_port()
    log = open(args.server_log or os.devnull, "w")
    server = subprocess.Popen(
        [*server_pin, args.quill, "serve", "--dir", data_dir, "--listen", f"127.0.0.1:{port}"],
        stdout=log, stderr=subprocess.STDOUT,
    )
    results = []
    failures = 0
    steal0, t0 = steal_ticks(), time.time()
    try:
        wait_for_port(port, server)
        common = [
            "--db-driver=pgsql", "--pgsql-host=127.0.0.1", f"--pgsql-port={port}",
            "--pgsql-user=sbtest", "--pgsql-db=sbtest",
            f"--tables={args.tables}", f"--table-size={args.table_size}",
        ]
        for test in args.tests.split(","):
            p = subprocess.run(["sysbench", test, *common, "prepare"], capture_output=True, text=True)
            if p.returncode != 0:
                print(f"{test}: prepare failed ({p.returncode}):\n{p.stdout}{p.stderr}", file=sys.stderr)
                failures += 1
                results.append({"test": test, "step": "prepare", "ok": False, "output": (p.stdout + p.stderr)[-2000:]})
                subprocess.run(["sysbench", test, *common, "cleanup"], capture_output=True, text=True)
                continue
            for threads in [int(t) for t in args.threads.split(",")]:
                for client in clients:
                    r = run_one(client, test, threads, args, common, client_pin, server.pid, port)
                    if not r["ok"]:
                        failures += 1
                    results.append(r)
                    print(
                        f"{test:24} {client:8} threads {threads:4}: "
                        + (f"{r.get('tps', 0):10.1f} tps  "
                           + (f"p95 {r['p95_ms']:8.2f} ms  " if "p95_ms" in r else f"avg {r.get('avg_ms', 0):8.2f} ms  ")
                           + f"ignored errors {r.get('ignored_errors', 0)}  "
                           f"server {r.get('server_cpu_us_per_txn', 0):.0f} us CPU/txn  "
                           f"client {r.get('client_cpu_us_per_txn', 0):.0f} us"
                           if r["ok"] else "FAILED\n" + r.get("output", "")),
                        flush=True,
                    )
            p = subprocess.run(["sysbench", test, *common, "cleanup"], capture_output=True, text=True)
            if p.returncode != 0:
                failures += 1
                print(f"{test}: cleanup failed:\n{p.stdout}{p.stderr}", file=sys.stderr)
    finally:
        server.terminate()
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    check = subprocess.run([args.quill, "check", data_dir], capture_output=True, text=True)
    print(f"quill check: exit {check.returncode}")
    if check.returncode != 0:
        print(check.stdout + check.stderr, file=sys.stderr)
        failures += 1
    steal = steal_ticks() - steal0
    report = {
        "command": " ".join(sys.argv),
        "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
        "machine": {
            "nproc": os.cpu_count(),
            "kernel": platform.release(),
            "steal_ticks": steal,
            "seconds": round(time.time() - t0),
        },
        "sysbench": subprocess.run(["sysbench", "--version"], capture_output=True, text=True).stdout.strip(),
        "server_cpus": args.server_cpus,
        "client_cpus": args.client_cpus,
        "clients": clients,
        "rand_type": args.rand_type or "special (sysbench's default)",
        "pgbench_jobs": args.pgbench_jobs if "pgbench" in clients else None,
        "table_size": args.table_size,
        "runs": results,
        "check_ok": check.returncode == 0,
        "failures": failures,
    }
    print(f"host: {steal} ticks of CPU steal over {report['machine']['seconds']} s on {os.cpu_count()} CPUs")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
        print(f"wrote {args.out}")
    if tmp:
        shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
