#!/usr/bin/env python3
"""Copies a table through its changelog: a bounded subscription to table A's changes is applied to
table B with their row kinds (+I, -U, +U, -D), after which B holds the same rows as A.

    python examples/replicate.py                      # works in database example_replicate
    python examples/replicate.py --database scratch

The server is $TIDELAKE_URI (default grpc://127.0.0.1:50051), the user $TIDELAKE_USER (default
tidelake) with password $TIDELAKE_PASSWORD; the options --uri/--user/--password override them.
The example (re)creates the tables <database>.source and <database>.replica.
"""
import argparse
import os

import pyarrow as pa

import tidelake

DDL = ("CREATE TABLE {} (id BIGINT NOT NULL, name STRING, score INT, PRIMARY KEY (id)) "
       "WITH ('bucket' = '2', 'changelog-producer' = 'input')")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--uri", default=os.environ.get("TIDELAKE_URI", "grpc://127.0.0.1:50051"))
    ap.add_argument("--user", default=os.environ.get("TIDELAKE_USER", "tidelake"))
    ap.add_argument("--password", default=os.environ.get("TIDELAKE_PASSWORD"))
    ap.add_argument("--database", default="example_replicate")
    a = ap.parse_args(argv)
    if a.password is None:
        ap.error("set $TIDELAKE_PASSWORD or pass --password")
    src, dst = f"{a.database}.source", f"{a.database}.replica"

    with tidelake.Client(a.uri, user=a.user, password=a.password) as tl:
        tl.execute(f"CREATE DATABASE IF NOT EXISTS {a.database}")
        for t in (src, dst):
            tl.execute(f"DROP TABLE IF EXISTS {t}")
            tl.execute(DDL.format(t))

        # Some history on the source: inserts, upserts, an UPDATE, deletes.
        tl.ingest(src, pa.table({"id": [1, 2, 3, 4], "name": ["ann", "bob", "cy", "dee"], "score": [10, 20, 30, 40]}))
        tl.upsert(src, pa.table({"id": [2, 5], "name": ["bob", "eve"], "score": [25, 50]}))
        tl.execute(f"UPDATE {src} SET score = score + 1 WHERE id = 1")
        tl.delete(src, [3])
        last = tl.sql(f'SELECT max(snapshot_id) AS s FROM {a.database}."source$snapshots"').column("s")[0].as_py()
        print(f"source has snapshots 1..{last}")

        # The changes of snapshots 1..last, streamed into one commit on the replica.
        with tl.subscribe(src, start="from-snapshot", snapshot_id=1, end_snapshot_id=last) as sub:
            written = tl.apply_changes(dst, sub)
        print(f"applied {written} change rows")

        a_rows = tl.sql(f"SELECT * FROM {src} ORDER BY id").to_pylist()
        b_rows = tl.sql(f"SELECT * FROM {dst} ORDER BY id").to_pylist()
        for row in b_rows:
            print("  replica:", row)
        print("replica equals source:", a_rows == b_rows)
        if a_rows != b_rows:
            raise SystemExit(f"source {a_rows} != replica {b_rows}")


if __name__ == "__main__":
    main()
