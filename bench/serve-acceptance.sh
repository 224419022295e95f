#!/usr/bin/env bash
# Issue 14's acceptance runs for `quill serve`, recorded in
# bench/results/serve-<date>/ (JSON per run plus host.json):
#  1. sysbench 1.0, the eight OLTP tests at 1, 16, 64 and 256 threads,
#     10 s each, quill check afterwards (sysbench.json);
#  2. oltp_update_non_index for 60 s at 64 and at 1,024 connections,
#     from sysbench (a thread per connection) and from pgbench (every
#     connection on one client thread) in turn (connections.json):
#     throughput at 1,024 against 64, per client. Needs pgbench
#     (Debian's postgresql-15).
#
#   bench/serve-acceptance.sh [OUT_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/host.sh
out="${1:-bench/results/serve-$(date -u +%Y%m%d)}"
mkdir -p "$out"
# 1,024 client connections and as many server sockets.
ulimit -n 65536 2>/dev/null || ulimit -n 8192
cargo build --release -p quill-cli
host_start
python3 bench/sysbench.py --quill target/release/quill --threads 1,16,64,256 --time 10 \
  --table-size 10000 --out "$out/sysbench.json" | tee "$out/sysbench.txt"
python3 bench/sysbench.py --quill target/release/quill --tests oltp_update_non_index \
  --threads 64,1024 --time 60 --table-size 10000 --clients sysbench,pgbench \
  --out "$out/connections.json" | tee "$out/connections.txt"
host_end "$out"
{ nproc; uname -r; df -h . | tail -1; } > "$out/machine.txt"
