#!/usr/bin/env python3
"""End-to-end checks of `quill serve` with Python's PostgreSQL drivers.

Run against a server on 127.0.0.1:PORT (tests/e2e/run.sh starts one):
  * psycopg2 in autocommit mode sending the Insert Benchmark's statements
    (schema, multi-row inserts, the delete with its subquery, SQL-level
    PREPARE/EXECUTE of the range and point queries), as iibench.py does;
  * psycopg 3 with server-side parameters (extended protocol, binary
    parameters, a statement prepared after five runs) and transactions;
  * COPY FROM STDIN and TO STDOUT through psycopg 3's copy and psycopg2's
    copy_expert (text and CSV).
Each check asserts what it got; the first failure ends the run with
exit status 1 and says what differed.
"""

import datetime
import sys


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def insert_benchmark(port):
    import psycopg2

    conn = psycopg2.connect(dbname="ib", host="127.0.0.1", port=port, user="root", password="pw")
    conn.set_session(autocommit=True)
    cur = conn.cursor()
    cur.execute("select pg_backend_pid()")
    check(isinstance(cur.fetchone()[0], int), "pg_backend_pid() is an integer")
    cur.execute("drop table if exists pi1")
    cur.execute(
        "create table pi1 ( transactionid bigserial primary key, dateandtime timestamp without time zone, "
        "cashregisterid int not null, customerid int not null, productid int not null, price int not null, "
        "data varchar(4000)  )  "
    )
    cur.execute("alter sequence pi1_transactionid_seq cache 1000")
    now = datetime.datetime(2026, 11, 24, 12, 0, 0)
    for batch in range(20):
        rows = []
        for i in range(100):
            n = batch * 100 + i
            rows.append(
                "('%s',%d,%d,%d,%.2f,'%s')"
                % (now.strftime("%Y-%m-%d %H:%M:%S"), n % 1000, n % 100000, n % 10000, float(n % 500), "a" * 10 + str(n))
            )
        cur.execute(
            "insert into pi1 (dateandtime,cashregisterid,customerid,productid,price,data) values " + ",\n".join(rows)
        )
        check(cur.rowcount == 100, f"insert rowcount {cur.rowcount}")
    for ddl in [
        "create index pi1_marketsegment on pi1 (productid, customerid, price) ",
        "create index pi1_registersegment on pi1 (cashregisterid, customerid, price) ",
        "create index pi1_pdc on pi1 (price, dateandtime, customerid) ",
    ]:
        cur.execute(ddl)
    cur.execute("select min(transactionid) from pi1")
    lo = cur.fetchone()[0]
    check(lo == 1, f"min(transactionid) = {lo}")
    cur.execute(
        "delete from pi1 where transactionid in (select transactionid from pi1 where transactionid >= %d "
        "order by transactionid asc limit 50)" % lo
    )
    check(cur.rowcount == 50, f"delete rowcount {cur.rowcount}")
    cur.execute("select count(*) from pi1")
    check(cur.fetchone()[0] == 1950, "rows after the delete")

    q = conn.cursor()
    q.execute("select pg_backend_pid()")
    q.execute(
        "PREPARE market_query_ps (int) as SELECT productid, customerid, price FROM pi1 "
        "WHERE (productid >= $1) ORDER BY productid, customerid, price LIMIT 10"
    )
    q.execute(
        "PREPARE register_query_ps (int) as SELECT cashregisterid, customerid, price FROM pi1 "
        "WHERE (cashregisterid > $1) ORDER BY cashregisterid, customerid, price LIMIT 10"
    )
    q.execute(
        "PREPARE pdc_query_ps (int) as SELECT price, dateandtime, customerid FROM pi1 "
        "WHERE (price >= $1) ORDER BY price, dateandtime, customerid LIMIT 10"
    )
    q.execute(
        "PREPARE pk_query_ps (int,int,int,int,int,int,int,int,int,int) as SELECT transactionid, productid, data "
        "FROM pi1 WHERE transactionid in ($1,$2,$3,$4,$5,$6,$7,$8,$9,$10)"
    )
    q.execute("execute pdc_query_ps (251)")
    rows = q.fetchall()
    check(len(rows) == 10, f"pdc_query_ps rows: {len(rows)}")
    check([r[0] for r in rows] == sorted(r[0] for r in rows), "pdc rows in price order")
    check(all(r[0] >= 251 for r in rows), "pdc rows at or above the bound")
    check(isinstance(rows[0][1], datetime.datetime), f"a timestamp comes back as datetime: {rows[0][1]!r}")
    q.execute("execute market_query_ps (1990)")
    rows = q.fetchall()
    check([r[0] for r in rows] == list(range(1990, 2000)), f"market_query_ps: {rows}")
    q.execute("execute register_query_ps (990)")
    rows = q.fetchall()
    check([r[0] for r in rows] == [991, 991, 992, 992, 993, 993, 994, 994, 995, 995], f"register_query_ps: {rows}")
    q.execute("execute pk_query_ps (2948,1956,779,100,60,51,50,1,2,3)")
    rows = q.fetchall()
    check(sorted(r[0] for r in rows) == [51, 60, 100, 779, 1956], f"pk_query_ps: {[r[0] for r in rows]}")
    q.execute("select max(transactionid) from pi1")
    check(q.fetchone()[0] == 2000, "max(transactionid)")
    # Errors carry their SQLSTATE and leave the connection usable.
    try:
        cur.execute("select * from no_such_table")
        check(False, "a missing table is an error")
    except psycopg2.Error as e:
        check(e.pgcode == "42P01", f"missing table: {e.pgcode}")
    cur.execute("select 1")
    check(cur.fetchone() == (1,), "usable after an error")
    cur.execute("drop table pi1")
    conn.close()
    print("psycopg2 (Insert Benchmark statements): ok")


