#!/usr/bin/env python3
"""Check the commit-path acceptance criteria of issue 2 against the JSON that
bench/commit-acceptance.sh writes. Usage: check_commit.py OUT_DIR

Prints one line per criterion (PASS/FAIL with the measured numbers, as a
markdown table) and exits 1 if any criterion fails. Figures are medians over
the repeats of each combination ("summary" in the JSON)."""
import glob
import json
import os
import statistics
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

    rounds = sorted(glob.glob(os.path.join(out, "round*-modes.json")))
    round_docs = [(load(out, os.path.basename(p)), load(out, os.path.basename(p).replace("modes", "async")),
                   load(out, os.path.basename(p).replace("modes", "fsync"))) for p in rounds]
    all_docs = [modes, asy, slow, dur] + [d for r in round_docs for d in r[:2]]

    # 1. fsyncs per commit <= 1.0 in every row. Counters are read at the two
    # edges of the measured window, so a commit counted just outside it may
    # have its sync inside: allow one such sync per client.
    worst = None
    for doc in all_docs:
        if not doc:
            continue
        for r in doc["rows"]:
            syncs = round(r["fsyncs_per_commit"] * r["commits"])
            excess = syncs - r["commits"]
            label = f'{r["mode"]}/{r["durability"]}/{r["clients"]}c/async={r["async"]}/delay={r["fsync_delay_ms"]}'
            excess -= r["clients"]
            if worst is None or excess > worst[0]:
                worst = (excess, r["fsyncs_per_commit"], label)
    check("fsyncs/commit <= 1.0 in every row", worst[0] <= 0,
          f"highest {worst[1]:.4f} ({worst[2]}; syncs - commits - clients = {worst[0]})")

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

    # 4 and 5: single-client ratios, per round (fsync baseline and commit rows
    # adjacent in time), median over rounds.
    lf, phys, asyn = [], [], []
    for mdoc, adoc, fdoc in round_docs:
        l = pick(mdoc, mode="leader", clients=1)["commits_per_s"]
        f = pick(mdoc, mode="flusher", clients=1)["commits_per_s"]
        lf.append(l / max(f, 1))
        # The fastest preparation, with the log's method at one client
        # (RWF_DSYNC: every write it issues is durable and nothing before it
        # is pending).
        fastest = min((r for r in fdoc["rows"] if r["direct"] and r["method"] == "rwf_dsync"), key=lambda r: r["p50_us"])
        phys.append((l * fastest["p50_us"] / 1e6, l, fastest))
        if adoc:
            asyn.append(pick(adoc, mode="leader", clients=1)["commits_per_s"] / max(l, 1))
    if lf:
        check("leader >= 0.95 x flusher at 1 client (no delay)", statistics.median(lf) >= 0.95,
              f"median ratio {statistics.median(lf):.3f} over {len(lf)} rounds ({', '.join(f'{x:.3f}' for x in lf)})")
        med = statistics.median(x[0] for x in phys)
        detail = "; ".join(f'{x[1]:.0f}/s vs {x[2]["preparation"]} p50 {x[2]["p50_us"]:.1f} us' for x in phys)
        check("1 client leader >= 90% of 1/(fastest median write+sync)", med >= 0.9,
              f"median ratio {med:.3f} over {len(phys)} rounds ({detail})")
    if asyn:
        check("async within 5% of sync at 1 client", statistics.median(asyn) >= 0.95,
              f"median async/sync {statistics.median(asyn):.3f} over {len(asyn)} rounds ({', '.join(f'{x:.3f}' for x in asyn)})")
    if slow:
        l = pick(slow, mode="leader", clients=1, durability="sync")["commits_per_s"]
        f = pick(slow, mode="flusher", clients=1, durability="sync")["commits_per_s"]
        check("leader >= 0.95 x flusher at 1 client (5 ms delay)", l >= 0.95 * f,
              f"leader {l:.0f}/s, flusher {f:.0f}/s, ratio {l / max(f, 1):.3f}")

    # 6. slow device, leader, 64 clients >= 5000/s.
    if slow:
        r = pick(slow, mode="leader", clients=64, durability="sync")
        check("--fsync-delay-ms 5, leader, 64 clients >= 5000 commits/s", r["commits_per_s"] >= 5000,
              f'{r["commits_per_s"]:.0f}/s')

    # 7. async at least as fast at 64 clients.
    if asy:
        s64 = pick(asy, clients=64, **{"async": False})["commits_per_s"]
        a64 = pick(asy, clients=64, **{"async": True})["commits_per_s"]
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
