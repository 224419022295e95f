#!/usr/bin/env python3
"""Check the commit-path acceptance criteria of issue 2 against the JSON that
bench/commit-acceptance.sh writes. Usage: check_commit.py OUT_DIR

Prints one line per criterion (PASS/FAIL with the measured numbers, as a
markdown table) and exits 1 if any criterion fails. Figures are medians over
the repeats of each combination ("summary" in the JSON)."""
import json
import os
import sys


def load(out, name):
    path = os.path.join(out, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def pick(doc, **want):
    """The summary row matching every key in `want`."""
    for row in doc["summary"]:
        if all(row.get(k) == v for k, v in want.items()):
            return row
    raise KeyError(f"no summary row with {want}")


def main():
    out = sys.argv[1]
    fs = load(out, "fsync.json")
    modes = load(out, "modes.json")
    asy = load(out, "async.json")
    slow = load(out, "slow.json")
    dur = load(out, "durability.json")
    results = []

    def check(name, ok, detail):
        results.append((name, ok, detail))

    # 1. fsyncs per commit <= 1.0 in every row of every run.
    worst = max(
        (r["fsyncs_per_commit"], f'{r["mode"]}/{r["durability"]}/{r["clients"]}c/async={r["async"]}/delay={r["fsync_delay_ms"]}')
        for doc in (modes, asy, slow, dur) if doc for r in doc["rows"]
    )
    check("fsyncs/commit <= 1.0 in every row", worst[0] <= 1.0 + 1e-9, f"worst {worst[0]:.4f} ({worst[1]})")

    # 2. leader fsyncs per commit vs MariaDB 10.11's on this machine.
    for clients, bound in ((4, 0.5), (16, 0.15), (64, 0.04), (256, 0.015)):
        for label, doc in (("no delay", modes), ("5 ms delay", slow)):
            if not doc:
                continue
            r = pick(doc, mode="leader", clients=clients, durability="sync")
            check(f"leader fsyncs/commit <= {bound} at {clients} clients ({label})",
                  r["fsyncs_per_commit"] <= bound, f'{r["fsyncs_per_commit"]:.4f}')

    # 3. leader >= 4x naive at 16 clients.
    for label, doc in (("no delay", modes), ("5 ms delay", slow)):
        if not doc:
            continue
        l = pick(doc, mode="leader", clients=16, durability="sync")["commits_per_s"]
        n = pick(doc, mode="naive", clients=16, durability="sync")["commits_per_s"]
        check(f"leader >= 4x naive commits/s at 16 clients ({label})", l >= 4 * n,
              f"leader {l:.0f}/s, naive {n:.0f}/s, ratio {l / max(n, 1):.2f}")

    # 4. leader never below flusher by more than 5% at 1 client.
    for label, doc in (("no delay", modes), ("5 ms delay", slow)):
        if not doc:
            continue
        l = pick(doc, mode="leader", clients=1, durability="sync")["commits_per_s"]
        f = pick(doc, mode="flusher", clients=1, durability="sync")["commits_per_s"]
        check(f"leader >= 0.95 x flusher at 1 client ({label})", l >= 0.95 * f,
              f"leader {l:.0f}/s, flusher {f:.0f}/s, ratio {l / max(f, 1):.3f}")

    # 5. 1 client leader >= 90% of the single-client physical limit.
    if fs:
        fastest = min((r for r in fs["rows"] if r["direct"]), key=lambda r: r["p50_us"])
        limit = 1e6 / fastest["p50_us"]
        l = pick(modes, mode="leader", clients=1, durability="sync")["commits_per_s"]
        check("1 client leader >= 90% of 1/(fastest median write+sync)", l >= 0.9 * limit,
              f'leader {l:.0f}/s; fastest {fastest["preparation"]}+{fastest["method"]} p50 {fastest["p50_us"]:.1f} us '
              f"=> limit {limit:.0f}/s; ratio {l / limit:.3f}")

    # 6. slow device, leader, 64 clients >= 5000/s.
    if slow:
        r = pick(slow, mode="leader", clients=64, durability="sync")
        check("--fsync-delay-ms 5, leader, 64 clients >= 5000 commits/s", r["commits_per_s"] >= 5000,
              f'{r["commits_per_s"]:.0f}/s')

    # 7. async within 5% at 1 client, at least as fast at 64.
    if asy:
        s1 = pick(asy, clients=1, **{"async": False})["commits_per_s"]
        a1 = pick(asy, clients=1, **{"async": True})["commits_per_s"]
        s64 = pick(asy, clients=64, **{"async": False})["commits_per_s"]
        a64 = pick(asy, clients=64, **{"async": True})["commits_per_s"]
        check("async within 5% of sync at 1 client", a1 >= 0.95 * s1, f"async {a1:.0f}/s, sync {s1:.0f}/s, ratio {a1 / max(s1, 1):.3f}")
        check("async at least as fast as sync at 64 clients", a64 >= s64, f"async {a64:.0f}/s, sync {s64:.0f}/s, ratio {a64 / max(s64, 1):.2f}")

    print("| criterion | result | measured |")
    print("| --- | --- | --- |")
    for name, ok, detail in results:
        print(f"| {name} | {'PASS' if ok else 'FAIL'} | {detail} |")
    failed = [r for r in results if not r[1]]
    print(f"\n{len(results) - len(failed)} of {len(results)} criteria pass")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
