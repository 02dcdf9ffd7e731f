#!/usr/bin/env python3
"""Prints the changes of a tidelake table as they are committed, one line per row.

    python examples/subscribe.py shop.orders                        # current rows, then every change
    python examples/subscribe.py shop.orders --start latest         # only new changes
    python examples/subscribe.py shop.orders --consumer-id printer  # resume where the last run stopped
    python examples/subscribe.py shop.orders --start from-snapshot --snapshot-id 1 --end-snapshot-id 10

The server is $TIDELAKE_URI (default grpc://127.0.0.1:50051), the user $TIDELAKE_USER (default
tidelake) with password $TIDELAKE_PASSWORD; the options --uri/--user/--password override them.
Ctrl-C stops it; with --consumer-id the server has recorded the last completed snapshot.
"""
import argparse
import json
import os
import sys

import tidelake


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("table", help="db.table")
    ap.add_argument("--uri", default=os.environ.get("TIDELAKE_URI", "grpc://127.0.0.1:50051"))
    ap.add_argument("--user", default=os.environ.get("TIDELAKE_USER", "tidelake"))
    ap.add_argument("--password", default=os.environ.get("TIDELAKE_PASSWORD"))
    ap.add_argument("--start", default="default", choices=sorted(tidelake.START_MODES))
    ap.add_argument("--snapshot-id", type=int)
    ap.add_argument("--timestamp-millis", type=int)
    ap.add_argument("--consumer-id")
    ap.add_argument("--end-snapshot-id", type=int)
    ap.add_argument("--columns", help="comma-separated projection")
    ap.add_argument("--filter", help="SQL predicate over the table's columns")
    a = ap.parse_args(argv)
    if a.password is None:
        ap.error("set $TIDELAKE_PASSWORD or pass --password")

    sub = tidelake.subscribe(
        a.uri, a.table, user=a.user, password=a.password, start=a.start, snapshot_id=a.snapshot_id,
        timestamp_millis=a.timestamp_millis, consumer_id=a.consumer_id, end_snapshot_id=a.end_snapshot_id,
        columns=a.columns.split(",") if a.columns else None, filter=a.filter)
    columns = ", ".join(f"{f.name} {f.type}" for f in sub.schema)
    print(f"# {a.table} at {a.uri}: {columns}", file=sys.stderr)
    try:
        with sub:
            for batch in sub:
                for row in batch.to_pylist():
                    kind = row.pop(tidelake.ROW_KIND_COLUMN)
                    print(f"snapshot {sub.current_snapshot_id} {kind} {json.dumps(row, default=str)}", flush=True)
    except KeyboardInterrupt:
        pass
    print(f"# last completed snapshot: {sub.last_snapshot_id}", file=sys.stderr)


if __name__ == "__main__":
    main()
