#!/usr/bin/env python3
"""The SQL that loads the table of the SQL scan benchmarks (sql-scan-ab.sh,
sql-scan-callgrind.sh): t(id bigint primary key, k int, pad text) with ROWS
rows, k cycling over 1,000 values and a 300-byte pad, 1,000 rows per INSERT.
    python3 bench/sql-scan-load.py ROWS > load.sql"""
import sys

rows = int(sys.argv[1])
print("create table t (id bigint primary key, k int, pad text);")
for b in range(0, rows, 1000):
    vals = ",".join(f"({i},{i * 7 % 1000},'{'x' * 300}')" for i in range(b, min(b + 1000, rows)))
    print(f"insert into t values {vals};")
