#!/usr/bin/env python3
"""pypaimon's side of tidelake's append-ingest phase: N rows of workload W's columns into an
append-only table (bucket -1), one commit per batch. Prints one JSON line."""
import argparse, json, os, shutil, tempfile, time
import numpy as np, pyarrow as pa, pyarrow.compute as pc
from pypaimon import CatalogFactory, Schema

ap = argparse.ArgumentParser()
ap.add_argument("--rows", type=int, default=5_000_000)
ap.add_argument("--batch", type=int, default=100_000)
a = ap.parse_args()
d = tempfile.mkdtemp(prefix="pypaimon-append-")
schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("k", pa.int64()), ("v", pa.float64()), ("s", pa.string())])
cat = CatalogFactory.create({"warehouse": d})
cat.create_database("db", True)
cat.create_table("db.a", Schema.from_pyarrow_schema(schema, options={"file.format": "parquet"}), False)
rng = np.random.default_rng(42)
gen = 0.0
t0 = time.perf_counter()
for start in range(0, a.rows, a.batch):
    g = time.perf_counter()
    n = min(a.batch, a.rows - start)
    s = pc.binary_join_element_wise(pa.scalar("s-"), pc.utf8_lpad(pc.cast(pa.array(rng.integers(0, 10**13, n)), pa.string()), 14, "0"), "")
    t = pa.Table.from_arrays([pa.array(np.arange(start, start + n), pa.int64()), pa.array(rng.integers(0, 10**6, n)), pa.array(rng.random(n)), s], schema=schema)
    gen += time.perf_counter() - g
    table = cat.get_table("db.a")
    wb = table.new_batch_write_builder(); w = wb.new_write(); c = wb.new_commit()
    w.write_arrow(t); c.commit(w.prepare_commit()); w.close(); c.close()
wall = time.perf_counter() - t0 - gen
print(json.dumps({"engine": "paimon", "phase": "append", "rows": a.rows, "wall_s": round(wall, 3), "rows_per_s": round(a.rows / wall)}))
shutil.rmtree(d, ignore_errors=True)
