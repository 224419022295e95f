# Interleaved A/B of the range reads' consumer (run 2026-12-03 11:00 UTC):
# "head" is 77544c5 (each value black_boxed), "rowsum" the same engine
# with the RowSum consumer (commit after 77544c5). Both engines, one
# thread, read-only, 8 x 100,000 rows, 10 s after 1 s warm-up, 3 rounds.
for r in 1 2 3; do for b in head rowsum; do
/work/bins/quill-$b bench oltp --dir /tmp/ab2/d --engines quill,sqlite --tables 8 --table-size 100000 --threads 1 --shapes read-only --seconds 10 --warmup 1 --json /tmp/ab2/$b-$r.json > /tmp/ab2/$b-$r.txt 2>&1
grep -E "^(quill|sqlite) " /tmp/ab2/$b-$r.txt | sed "s/^/$r $b /" | awk "{print \$1,\$2,\$3,\$4,\$6,\$12}"  # round build engine shape tps p95
done; done
rm -rf /tmp/ab2/d
