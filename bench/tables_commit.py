#!/usr/bin/env python3
"""Render the JSON of bench/commit-acceptance.sh as markdown tables (the
tables in bench/results/commit.md). Usage: tables_commit.py OUT_DIR"""
import glob
import json
import os
import statistics
import sys


def load(out, name):
    with open(os.path.join(out, name)) as f:
        return json.load(f)


def commit_table(doc, title):
    print(f"### {title}\n")
    print(f"`{doc['command']}` ({doc['date']}, commit {doc['git_commit']}); medians of {doc['config']['repeat']} interleaved repeats\n")
    print("| mode | durability | async | clients | delay ms | commits/s | fsyncs/commit | p50 us | p99 us | CPU us/commit | cs/commit | bytes written/commit |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for s in doc["summary"]:
        print(f"| {s['mode']} | {s['durability']} | {'yes' if s['async'] else 'no'} | {s['clients']} | {s['fsync_delay_ms']:g} | "
              f"{s['commits_per_s']:.0f} | {s['fsyncs_per_commit']:.4f} | {s['p50_us']:.1f} | {s['p99_us']:.1f} | "
              f"{s['cpu_us_per_commit']:.1f} | {s['cs_per_commit']:.2f} | {s['bytes_written_per_commit']:.0f} |")
    print()


def main():
    out = sys.argv[1]
    fs = load(out, "fsync.json")
    print("### Durable 4 KiB write latency (`quill bench fsync`)\n")
    print(f"`{fs['command']}` ({fs['date']}); {fs['rounds']} rounds x {fs['iterations']} writes, combinations interleaved\n")
    print("| preparation | method | O_DIRECT | p50 us | p99 us | max us | write-only p50 us | per-round p50 us |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | --- |")
    for r in fs["rows"]:
        w = f"{r['write_p50_us']:.1f}" if r.get("write_p50_us") is not None else "-"
        rounds = ", ".join(f"{x:.1f}" for x in r["round_p50s_us"])
        print(f"| {r['preparation']} | {r['method']} | {'yes' if r['direct'] else 'no'} | {r['p50_us']:.1f} | {r['p99_us']:.1f} | {r['max_us']:.1f} | {w} | {rounds} |")
    print()
    rounds = sorted(glob.glob(os.path.join(out, "round*-modes.json")))
    if rounds:
        print("### One client, rounds alternating `bench fsync` (overwrite, O_DIRECT) and the commit rows\n")
        print("| round | fsync p50 us: fdatasync / O_DSYNC / RWF_DSYNC | leader commits/s | flusher | naive | leader async | leader p50 us | log durable I/O p50 us |")
        print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        for i, p in enumerate(rounds, 1):
            m = json.load(open(p))
            a = json.load(open(p.replace("modes", "async")))
            f = json.load(open(p.replace("modes", "fsync")))
            by = {r["mode"]: r for r in m["rows"]}
            fm = {r["method"]: r["p50_us"] for r in f["rows"]}
            print(f"| {i} | {fm.get('fdatasync', 0):.1f} / {fm.get('o_dsync', 0):.1f} / {fm.get('rwf_dsync', 0):.1f} | "
                  f"{by['leader']['commits_per_s']:.0f} | {by['flusher']['commits_per_s']:.0f} | {by['naive']['commits_per_s']:.0f} | "
                  f"{a['rows'][0]['commits_per_s']:.0f} | {by['leader']['p50_us']:.1f} | {by['leader']['log']['sync_latency']['p50'] / 1000:.1f} |")
        print()
    for name, title in (("modes.json", "Commit modes, no injected delay"),
                        ("slow.json", "Commit modes, 5 ms injected after every sync (a slow device)"),
                        ("async.json", "Async (tokio tasks, `commit_async`) against threads"),
                        ("durability.json", "Durability levels write and lazy")):
        if os.path.exists(os.path.join(out, name)):
            commit_table(load(out, name), title)


if __name__ == "__main__":
    main()