def psycopg3(port):
    import psycopg

    with psycopg.connect(f"host=127.0.0.1 port={port} dbname=app user=app", autocommit=True) as conn:
        conn.execute("drop table if exists p3")
        conn.execute("create table p3 (id int primary key, name varchar(40) not null, score double precision, "
                     "ok boolean, at timestamp, blob bytea)")
        at = datetime.datetime(2026, 11, 24, 13, 14, 15, 123456)
        for i in range(8):  # past prepare_threshold: a named statement
            conn.execute(
                "insert into p3 (id, name, score, ok, at, blob) values (%s, %s, %s, %s, %s, %s)",
                (i, f"n{i}", i * 1.5, i % 2 == 0, at, bytes([i, 255])),
            )
        row = conn.execute("select id, name, score, ok, at, blob from p3 where id = %s", (3,)).fetchone()
        check(row == (3, "n3", 4.5, False, at, bytes([3, 255])), f"row 3: {row!r}")
        rows = conn.execute("select id from p3 where id between %s and %s order by id", (2, 5)).fetchall()
        check([r[0] for r in rows] == [2, 3, 4, 5], f"between: {rows}")
    with psycopg.connect(f"host=127.0.0.1 port={port} dbname=app user=app") as conn:
        # Autocommit off: psycopg sends BEGIN, then COMMIT or ROLLBACK.
        with conn.transaction():
            conn.execute("update p3 set score = score + %s where id = %s", (10, 1))
        check(conn.execute("select score from p3 where id = 1").fetchone()[0] == 11.5, "committed update")
        conn.commit()
        try:
            with conn.transaction():
                conn.execute("update p3 set score = 0 where id = 1")
                conn.execute("insert into p3 (id, name) values (1, 'dup')")
            check(False, "duplicate key is an error")
        except psycopg.errors.UniqueViolation:
            pass
        check(conn.execute("select score from p3 where id = 1").fetchone()[0] == 11.5, "rolled back update")
        conn.commit()
        conn.execute("drop table p3")
        conn.commit()
    print("psycopg 3 (extended protocol, binary parameters, transactions): ok")


def copy(port):
    """COPY FROM STDIN and TO STDOUT with both drivers' copy APIs."""
    import io

    import psycopg
    import psycopg2

    with psycopg.connect(f"host=127.0.0.1 port={port} dbname=app user=app", autocommit=True) as conn:
        conn.execute("create table cp (id bigint primary key, name varchar(30), score double precision)")
        cur = conn.cursor()
        with cur.copy("copy cp (id, name, score) from stdin") as cp:
            for k in range(5000):
                cp.write_row((k, f"name {k}" if k % 7 else None, k / 8))
        check(cur.rowcount == 5000, f"psycopg 3 COPY row count {cur.rowcount}")
        n, nulls = conn.execute("select count(*), count(*) - count(name) from cp").fetchone()
        check((n, nulls) == (5000, 715), f"copied rows {(n, nulls)}")
        with cur.copy("copy (select id, name from cp where id < 3 order by id) to stdout") as cp:
            rows = list(cp.rows())
        check(rows == [("0", None), ("1", "name 1"), ("2", "name 2")], f"COPY TO rows {rows}")
    conn2 = psycopg2.connect(dbname="app", host="127.0.0.1", port=port, user="app")
    c2 = conn2.cursor()
    c2.copy_expert("copy cp (id, name) from stdin with (format csv)", io.StringIO("9000,\"a, b\"\n9001,c\n"))
    conn2.commit()
    out = io.StringIO()
    c2.copy_expert("copy (select id, name from cp where id >= 9000 order by id) to stdout with (format csv, header)", out)
    check(out.getvalue() == 'id,name\n9000,"a, b"\n9001,c\n', f"psycopg2 COPY TO {out.getvalue()!r}")
    c2.execute("drop table cp")
    conn2.commit()
    conn2.close()
    print("COPY (psycopg 3 copy, psycopg2 copy_expert): ok")


def main():
    port = int(sys.argv[1])
    insert_benchmark(port)
    psycopg3(port)
    copy(port)


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print(f"FAILED: {e}", file=sys.stderr)
        sys.exit(1)
