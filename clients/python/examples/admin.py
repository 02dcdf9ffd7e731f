#!/usr/bin/env python3
"""Calls every administrative action of a tidelake server on a small table: table info, compaction
(with progress), tags, rollback, snapshot expiry, orphan-file listing and ALTER TABLE.

    python examples/admin.py                      # works in database example_admin
    python examples/admin.py --database scratch

The server is $TIDELAKE_URI (default grpc://127.0.0.1:50051), the user $TIDELAKE_USER (default
tidelake) with password $TIDELAKE_PASSWORD; the options --uri/--user/--password override them.
The example (re)creates the table <database>.accounts, so it runs against any server.
"""
import argparse
import json
import os

import tidelake


def cleanup(result):
    """A cleanup result ({'snapshots': [...], 'files': [...]}) in one line."""
    return f"snapshots {result['snapshots']}, {len(result['files'])} files"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--uri", default=os.environ.get("TIDELAKE_URI", "grpc://127.0.0.1:50051"))
    ap.add_argument("--user", default=os.environ.get("TIDELAKE_USER", "tidelake"))
    ap.add_argument("--password", default=os.environ.get("TIDELAKE_PASSWORD"))
    ap.add_argument("--database", default="example_admin")
    a = ap.parse_args(argv)
    if a.password is None:
        ap.error("set $TIDELAKE_PASSWORD or pass --password")
    t = f"{a.database}.accounts"

    with tidelake.Client(a.uri, user=a.user, password=a.password) as tl:
        tl.execute(f"CREATE DATABASE IF NOT EXISTS {a.database}")
        tl.execute(f"DROP TABLE IF EXISTS {t}")
        # write-only: the writes never compact, so the compaction below has work to do.
        tl.execute(f"CREATE TABLE {t} (id BIGINT NOT NULL, owner STRING, balance BIGINT, PRIMARY KEY (id)) "
                   "WITH ('bucket' = '1', 'write-only' = 'true')")
        for i in range(1, 4):
            tl.execute(f"INSERT INTO {t} VALUES ({i}, 'owner{i}', {i * 100})")
        admin = tl.admin

        info = admin.table_info(t)
        print(f"table_info: snapshot {info['latest_snapshot_id']}, {info['total_rows']} rows, "
              f"primary key {json.loads(info['schema_json'])['primaryKeys']}")
        for b in info["buckets"]:
            print(f"  bucket {b['bucket']}: {b['files']} files in {b['sorted_runs']} sorted runs, {b['rows']} rows")

        # A long operation (compact, expire_snapshots, remove_orphan_files) reports its progress to
        # a callback; returning False from it would cancel the operation (CancelledError).
        reports = []
        print("compact:", admin.compact(t, full=True, progress=reports.append))
        last = reports[-1]
        print(f"  last progress report: {last.phase} {last.done}/{last.total}, {last.files} file(s) written")
        print("  sorted runs after:", [b["sorted_runs"] for b in admin.table_info(t)["buckets"]])
        print("  operations running now:", [(o.action, o.table) for o in admin.list_operations()])

        print("create_tag:", admin.create_tag(t, "after-two", snapshot_id=2))
        print("list_tags:", admin.list_tags(t))
        print("rollback: removed", cleanup(admin.rollback(t, tag="after-two")))
        print("  rows now:", tl.sql(f"SELECT id, balance FROM {t} ORDER BY id").to_pylist())
        print("delete_tag: removed", cleanup(admin.delete_tag(t, "after-two")))

        tl.execute(f"INSERT INTO {t} VALUES (9, 'late', 900)")
        print("expire_snapshots: removed", cleanup(admin.expire_snapshots(t, retain_min=1, retain_max=1)))
        # A dry run (delete=False) of the files older than a day that no snapshot references.
        print("remove_orphan_files (dry run): would remove", cleanup(admin.remove_orphan_files(t)))

        info = admin.alter_table(t, "ADD COLUMN note STRING")
        print(f"alter_table: schema {info['schema_id']}, columns "
              f"{[f['name'] for f in json.loads(info['schema_json'])['fields']]}")
        print("  rows:", tl.sql(f"SELECT * FROM {t} ORDER BY id").to_pylist())

        try:
            admin.alter_table(t, "DROP COLUMN id")
        except tidelake.InvalidArgumentError as e:
            print("refused:", e)


if __name__ == "__main__":
    main()
