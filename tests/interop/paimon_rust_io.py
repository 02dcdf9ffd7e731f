#!/usr/bin/env python3
"""paimon-rust (`pypaimon-rust` 0.4, Apache Paimon's Rust implementation) as a third implementation of
the format, driven by tidelake's interop tests. Its primary-key files are thin: they hold no `_KEY_`
columns (Paimon's `data-file.thin-mode`), the keys being read from the value columns.

Commands (all print one JSON document on stdout):
  write WH TABLE ROWS_JSON      one batch write + commit of rows (a list of objects; BIGINT and STRING
                                columns, as the tests use)
  read WH TABLE                 the latest snapshot's rows: {"columns": [...], "rows": [[...], ...]}
  files WH TABLE                the column names of each data file: {"<file>": [names]}
"""
import glob, json, os, sys

import pyarrow as pa
import pyarrow.parquet as pq
from pypaimon_rust.datafusion import PaimonCatalog

ARROW = {"BIGINT": pa.int64(), "INT": pa.int32(), "STRING": pa.string()}


def table(wh, name):
    return PaimonCatalog({"warehouse": os.path.abspath(wh)}).get_table(name)


def main():
    cmd, wh, name = sys.argv[1], sys.argv[2], sys.argv[3]
    if cmd == "write":
        rows = json.loads(sys.argv[4])
        t = table(wh, name)
        fields = []
        for f in t.schema().fields():
            ty = f.field_type()
            base = ty.replace(" NOT NULL", "")
            fields.append(pa.field(f.name(), ARROW[base], nullable="NOT NULL" not in ty))
        schema = pa.schema(fields)
        batch = pa.record_batch([pa.array([r.get(f.name) for r in rows], f.type) for f in schema],
                                schema=schema)
        wb = t.new_batch_write_builder()
        w = wb.new_write()
        w.write_arrow(batch)
        wb.new_commit().commit(w.prepare_commit())
        print(json.dumps("ok"))
    elif cmd == "read":
        rb = table(wh, name).new_read_builder()
        batches = rb.new_read().read(rb.new_scan().plan().splits())
        t = pa.Table.from_batches(batches) if batches else None
        print(json.dumps({"columns": t.column_names if t else [],
                          "rows": [list(r.values()) for r in t.to_pylist()] if t else []}))
    elif cmd == "files":
        d = os.path.join(wh, name.replace(".", ".db/", 1))
        print(json.dumps({os.path.basename(f): pq.read_schema(f).names
                          for f in glob.glob(os.path.join(d, "**", "*.parquet"), recursive=True)}))
    else:
        sys.exit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
