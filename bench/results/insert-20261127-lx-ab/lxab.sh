#!/bin/bash
R=$1; shift; CLS=$1; shift
for r in $(seq $R); do
 for cl in ${CLS//,/ }; do
  for nb in "$@"; do
   name=${nb%%=*}; bin=${nb#*=}
   rm -rf /tmp/lxab
   out=$($bin bench insert --dir /tmp/lxab --engines quill --clients $cl --txn-sizes big --steps l.i0,l.x --seconds 10 --warmup 2 2>&1)
   echo "$r $cl $name $(echo "$out" | grep ' l.i0 ' | awk '{print $6, $12}') $(echo "$out" | grep ' l.x ' | awk '{print $6, $12}')"
  done
 done
done
