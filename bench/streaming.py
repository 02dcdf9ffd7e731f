"""Streaming upserts beside bulk ingest of the same rows, in one run (issue 16):

- sustained streaming upsert rate into a primary-key table with a commit every second
  (`every_ms=1000`), the producer sending as fast as flow control lets it;
- commit-to-acknowledgement latency p50/p99 of those commits (the server's
  `tidelake_stream_ack_duration_seconds`, commit decision to ack) and the producer-side delay from
  sending a batch that asks for a commit to receiving its ack;
- the one-shot bulk ingest (Flight SQL CommandStatementIngest, one commit) of the same rows.

    .venv/bin/python bench/streaming.py --bin target/release/tidelake [--rows 10000000] [--keys 2000000] [--ask-every 100]
"""
import argparse
import os
import re
import sys
import tempfile
import time
import urllib.request

import pyarrow as pa

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "clients", "python"))
from object_store import serve  # noqa: E402
from serve import pct, stop  # noqa: E402

import tidelake  # noqa: E402


def server_ack_quantiles(metrics_url):
    """p50/p99 (seconds) of the ack-duration histogram, from its cumulative buckets."""
    text = urllib.request.urlopen(metrics_url, timeout=5).read().decode()
    buckets = [(float(le), float(n)) for le, n in
               re.findall(r'^tidelake_stream_ack_duration_seconds_bucket\{le="([^"]+)"\} (\S+)$', text, re.M)]
    total = buckets[-1][1] if buckets else 0
    out = []
    for q in (0.5, 0.99):
        out.append(next((le for le, n in buckets if n >= q * total), float("nan")))
    return out, int(total)


def batches(rows, keys, size):
    ids = pa.array(range(rows), pa.int64())
    for start in range(0, rows, size):
        n = min(size, rows - start)
        k = pa.array([(start + i) * 7919 % keys for i in range(n)], pa.int64())
        yield pa.record_batch({"id": k, "v": pa.array([start + i for i in range(n)], pa.int64())})
    del ids


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/tidelake")
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--keys", type=int, default=2_000_000)
    ap.add_argument("--batch", type=int, default=10_000)
    ap.add_argument("--ask-every", type=int, default=100, help="every Nth batch asks for a commit")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp()
    proc, uri, metrics = serve(args.bin, os.path.join(tmp, "wh"), tmp, {})
    try:
        data = list(batches(args.rows, args.keys, args.batch))
        with tidelake.Client(uri, user="tidelake", password="pw") as c:
            for t in ("stream", "bulk"):
                c.execute(f"CREATE TABLE default.{t} (id BIGINT NOT NULL, v BIGINT, PRIMARY KEY (id)) "
                          "WITH ('bucket' = '4')")
            # Streaming: a commit every second; every `--ask-every`th batch also asks for one (about
            # one a second at the rates seen), timed end to end.
            w = c.writer("default.stream", commit_user="bench", kind="upsert", every_ms=1000)
            asked = {}
            client_lat = []
            started = time.perf_counter()
            for i, b in enumerate(data):
                ask = i % args.ask_every == args.ask_every - 1
                w.write(b, position=i, commit=ask)
                if ask:
                    asked[i] = time.perf_counter()
                for a in w.acks():
                    if a.identifier in asked:
                        client_lat.append(time.perf_counter() - asked.pop(a.identifier))
            acks = w.close()
            took = time.perf_counter() - started
            for a in acks:
                if a.identifier in asked:
                    client_lat.append(time.perf_counter() - asked.pop(a.identifier))
            commits = c.sql('SELECT count(*) AS n FROM default."stream$snapshots" WHERE commit_kind = \'APPEND\'').to_pylist()[0]["n"]
            (s50, s99), n = server_ack_quantiles(metrics)
            # Bulk: the same rows in one ingest (one commit).
            table = pa.Table.from_batches(data)
            t0 = time.perf_counter()
            c.upsert("default.bulk", table)
            bulk = time.perf_counter() - t0
            assert c.sql("SELECT count(*) AS n FROM default.stream").to_pylist() == \
                c.sql("SELECT count(*) AS n FROM default.bulk").to_pylist()
        print(f"rows {args.rows} ({args.keys} keys), batches of {args.batch}")
        print(f"{'streaming upserts, commit every 1 s':<44}{args.rows / took:>14,.0f} rows/s  ({commits} commits)")
        print(f"{'bulk ingest, one commit':<44}{args.rows / bulk:>14,.0f} rows/s")
        print(f"{'ratio streaming / bulk':<44}{bulk / took:>14.2f}")
        print(f"{'server commit-to-ack p50 / p99 (ms)':<44}{s50 * 1000:>8.1f} / {s99 * 1000:.1f}  ({n} acks; "
              "histogram bucket bounds)")
        if client_lat:
            print(f"{'producer ask-to-ack p50 / p99 (ms)':<44}{pct(client_lat, 0.5):>8.1f} / "
                  f"{pct(client_lat, 0.99):.1f}  ({len(client_lat)} asked commits)")
    finally:
        stop(proc)


if __name__ == "__main__":
    main()
