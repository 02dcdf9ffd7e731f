#!/usr/bin/env python3
"""Writes data frames into tidelake tables: create, append, replace, upsert, delete, and change rows
with explicit row kinds (+I, -U, +U, -D). Every call is one commit.

    python examples/ingest.py                      # works in database example_ingest
    python examples/ingest.py --database scratch

The server is $TIDELAKE_URI (default grpc://127.0.0.1:50051), the user $TIDELAKE_USER (default
tidelake) with password $TIDELAKE_PASSWORD; the options --uri/--user/--password override them.
The example (re)creates the tables <database>.events and <database>.stock. It uses pandas for one
step when installed, pyarrow otherwise.
"""
import argparse
import os

import pyarrow as pa

import tidelake


def show(tl, table, order="id"):
    rows = tl.sql(f"SELECT * FROM {table} ORDER BY {order}").to_pylist()
    print(f"  {table}: {len(rows)} rows")
    for row in rows:
        print("    ", row)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--uri", default=os.environ.get("TIDELAKE_URI", "grpc://127.0.0.1:50051"))
    ap.add_argument("--user", default=os.environ.get("TIDELAKE_USER", "tidelake"))
    ap.add_argument("--password", default=os.environ.get("TIDELAKE_PASSWORD"))
    ap.add_argument("--database", default="example_ingest")
    a = ap.parse_args(argv)
    if a.password is None:
        ap.error("set $TIDELAKE_PASSWORD or pass --password")
    events, stock = f"{a.database}.events", f"{a.database}.stock"

    with tidelake.Client(a.uri, user=a.user, password=a.password) as tl:
        tl.execute(f"CREATE DATABASE IF NOT EXISTS {a.database}")
        for t in (events, stock):
            tl.execute(f"DROP TABLE IF EXISTS {t}")

        # An append table, created from the first frame's schema.
        first = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "kind": ["click", "view", "click"]})
        print("create:", tl.ingest(events, first, mode="create"), "rows")
        try:
            import pandas as pd

            more = pd.DataFrame({"id": [4, 5], "kind": ["view", "buy"]})
        except ImportError:
            more = pa.table({"id": pa.array([4, 5], pa.int64()), "kind": ["view", "buy"]})
        print(f"append ({type(more).__module__.split('.')[0]}):", tl.ingest(events, more), "rows")
        show(tl, events)
        print("replace:", tl.ingest(events, pa.table({"id": pa.array([10], pa.int64()), "kind": ["reset"]}),
                                    mode="replace"), "row")
        show(tl, events)

        # A primary-key table: created by the first upsert (table options ride along).
        rows = pa.table({"sku": ["a", "b", "c"], "qty": pa.array([10, 20, 30], pa.int32()),
                         "price": [1.5, 2.5, 3.5]})
        print("upsert (creates):", tl.upsert(stock, rows, primary_key="sku",
                                            options={"bucket": 1, "changelog-producer": "input"}), "rows")
        print("primary key:", tl.primary_key(stock))
        print("upsert:", tl.upsert(stock, [{"sku": "b", "qty": 21, "price": 2.75}, {"sku": "d", "qty": 1, "price": 9.0}]),
              "rows")
        show(tl, stock, "sku")
        print("delete:", tl.delete(stock, ["a", "c"]), "keys")
        show(tl, stock, "sku")

        # Change rows: the _row_kind column says what each row does; it is not stored.
        changes = pa.table({
            "_row_kind": ["-U", "+U", "-D", "+I"],
            "sku": ["b", "b", "d", "e"],
            "qty": pa.array([21, 22, 1, 5], pa.int32()),
            "price": [2.75, 2.75, 9.0, 0.5],
        })
        print("apply_changes:", tl.apply_changes(stock, changes), "change rows")
        show(tl, stock, "sku")

        # A bad row kind fails the whole call; nothing is written.
        try:
            tl.apply_changes(stock, pa.table({"_row_kind": ["+I", "oops"], "sku": ["x", "y"],
                                              "qty": pa.array([1, 2], pa.int32()), "price": [0.0, 0.0]}))
        except tidelake.InvalidArgumentError as e:
            print("refused:", e)
        show(tl, stock, "sku")


if __name__ == "__main__":
    main()
