#!/usr/bin/env python3
"""Analytics through ADBC: tidelake's Flight SQL server beside DuckDB in-process on the same Parquet files.

One append table of workload W's shape (id BIGINT NOT NULL, k BIGINT in [0, 1M), v DOUBLE in [0, 1),
s STRING) is ingested into `tidelake serve` through ADBC; DuckDB then reads the very Parquet files the
table holds (read_parquet over the live data files). Each query runs --repeat times per peer,
alternating which goes first; the figure is the median wall time per query, and the ratio is
DuckDB's time / tidelake's (above 1.0: tidelake is faster). tidelake's time includes the Flight SQL
round trips (GetFlightInfo + DoGet) and the transfer of the result; DuckDB's is in-process.

Usage:
  .venv/bin/python bench/analytics.py [--rows 5000000] [--repeat 5] [--bin target/release/tidelake]
Needs: pyarrow, numpy, adbc-driver-flightsql, duckdb (scripts/setup-python.sh installs them).
Output: a table, then one JSON line per query.
"""
import argparse, glob, json, os, statistics, sys, tempfile, time

import numpy as np
import pyarrow as pa

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from flight_bench import PASSWORD, USER, Proc, adbc_connect, batches_for  # noqa: E402

QUERIES = {
    "group by": "SELECT k % 100 AS g, count(*) AS n, sum(v) AS sv, max(s) AS ms FROM {t} GROUP BY k % 100",
    "filter": "SELECT count(*) AS n, avg(v) AS av FROM {t} WHERE v < 0.01 AND k > 500000",
    "top-n": "SELECT id, v FROM {t} ORDER BY v DESC LIMIT 10",
    "distinct": "SELECT count(DISTINCT k) AS n FROM {t}",
}


def timed(fn):
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def canonical(tbl):
    """Rows as sorted tuples with floats rounded: both peers' answers compare."""
    rows = [tuple(round(v, 6) if isinstance(v, float) else v for v in r.values()) for r in tbl.to_pylist()]
    return sorted(rows, key=repr)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--batch", type=int, default=262_144)
    ap.add_argument("--bin", default=None)
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    import duckdb

    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if a.bin is None:
        rel = os.path.join(repo, "target/release/tidelake")
        a.bin = rel if os.path.exists(rel) else os.path.join(repo, "target/debug/tidelake")
    work = tempfile.mkdtemp(prefix="tidelake-analytics-")
    wh = os.path.join(work, "warehouse")
    os.makedirs(wh)
    rng = np.random.default_rng(a.seed)
    data = pa.Table.from_batches(batches_for(rng, np.arange(a.rows, dtype=np.int64), a.batch))
    env = dict(os.environ, TIDELAKE_USER=USER, TIDELAKE_PASSWORD=PASSWORD)
    proc = Proc("tidelake", [a.bin, "serve", "--warehouse", wh, "--listen", "127.0.0.1:0"], env=env,
                ready="tidelake listening on ")
    results = []
    try:
        conn = adbc_connect(proc.port)
        cur = conn.cursor()
        cur.execute("CREATE TABLE default.q (id BIGINT NOT NULL, k BIGINT, v DOUBLE, s STRING)")
        t_ingest, _ = timed(lambda: cur.adbc_ingest("q", data, mode="append", db_schema_name="default"))
        files = sorted(glob.glob(os.path.join(wh, "default.db", "q", "bucket-*", "*.parquet")))
        print(f"# {a.rows:,} rows ingested in {t_ingest:.1f}s into {len(files)} files; tidelake {a.bin}",
              file=sys.stderr)
        duck = duckdb.connect()
        duck.execute(f"CREATE VIEW q AS SELECT * FROM read_parquet({files!r})")

        def run_tidelake(sql):
            cur.execute(sql.format(t="default.q"))
            return cur.fetch_arrow_table()

        def run_duckdb(sql):
            return duck.sql(sql.format(t="q")).to_arrow_table()

        for name, sql in QUERIES.items():
            times = {"tidelake": [], "duckdb": []}
            answers = {}
            run_tidelake(sql), run_duckdb(sql)  # warm both (footers, caches, plans)
            for r in range(a.repeat):
                order = [("tidelake", run_tidelake), ("duckdb", run_duckdb)]
                for peer, fn in (order if r % 2 == 0 else order[::-1]):
                    s, out = timed(lambda: fn(sql))
                    times[peer].append(s)
                    answers[peer] = out
            same = canonical(answers["tidelake"]) == canonical(answers["duckdb"])
            tl, dk = statistics.median(times["tidelake"]), statistics.median(times["duckdb"])
            results.append({"query": name, "rows": a.rows, "tidelake_ms": round(tl * 1e3, 1),
                            "duckdb_ms": round(dk * 1e3, 1), "ratio": round(dk / tl, 2), "same_answer": same})
        cur.close()
        conn.close()
    finally:
        proc.stop()
    print(f"{'query':<10} {'tidelake ms':>12} {'duckdb ms':>10} {'ratio':>6}  same answer")
    for r in results:
        print(f"{r['query']:<10} {r['tidelake_ms']:>12} {r['duckdb_ms']:>10} {r['ratio']:>5}x  {r['same_answer']}")
    for r in results:
        print(json.dumps(r))
    if not all(r["same_answer"] for r in results):
        raise SystemExit("the peers answered differently")


if __name__ == "__main__":
    main()
