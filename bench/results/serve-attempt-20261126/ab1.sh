#!/usr/bin/env bash
# ab1.sh TAG TEST SECS THREADS BIN... : rounds of each binary at one thread count
tag=$1; test=$2; secs=$3; n=$4; shift 4
for round in 1 2; do
  for b in "$@"; do
    TEST=$test bash /work/main/bench/serve-perfstat.sh /tmp/quill-$b /tmp/$tag-$b-$round $secs $n >/dev/null 2>&1
    python3 -c "
import json
for r in json.load(open('/tmp/$tag-$b-$round/summary.json')): print('$round $b $test', r['threads'], r['tps'], 'cpu', r['cpu_us'], 'client', r.get('client_us'), 'steal', r.get('steal_cpus'), 'cs', r['context-switches'], 'yield', r['sched_yield'], 'futex', r['futex'])"
  done
done
