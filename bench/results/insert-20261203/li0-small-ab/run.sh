# l.i0 with small transactions (10 rows per commit) at 1 client, Quill and SQLite,
# 8a86f1b (the unconditional yield) against 37f6437, builds interleaved per round.
for r in 1 2 3; do
  for nb in base=/work/bins/quill-8a86f1b condyield=/work/bins/quill-condyield; do
    name=${nb%%=*}; bin=${nb#*=}
    rm -rf /tmp/li0ab/db
    "$bin" bench insert --dir /tmp/li0ab/db --engines quill,sqlite --clients 1 --txn-sizes small \
      --steps l.i0 --total-rows 2000000 --seconds 10 --warmup 2 > /tmp/li0ab/$name-$r.txt 2>&1
    grep -E "^(quill|sqlite) +small +1 l.i0" /tmp/li0ab/$name-$r.txt | sed "s/^/round $r $name: /"
  done
done
rm -rf /tmp/li0ab/db
