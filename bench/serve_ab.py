#!/usr/bin/env python3
"""A/B of two `quill` binaries under sysbench, interleaved finely enough
for a noisy shared host.

Both servers run at once, each on a fresh data directory with the same
sysbench table; an idle server costs nothing, so short runs can alternate
between them (A B, B A, A B, ...) and each pair of runs shares the same
minute of the host. Two servers started one after the other, minutes
apart, differ by 10-30% on these machines from CPU steal and the shared
cache alone (`bench/results/serve.md`).

For each run: the median of sysbench's per-second TPS, leaving out the
first two seconds (connection start) and the last; the server's CPU per
transaction over the whole run (connecting and closing included, so
higher than in the steady state), from /proc; and the CPU the other,
idle server used meanwhile (its background threads share the pinned
core). Prints each run, then per binary the median TPS and CPU per
transaction, and B/A per round with its median; writes everything as
JSON with `--out`, again after every run, so a failed run keeps the
ones before it.

    bench/serve_ab.py A_BINARY B_BINARY [--rounds 8] [--threads 1024] [--time 15]
        [--test oltp_update_non_index] [--table-size 10000] [--rand-type uniform]
        [--server-cpus 1] [--client-cpus 0] [--out FILE]
"""

import argparse
import json
import os
import platform
import re
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_ticks(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # utime and stime: fields 14 and 15 of stat, 12 and 13 after the name.
    return int(fields[11]) + int(fields[12])


def host_steal():
    with open("/proc/stat") as f:
        return int(f.readline().split()[8])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("a", help="binary A (the baseline)")
    ap.add_argument("b", help="binary B")
    ap.add_argument("--rounds", type=int, default=8, help="runs per binary")
    ap.add_argument("--threads", type=int, default=1024, help="sysbench connections")
    ap.add_argument("--time", type=int, default=15, help="seconds per run (at least 5)")
    ap.add_argument("--test", default="oltp_update_non_index")
    ap.add_argument("--table-size", type=int, default=10000)
    ap.add_argument("--rand-type", default="uniform", help="sysbench's --rand-type")
    ap.add_argument("--server-cpus", default="1", help="taskset -c list for both servers ('' for none)")
    ap.add_argument("--client-cpus", default="0", help="taskset -c list for sysbench ('' for none)")
    ap.add_argument("--out", help="write the results as JSON here")
    args = ap.parse_args()
    if args.rounds < 1:
        raise SystemExit("--rounds must be at least 1")
    if args.time < 5:
        raise SystemExit("--time must be at least 5 seconds (the first two and the last are left out)")
    if shutil.which("sysbench") is None:
        raise SystemExit("sysbench not found: apt-get install sysbench")
    # sysbench's connections, and the servers' sockets.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, max(soft, 2 * args.threads + 256))
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    binaries = {"A": os.path.realpath(args.a), "B": os.path.realpath(args.b)}
    spin = ["taskset", "-c", args.server_cpus] if args.server_cpus else []
    cpin = ["taskset", "-c", args.client_cpus] if args.client_cpus else []
    tmp = tempfile.mkdtemp(prefix="quill-serve-ab-")
    servers = {}
    try:
        for name, binary in binaries.items():
            port = free_port()
            proc = subprocess.Popen(
                [*spin, binary, "serve", "--dir", os.path.join(tmp, name),
                 "--listen", f"127.0.0.1:{port}"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            servers[name] = (proc, port)
            for _ in range(300):
                try:
                    socket.create_connection(("127.0.0.1", port), 1).close()
                    break
                except OSError:
                    if proc.poll() is not None:
                        raise SystemExit(f"server {name} ({binary}) exited with {proc.returncode}")
                    time.sleep(0.1)
            else:
                raise SystemExit(f"server {name} did not listen within 30 s")

        def sysbench(port, *extra):
            # A stalled run ends the A/B rather than hanging it.
            return subprocess.run(
                [*cpin, "sysbench", args.test, "--db-driver=pgsql", "--pgsql-host=127.0.0.1",
                 f"--pgsql-port={port}", "--pgsql-user=sbtest", "--pgsql-db=sbtest", "--tables=1",
                 f"--table-size={args.table_size}", *extra],
                capture_output=True, text=True, timeout=args.time + 300)

        def record(**more):
            if args.out:
                with open(args.out, "w") as f:
                    json.dump({"args": vars(args), "binaries": binaries, "started": started,
                               "machine": {"nproc": os.cpu_count(), "kernel": platform.release()},
                               "runs": runs, **more}, f, indent=1)

        for name, (_, port) in servers.items():
            p = sysbench(port, "prepare")
            if p.returncode != 0:
                raise SystemExit(f"sysbench prepare against {name} failed:\n{p.stderr}")
        runs = []
        steal0, t0 = host_steal(), time.time()
        for r in range(args.rounds):
            for name in ("A", "B") if r % 2 == 0 else ("B", "A"):
                proc, port = servers[name]
                other = servers["B" if name == "A" else "A"][0]
                c0, o0 = cpu_ticks(proc.pid), cpu_ticks(other.pid)
                p = sysbench(port, f"--threads={args.threads}", f"--time={args.time}",
                             f"--rand-type={args.rand_type}", "--report-interval=1", "run")
                c1, o1 = cpu_ticks(proc.pid), cpu_ticks(other.pid)
                per_second = [float(x) for x in re.findall(r"tps: ([\d.]+)", p.stdout)]
                m = re.search(r"transactions:\s+(\d+)", p.stdout)
                txns = int(m.group(1)) if m else 0
                if p.returncode != 0 or len(per_second) < 4 or txns == 0:
                    raise SystemExit(f"sysbench run against {name} failed:\n{p.stdout[-2000:]}{p.stderr[-2000:]}")
                tps = statistics.median(per_second[2:-1])
                us = (c1 - c0) * 1e6 / os.sysconf("SC_CLK_TCK") / txns
                idle_s = (o1 - o0) / os.sysconf("SC_CLK_TCK")
                runs.append({"round": r, "binary": name, "tps": tps, "tps_per_second": per_second,
                             "transactions": txns, "server_us_per_txn": us, "idle_server_cpu_s": idle_s})
                record()
                print(f"round {r} {name}: {tps:9.1f} tps (median of the inner seconds), server {us:5.1f} us CPU/txn, "
                      f"the idle server {idle_s:.2f} s CPU", flush=True)
        steal = (host_steal() - steal0) / os.sysconf("SC_CLK_TCK") / (time.time() - t0) / os.cpu_count()
    finally:
        for proc, _ in servers.values():
            proc.terminate()
        for proc, _ in servers.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)

    summary = {}
    for name in ("A", "B"):
        mine = [x for x in runs if x["binary"] == name]
        summary[name] = {
            "median_tps": statistics.median(x["tps"] for x in mine),
            "median_server_us_per_txn": statistics.median(x["server_us_per_txn"] for x in mine),
        }
        print(f"{name}: median {summary[name]['median_tps']:.1f} tps, "
              f"{summary[name]['median_server_us_per_txn']:.1f} us CPU/txn")
    ratios = [
        next(x["tps"] for x in runs if x["round"] == r and x["binary"] == "B")
        / next(x["tps"] for x in runs if x["round"] == r and x["binary"] == "A")
        for r in range(args.rounds)
    ]
    print("B/A per round:", " ".join(f"{x:.3f}" for x in ratios), f"median {statistics.median(ratios):.3f}")
    print(f"host CPU steal over the runs: {100 * steal:.1f}%")
    if args.out:
        record(ended=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), summary=summary,
               b_over_a=ratios, b_over_a_median=statistics.median(ratios), steal_fraction=steal)
        print(f"wrote {args.out}")


if __name__ == "__main__":
    sys.exit(main())
