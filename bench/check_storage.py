#!/usr/bin/env python3
"""Check the storage layer's acceptance criteria (issue 3) against the JSON
written by bench/storage-acceptance.sh. Prints a markdown table; exits 1 if
any criterion fails."""
import json
import pathlib
import sys

out = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")


def row(name):
    p = out / f"{name}.json"
    if not p.exists():
        return None
    return json.loads(p.read_text())["rows"][0]


results = []


def check(name, ok, measured):
    results.append((name, ok, measured))


r = row("inorder")
if r:
    check("in-order inserts, 1M rows of 120 B, 100 rows per durable commit: >= 200,000 rows/s",
          r["rows_per_s"] >= 200_000,
          f'{r["rows_per_s"]:.0f} rows/s; {r["page_writes_per_1000_rows"]:.2f} page writes per 1000 rows; '
          f'{r["log_bytes_per_row"]:.1f} log B/row for {r["row_bytes"]} B rows '
          f'({r["log_bytes_per_row"] / r["row_bytes"]:.2f}x); {r["doublewrite_bytes_per_row"]:.1f} doublewrite B/row')
    check("in-order: log bytes per row close to the row size (under 2x)",
          r["log_bytes_per_row"] < 2 * r["row_bytes"],
          f'{r["log_bytes_per_row"] / r["row_bytes"]:.2f}x')
r = row("random")
if r:
    pool = r["stats"]["pool"]
    check("random inserts into a tree 10x the pool: page reads per insert <= 1.2",
          r["page_reads_per_row"] <= 1.2,
          f'{r["page_reads_per_row"]:.3f} reads/insert over the last {r["read_window_rows"]} rows; '
          f'{r["rows_per_s"]:.0f} rows/s; pool {pool["frames"] * pool["page_size"] >> 20} MiB')
r = row("recovery")
if r and r.get("recovery"):
    rec = r["recovery"]
    check("recovery with >= 1 GiB of log to replay: <= 15 s",
          rec["log_bytes"] >= 1 << 30 and rec["seconds"] <= 15,
          f'{rec["log_bytes"] / 2**30:.2f} GiB, {rec["records"]} records in {rec["seconds"]:.2f} s '
          f'({rec["records_per_s"]:.0f} records/s, {rec["mb_per_s"]:.0f} MB/s)')
r = row("stall")
if r:
    check("10-minute run with a small log: no commit stalled over 1 s",
          r["seconds"] >= 590 and r["commit_max_us"] <= 1_000_000,
          f'{r["seconds"]:.0f} s, {r["commits"]} commits, longest {r["commit_max_us"] / 1e3:.1f} ms, '
          f'p99 {r["commit_p99_us"] / 1e3:.1f} ms; {r["urgent_flushes"]} urgent flush rounds, '
          f'{r["throttled"]} writers throttled, {r["checkpoints"]} checkpoints')
t = out / "torture.txt"
if t.exists():
    last = t.read_text().strip().splitlines()[-1] if t.read_text().strip() else ""
    check("quill torture --seconds 600 passes", last.startswith("passed:"), last)

print("| criterion | result | measured |")
print("| --- | --- | --- |")
for name, ok, measured in results:
    print(f"| {name} | {'PASS' if ok else 'FAIL'} | {measured} |")
passed = sum(1 for _, ok, _ in results if ok)
print(f"\n{passed} of {len(results)} criteria pass")
sys.exit(0 if passed == len(results) else 1)
