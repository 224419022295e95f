cd /work/main
A=/work/bins/quill-8a86f1b; B=/work/bins/quill-condyield
ROUNDS=3 SECS=8 ENGINES=quill bash bench/oltp-ab.sh /tmp/cy/quiet update-non-index,delete,insert 1,4,16 base=$A condyield=$B
P=""; for i in 1 2; do nice -n 19 bash -c "while :; do :; done" & P="$P $!"; done
ROUNDS=3 SECS=8 ENGINES=quill,sqlite bash bench/oltp-ab.sh /tmp/cy/busy update-non-index,delete 1 base=$A condyield=$B
kill $P
echo ALLDONE
# Then, alone on the host:
# ROUNDS=5 SECS=8 ENGINES=quill bash bench/oltp-ab.sh /tmp/cy2/quiet1 update-non-index,delete,insert 1 base=$A condyield=$B
# bash bench/results/oltp-20261203-busy-host/run-fsync.sh $B
