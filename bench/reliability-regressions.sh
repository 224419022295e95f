#!/usr/bin/env bash
# Issue 13's user-level reproductions, run against a `quill` binary: the
# closed pipe (item 7), inspection that writes (item 5), a second process
# on a live database (item 2), a benchmark pointed at a database (item 4),
# 4 KiB of damage in the middle of the log after kill -9 (item 3), and a
# missing tablespace (item 9). Prints what each did; run it with the
# binary from before the fixes and with today's to compare.
#   bash bench/reliability-regressions.sh QUILL
set -uo pipefail
Q=$(realpath "${1:?usage: reliability-regressions.sh QUILL}")
W=$(mktemp -d /var/tmp/quill-regress.XXXXXX)
trap 'rm -rf "$W"' EXIT
cd "$W"
say() { printf '%s\n' "$*"; }
digest() { find "$1" -type f ! -name LOCK -exec md5sum {} + | sort -k2 | md5sum | cut -c1-12; }
# A database, closed cleanly: 4 tables x 20k rows (bench txn's, without
# the mark that makes a directory a benchmark's own: a user's database).
make_db() { "$Q" bench txn --dir "$1" --tables 4 --table-size 20000 --threads 1 \
  --workload update-non-index --seconds 1 --warmup 0.2 > /dev/null 2>&1
  rm -f "$1/.quill-bench"; }

say "== item 7: quill dump DB | head -1 (a log of many records: its output outlasts the pipe)"
"$Q" bench txn --dir db7 --tables 1 --table-size 20000 --threads 1 \
  --workload update-non-index --seconds 30 --warmup 0.2 > /dev/null 2>&1 &
bg=$!
sleep 8
kill -9 $bg; wait $bg 2> /dev/null
"$Q" dump db7 --limit 1000000 2> err7 | head -1 > /dev/null
say "dump exit ${PIPESTATUS[0]}; stderr: $(head -c 200 err7 | tr '\n' ' ')"
"$Q" status db7 2> err7 | head -1 > /dev/null
say "status exit ${PIPESTATUS[0]}; stderr: $(head -c 200 err7 | tr '\n' ' ')"

say "== item 5: quill check DB changes files?"
make_db db5
before=$(digest db5)
"$Q" check db5 > out5 2>&1; rc=$?
after=$(digest db5)
say "exit $rc; $(tail -1 out5); files $([ "$before" = "$after" ] && echo unchanged || echo CHANGED)"

say "== item 2: quill check DB while another process has it open"
"$Q" bench txn --dir db2 --tables 1 --table-size 20000 --threads 1 \
  --workload update-non-index --seconds 8 --warmup 0.2 > /dev/null 2>&1 &
bg=$!
sleep 5
"$Q" check db2 > out2 2>&1; rc=$?
say "exit $rc; $(tail -1 out2 | head -c 300)"
wait $bg

say "== item 4: quill bench commit --dir DB"
make_db db4
"$Q" bench commit --dir db4 --clients 1 --seconds 0.2 --warmup 0.1 > out4 2>&1; rc=$?
say "bench exit $rc; $(tail -1 out4 | head -c 200)"
"$Q" check db4 > out4b 2>&1
say "check afterwards: $(tail -2 out4b | tr '\n' ' ' | head -c 300)"

say "== item 3: 4 KiB overwritten mid-log after kill -9"
"$Q" bench txn --dir db3 --tables 1 --table-size 20000 --threads 1 \
  --workload update-non-index --seconds 30 --warmup 0.2 > /dev/null 2>&1 &
bg=$!
sleep 12
kill -9 $bg; wait $bg 2> /dev/null
log=db3/log/log.000
read ck end < <("$Q" status db3 --json 2>/dev/null | python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["checkpoint_lsn"], d["end_lsn"])')
say "log after the kill: checkpoint LSN $ck, end LSN $end"
cp -r db3 db3-intact
"$Q" check --repair db3-intact > out3i 2>&1 || "$Q" check db3-intact > out3i 2>&1
say "the same log undamaged: $(grep -o 'checked.*' out3i | head -1)"
mid=$(( (ck + (end - ck) / 2) / 4096 * 4096 ))
off=$(( 16384 + mid ))
head -c 4096 /dev/urandom | dd of=$log bs=1 seek=$off conv=notrunc status=none
"$Q" check --repair db3 > out3 2>&1 || "$Q" check db3 > out3 2>&1
say "with 4 KiB overwritten at LSN $mid: $(tail -2 out3 | tr '\n' ' ' | head -c 500)"

say "== item 9: data.qdb moved away"
make_db db9
mv db9/data.qdb moved.qdb
"$Q" check db9 > out9 2>&1
say "check: $(tail -1 out9 | head -c 300)"
"$Q" check --repair db9 > out9b 2>&1
say "check --repair: $(tail -1 out9b | head -c 300)"
say "data.qdb recreated: $([ -e db9/data.qdb ] && echo YES || echo no)"
