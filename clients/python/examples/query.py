#!/usr/bin/env python3
"""Runs SQL on a tidelake server and reads the results as pyarrow, pandas and polars.

    python examples/query.py                      # works in database example_query
    python examples/query.py --database scratch

The server is $TIDELAKE_URI (default grpc://127.0.0.1:50051), the user $TIDELAKE_USER (default
tidelake) with password $TIDELAKE_PASSWORD; the options --uri/--user/--password override them.
The example (re)creates the table <database>.orders, so it runs against any server.
"""
import argparse
import os

import tidelake


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--uri", default=os.environ.get("TIDELAKE_URI", "grpc://127.0.0.1:50051"))
    ap.add_argument("--user", default=os.environ.get("TIDELAKE_USER", "tidelake"))
    ap.add_argument("--password", default=os.environ.get("TIDELAKE_PASSWORD"))
    ap.add_argument("--database", default="example_query")
    a = ap.parse_args(argv)
    if a.password is None:
        ap.error("set $TIDELAKE_PASSWORD or pass --password")
    t = f"{a.database}.orders"

    with tidelake.Client(a.uri, user=a.user, password=a.password) as tl:
        # DDL and DML: execute() returns the number of rows written.
        tl.execute(f"CREATE DATABASE IF NOT EXISTS {a.database}")
        tl.execute(f"DROP TABLE IF EXISTS {t}")
        tl.execute(f"CREATE TABLE {t} (id BIGINT NOT NULL, item STRING, qty INT, dt STRING, PRIMARY KEY (id, dt)) "
                   "PARTITIONED BY (dt) WITH ('bucket' = '2')")
        n = tl.execute(f"INSERT INTO {t} VALUES (1, 'apple', 3, '2024-01-01'), (2, 'pear', 1, '2024-01-01'), "
                       "(3, 'plum', 7, '2024-01-02')")
        print(f"inserted {n} rows")
        print(f"updated {tl.execute(f'UPDATE {t} SET qty = qty + 10 WHERE item = $1', ('pear',))} row")

        # Queries: a pyarrow.Table by default.
        table = tl.sql(f"SELECT * FROM {t} ORDER BY id")
        print(f"arrow: {table.num_rows} rows, schema {table.schema.names}")
        for row in table.to_pylist():
            print("  ", row)

        # The same rows as pandas and polars (when installed).
        for output in ("pandas", "polars"):
            try:
                frame = tl.sql(f"SELECT dt, sum(qty) AS qty FROM {t} GROUP BY dt ORDER BY dt", output=output)
            except ImportError:
                print(f"{output}: not installed")
                continue
            print(f"{output}:")
            print(frame)

        # Parameters are $1, $2, ...
        cheap = tl.sql(f"SELECT id, item FROM {t} WHERE qty < $1 ORDER BY id", (5,))
        print("qty < 5:", cheap.to_pylist())

        # System tables: snapshots, and the changelog as SQL.
        snaps = tl.sql(f'SELECT snapshot_id, commit_kind FROM {a.database}."orders$snapshots" ORDER BY snapshot_id')
        print("snapshots:", snaps.to_pylist())


if __name__ == "__main__":
    main()
