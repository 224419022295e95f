# The interleaved A/B of the range reads' consumer, as it ran on
# 2026-12-03 10:22-10:26 UTC: "head" built from 77544c5 (each value
# black_boxed), "rowsum" from the same tree with the RowSum consumer
# (committed as 553530a). Both engines, one thread, read-only,
# 8 x 100,000 rows, 10 s after 1 s warm-up, 3 rounds. Its own printout
# (round, build, engine, shape, TPS, p95; the grep also caught each run's
# header line) is not kept; ab.txt was made afterwards from the rounds'
# tables by the second loop below.
for r in 1 2 3; do for b in head rowsum; do
/work/bins/quill-$b bench oltp --dir /tmp/ab2/d --engines quill,sqlite --tables 8 --table-size 100000 --threads 1 --shapes read-only --seconds 10 --warmup 1 --json /tmp/ab2/$b-$r.json > /tmp/ab2/$b-$r.txt 2>&1
grep -E "^(quill|sqlite) " /tmp/ab2/$b-$r.txt | sed "s/^/$r $b /" | awk '{print $1,$2,$3,$4,$6,$12}'
done; done
rm -rf /tmp/ab2/d
# ab.txt (run in this directory):
{ echo "# round build engine tps p50_us p99_us cpu_us_per_tx (columns of NAME-ROUND.txt)"
  for r in 1 2 3; do for b in head rowsum; do
    grep -E "^(quill|sqlite) +read-only" $b-$r.txt | awk -v r=$r -v b=$b '{print r, b, $1, $4, $9, $11, $12}'
  done; done; } > ab.txt
# medians.txt: python3 bench/oltp-ab-medians.py bench/results/oltp-20261203-consumer-ab
