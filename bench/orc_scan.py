#!/usr/bin/env python3
"""A full scan of an ORC table through ADBC beside pyarrow's ORC reader decoding the same files.

One append table of workload W's shape (id BIGINT NOT NULL, k BIGINT, v DOUBLE, s STRING) with
'file.format' = 'orc' is ingested into `tidelake serve` through ADBC; pyarrow's ORC reader
(`pyarrow.orc.ORCFile(...).read()`, in-process) then decodes the very ORC files the table holds.
Each peer reads every row and column --repeat times, alternating which goes first; the figure is
the median wall time, and the ratio is pyarrow's time / tidelake's (above 1.0: tidelake is faster).
tidelake's time includes the Flight SQL round trips and the transfer of every row to the client.

Usage:
  .venv/bin/python bench/orc_scan.py [--rows 5000000] [--repeat 5] [--bin target/release/tidelake]
Output: a line of figures, then one JSON line.
"""
import argparse, glob, json, os, statistics, sys, tempfile, time

import numpy as np
import pyarrow as pa
import pyarrow.orc as orc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from flight_bench import PASSWORD, USER, Proc, adbc_connect, batches_for  # noqa: E402


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--batch", type=int, default=262_144)
    ap.add_argument("--bin", default=None)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if a.bin is None:
        rel = os.path.join(repo, "target/release/tidelake")
        a.bin = rel if os.path.exists(rel) else os.path.join(repo, "target/debug/tidelake")
    wh = os.path.join(tempfile.mkdtemp(prefix="tidelake-orc-"), "warehouse")
    os.makedirs(wh)
    rng = np.random.default_rng(a.seed)
    data = pa.Table.from_batches(batches_for(rng, np.arange(a.rows, dtype=np.int64), a.batch))
    env = dict(os.environ, TIDELAKE_USER=USER, TIDELAKE_PASSWORD=PASSWORD)
    proc = Proc("tidelake", [a.bin, "serve", "--warehouse", wh, "--listen", "127.0.0.1:0"], env=env,
                ready="tidelake listening on ")
    try:
        conn = adbc_connect(proc.port)
        cur = conn.cursor()
        cur.execute("CREATE TABLE default.o (id BIGINT NOT NULL, k BIGINT, v DOUBLE, s STRING) "
                    "WITH ('file.format' = 'orc')")
        t_ingest, _ = timed(lambda: cur.adbc_ingest("o", data, mode="append", db_schema_name="default"))
        files = sorted(glob.glob(os.path.join(wh, "default.db", "o", "bucket-*", "*.orc")))
        assert files, "no ORC files were written"
        print(f"# {a.rows:,} rows ingested in {t_ingest:.1f}s into {len(files)} ORC files; tidelake {a.bin}",
              file=sys.stderr)

        def run_tidelake():
            cur.execute("SELECT * FROM default.o")
            return cur.fetch_arrow_table()

        def run_pyarrow():
            return pa.concat_tables([orc.ORCFile(f).read() for f in files])

        times = {"tidelake": [], "pyarrow": []}
        rows = {}
        run_tidelake(), run_pyarrow()  # warm both (page cache, plans)
        for r in range(a.repeat):
            order = [("tidelake", run_tidelake), ("pyarrow", run_pyarrow)]
            for peer, fn in (order if r % 2 == 0 else order[::-1]):
                s, out = timed(fn)
                times[peer].append(s)
                rows[peer] = out.num_rows
        cur.close()
        conn.close()
    finally:
        proc.stop()
    tl, py = statistics.median(times["tidelake"]), statistics.median(times["pyarrow"])
    result = {"rows": a.rows, "files": len(files), "tidelake_ms": round(tl * 1e3, 1),
              "pyarrow_orc_ms": round(py * 1e3, 1), "ratio": round(py / tl, 2),
              "same_rows": rows["tidelake"] == rows["pyarrow"] == a.rows}
    print(f"full scan of {a.rows:,} rows: tidelake {result['tidelake_ms']} ms, pyarrow ORC "
          f"{result['pyarrow_orc_ms']} ms, ratio {result['ratio']}x, rows equal: {result['same_rows']}")
    print(json.dumps(result))
    if not result["same_rows"]:
        raise SystemExit("the peers read different row counts")


if __name__ == "__main__":
    main()
