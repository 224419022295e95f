#!/usr/bin/env bash
# ab.sh TAG SECS BIN... : per round, each binary runs 64 and 1024 (perfstat)
tag=$1; secs=$2; shift 2
for round in 1 2; do
  for b in "$@"; do
    bash /work/main/bench/serve-perfstat.sh /tmp/quill-$b /tmp/$tag-$b-$round $secs 64 1024 >/dev/null 2>&1
    python3 -c "
import json
rs=json.load(open('/tmp/$tag-$b-$round/summary.json'))
for r in rs: print('$round $b', r['threads'], r['tps'], r['cpu_us'], r.get('client_us'), r.get('idle_cpus'), r.get('steal_cpus'), r['fdatasync'], r['context-switches'])
print('   ratio', round(rs[1]['tps']/rs[0]['tps'],2))"
  done
done
