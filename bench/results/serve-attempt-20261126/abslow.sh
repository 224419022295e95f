#!/usr/bin/env bash
tag=$1; secs=$2; shift 2
for round in 1 2; do
  for b in "$@"; do
    SERVE_ARGS="--fsync-delay-ms 5" bash /work/main/bench/serve-perfstat.sh /tmp/quill-$b /tmp/$tag-$b-$round $secs 64 1024 >/dev/null 2>&1
    python3 -c "
import json
rs=json.load(open('/tmp/$tag-$b-$round/summary.json'))
for r in rs: print('$round $b', r['threads'], r['tps'], 'cpu', r['cpu_us'], 'steal', r.get('steal_cpus'), 'fsync/txn', r['fdatasync'])
print('   ratio', round(rs[1]['tps']/rs[0]['tps'],2))"
  done
done
