#!/usr/bin/env python3
"""Changelog subscriptions of `tidelake serve` on loopback: commit-to-subscriber latency and changelog
throughput (issue 5).

  latency     --commits one-row commits (ADBC `INSERT INTO lat VALUES (i, now)`, one statement = one
              commit) into a primary-key table (changelog-producer --producer, default input), with 1
              and with 16 subscribers (--subscribers), each a separate process running
              `tidelake.subscribe(start="latest")`. Latency of commit i at a subscriber = the
              time.monotonic_ns() at which the batch holding row i was read there, minus the
              time.monotonic_ns() at which the writer's INSERT call returned (CLOCK_MONOTONIC is
              system-wide on Linux, so the two processes' clocks agree). Negative values are possible:
              the server pushes the change before the writer has read its statement's response. The
              commit call itself (ADBC execute of the INSERT, from call to return) is reported too,
              and two more latencies: from the start of the INSERT call (an upper bound of the whole
              path), and from the snapshot's `timeMillis` (the server's commit time, wall clock; the
              subscriber's receive time.time_ns() minus it; millisecond resolution).
              Writes are back to back unless --interval-ms pauses between them.
  throughput  --rows upserts (default 1M) into a primary-key table with changelog-producer = lookup
              (4 buckets), written by ADBC bulk ingest (DoPut, one commit per --chunk rows: the first
              chunk new keys, then half existing keys, half new; keys unique within a chunk), while one
              subscriber process counts the changelog rows (+I for new keys, -U/+U for existing ones).
              Changelog rows/s = rows received / (last row's receive time - first row's receive time);
              input rows/s divides the upserts by the same span; end to end runs from the first write
              call to the last row received. Then the same changelog is read again by a bounded
              subscription (from snapshot 1 to the last), as fast as the stream goes.

The server runs from --bin (default target/release/tidelake if it exists, else target/debug/tidelake)
on a temporary warehouse. Output: a human-readable table, a markdown section for bench/RESULTS.md, then
one JSON line per measurement.

Usage:
  .venv/bin/python bench/changelog_bench.py [--commits 1000] [--subscribers 1,16] [--interval-ms 0]
      [--producer input] [--rows 1000000] [--chunk 100000] [--bin PATH] [--keep DIR] [--only latency|throughput]
      [--server-log]
Needs: pyarrow, numpy, adbc-driver-flightsql, and the client package clients/python (found in the tree when
not installed).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
try:
    import tidelake
except ImportError:
    sys.path.insert(0, os.path.join(REPO, "clients", "python"))
    import tidelake

import flight_bench  # noqa: E402  (bench/: the server process wrapper and ADBC helpers)
from flight_bench import USER, PASSWORD, Proc, adbc_connect, adbc_sql  # noqa: E402

RESULTS = []


def emit(rec):
    RESULTS.append(rec)
    print("  " + json.dumps(rec), file=sys.stderr, flush=True)


def pct(xs, q, scale=1.0, digits=2):
    """The q-th percentile of xs / scale, rounded (None when there are no samples)."""
    if not len(xs):
        return None
    return round(float(np.percentile(np.asarray(xs, dtype=np.float64), q)) / scale, digits)


# ---------------------------------------------------------------- subscriber processes


def run_subscriber(a):
    """Worker: subscribe, say 'ready' on stdout once the position is fixed, record receive times."""
    sub = None
    recv = {}
    kinds = {}
    rows = 0
    first_ns = last_ns = None
    ready = False
    error = None
    idle_limit = a.idle_s * 1e9
    last_progress = time.monotonic_ns()
    try:
        sub = tidelake.subscribe(a.uri, a.table, user=USER, password=PASSWORD, start="latest",
                                 heartbeat_millis=100, columns=["id"] if a.mode == "latency" else None)
        for ev in sub.events():
            now = time.monotonic_ns()
            if not ready:
                print("ready", flush=True)
                ready = True
            b = ev.batch
            if b.num_rows:
                last_progress = now
                if first_ns is None:
                    first_ns = now
                last_ns = now
                rows += b.num_rows
                k = b.column(0)
                if a.mode == "latency":
                    wall = time.time_ns()
                    for kind, i in zip(k.to_pylist(), b.column(1).to_pylist()):
                        if kind in ("+I", "+U"):
                            if i in recv:
                                recv[i][3] += 1
                            else:
                                recv[i] = [now, wall, ev.progress.snapshot_id, 1]
                else:
                    for kind, n in zip(*pc.value_counts(k).flatten()):
                        kinds[kind.as_py()] = kinds.get(kind.as_py(), 0) + n.as_py()
                if (a.mode == "latency" and len(recv) >= a.expect) or (a.mode == "throughput" and rows >= a.expect):
                    break
            elif now - last_progress > idle_limit and ready:
                error = f"no changes for {a.idle_s} s ({rows} rows so far)"
                break
    except Exception as e:  # reported to the parent
        error = f"{type(e).__name__}: {e}"
    finally:
        if sub is not None:
            sub.close()
    if not ready:
        print("ready", flush=True)  # let the parent go on; the error says what happened
    with open(a.out, "w") as f:
        json.dump(dict(recv=recv, kinds=kinds, rows=rows, first_ns=first_ns, last_ns=last_ns, error=error,
                       reconnects=sub.reconnects if sub is not None else 0), f)


class Subscribers:
    """K subscriber processes for one table; start() returns once every one of them is connected."""

    def __init__(self, k, uri, table, mode, expect, work, idle_s):
        self.outs = [os.path.join(work, f"{table.replace('.', '_')}-sub{j}.json") for j in range(k)]
        self.procs = [subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--subscriber", "--uri", uri, "--table", table,
             "--mode", mode, "--expect", str(expect), "--out", out, "--idle-s", str(idle_s)],
            stdout=subprocess.PIPE, text=True) for out in self.outs]

    def wait_ready(self, timeout=120):
        deadline = time.monotonic() + timeout
        for p in self.procs:
            got = []
            t = threading.Thread(target=lambda: got.append(p.stdout.readline()), daemon=True)
            t.start()
            t.join(max(0.0, deadline - time.monotonic()))
            if not got or got[0].strip() != "ready":
                self.kill()
                raise SystemExit(f"a subscriber did not connect within {timeout} s (exit {p.poll()})")

    def results(self, timeout):
        deadline = time.monotonic() + timeout
        out = []
        for p, path in zip(self.procs, self.outs):
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            try:
                with open(path) as f:
                    out.append(json.load(f))
            except (OSError, ValueError):
                out.append(dict(recv={}, rows=0, error=f"no result (exit {p.returncode})"))
        return out

    def kill(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()


# ---------------------------------------------------------------- latency


def snapshot_millis(warehouse, table):
    """{snapshot id: timeMillis} of a table, from its snapshot files (the server's commit time)."""
    db, name = table.split(".")
    d = os.path.join(warehouse, f"{db}.db", name, "snapshot")
    out = {}
    for f in os.listdir(d):
        if f.startswith("snapshot-"):
            with open(os.path.join(d, f)) as fh:
                js = json.load(fh)
            out[js["id"]] = js["timeMillis"]
    return out


def latency(a, conn, uri, warehouse, k, work, problems):
    table = f"default.lat_{k}"
    adbc_sql(conn, f"CREATE TABLE {table} (id BIGINT NOT NULL, t BIGINT, PRIMARY KEY (id)) "
                   f"WITH ('bucket' = '1', 'changelog-producer' = '{a.producer}')")
    adbc_sql(conn, f"INSERT INTO {table} VALUES (-1, 0)")  # a first snapshot, so 'latest' has a position
    subs = Subscribers(k, uri, table, "latency", a.commits, work, idle_s=60)
    subs.wait_ready()
    print(f"# latency: {k} subscriber(s) connected; {a.commits} commits", file=sys.stderr)
    started, returned, calls = [], [], []
    cur = conn.cursor()
    try:
        for i in range(a.commits):
            t0 = time.monotonic_ns()
            cur.execute(f"INSERT INTO {table} VALUES ({i}, {t0})")
            t1 = time.monotonic_ns()
            started.append(t0)
            returned.append(t1)
            calls.append(t1 - t0)
            if a.interval_ms:
                time.sleep(a.interval_ms / 1000)
    finally:
        cur.close()
    res = subs.results(timeout=120)
    committed_ms = snapshot_millis(warehouse, table)
    lat, from_start, from_snapshot, missing, dup = [], [], [], 0, 0
    worst = [None] * a.commits
    for r in res:
        if r.get("error"):
            problems.append(f"latency, {k} subscribers: a subscriber failed: {r['error']}")
        recv = {int(i): v for i, v in r["recv"].items()}
        for i in range(a.commits):
            got = recv.get(i)
            if not got:
                missing += 1
                continue
            mono, wall, snap, count = got
            dup += count - 1
            d = (mono - returned[i]) / 1e6
            lat.append(d)
            from_start.append((mono - started[i]) / 1e6)
            if snap in committed_ms:
                from_snapshot.append(wall / 1e6 - committed_ms[snap])
            worst[i] = d if worst[i] is None else max(worst[i], d)
    per_commit_max = [w for w in worst if w is not None]
    if missing or dup:
        problems.append(f"latency, {k} subscribers: {missing} (subscriber, commit) pairs missing, {dup} duplicates")
    rec = dict(bench="changelog", op="latency", subscribers=k, commits=a.commits, producer=a.producer,
               interval_ms=a.interval_ms, samples=len(lat), missing=missing, duplicates=dup,
               p50_ms=pct(lat, 50), p99_ms=pct(lat, 99), max_ms=round(max(lat), 2) if lat else None,
               min_ms=round(min(lat), 2) if lat else None, mean_ms=round(statistics.mean(lat), 2) if lat else None,
               slowest_subscriber_p99_ms=pct(per_commit_max, 99),
               from_call_start_p50_ms=pct(from_start, 50), from_call_start_p99_ms=pct(from_start, 99),
               from_call_start_max_ms=round(max(from_start), 2) if from_start else None,
               from_snapshot_time_p50_ms=pct(from_snapshot, 50), from_snapshot_time_p99_ms=pct(from_snapshot, 99),
               from_snapshot_time_max_ms=round(max(from_snapshot), 2) if from_snapshot else None,
               commit_call_p50_ms=pct(calls, 50, 1e6), commit_call_p99_ms=pct(calls, 99, 1e6),
               commit_call_max_ms=round(max(calls) / 1e6, 2) if calls else None,
               reconnects=sum(r.get("reconnects", 0) for r in res))
    emit(rec)
    return rec


# ---------------------------------------------------------------- throughput


def throughput(a, conn, uri, work, problems):
    table = "tp"
    adbc_sql(conn, f"CREATE TABLE default.{table} (id BIGINT NOT NULL, k BIGINT, v DOUBLE, s STRING, "
                   f"PRIMARY KEY (id)) WITH ('bucket' = '4', 'changelog-producer' = 'lookup')")
    rng = np.random.default_rng(a.seed)
    chunks, next_key, n_new, n_old = [], 0, 0, 0
    left = a.rows
    while left > 0:
        m = min(a.chunk, left)
        old = 0 if next_key == 0 else min(m // 2, next_key)
        ids = np.concatenate([rng.choice(next_key, size=old, replace=False) if old else np.empty(0, np.int64),
                              np.arange(next_key, next_key + m - old)]).astype(np.int64)
        rng.shuffle(ids)
        next_key += m - old
        n_new += m - old
        n_old += old
        chunks.append(pa.table({
            "id": pa.array(ids, pa.int64()),
            "k": pa.array(rng.integers(0, 1_000_000, m), pa.int64()),
            "v": pa.array(rng.random(m)),
            "s": pa.array([f"s-{x:014d}" for x in rng.integers(0, 10**13, m)], pa.string()),
        }, schema=pa.schema([pa.field("id", pa.int64(), nullable=False), ("k", pa.int64()), ("v", pa.float64()),
                             ("s", pa.string())])))
        left -= m
    expect = n_new + 2 * n_old
    subs = Subscribers(1, uri, f"default.{table}", "throughput", expect, work, idle_s=120)
    subs.wait_ready()
    print(f"# throughput: {a.rows:,} upserts in {len(chunks)} commits ({n_new:,} new keys, {n_old:,} updates); "
          f"expecting {expect:,} changelog rows", file=sys.stderr)
    t_write0 = time.monotonic_ns()
    commit_s = []
    cur = conn.cursor()
    try:
        for c in chunks:
            t0 = time.monotonic_ns()
            cur.adbc_ingest(table, c, mode="append", db_schema_name="default")
            commit_s.append((time.monotonic_ns() - t0) / 1e9)
    finally:
        cur.close()
    t_write1 = time.monotonic_ns()
    r = subs.results(timeout=600)[0]
    if r.get("error"):
        problems.append(f"throughput: the subscriber failed: {r['error']}")
    rows = r["rows"]
    if rows != expect:
        problems.append(f"throughput: {rows:,} changelog rows received, expected {expect:,} ({r.get('kinds')})")
    span = ((r["last_ns"] or 0) - (r["first_ns"] or 0)) / 1e9
    e2e = ((r["last_ns"] or t_write1) - t_write0) / 1e9
    write_s = (t_write1 - t_write0) / 1e9
    rec = dict(bench="changelog", op="throughput", producer="lookup", upserts=a.rows, commits=len(chunks),
               new_keys=n_new, updates=n_old, changelog_rows=rows, kinds=r.get("kinds"),
               stream_s=round(span, 3), changelog_rows_per_s=round(rows / span) if span > 0 else None,
               input_rows_per_s=round(a.rows / span) if span > 0 else None,
               write_s=round(write_s, 3), write_rows_per_s=round(a.rows / write_s) if write_s > 0 else None,
               commit_s_p50=pct(commit_s, 50, digits=3), end_to_end_s=round(e2e, 3),
               end_to_end_rows_per_s=round(a.rows / e2e) if e2e > 0 else None,
               first_row_after_write_start_s=round(((r["first_ns"] or t_write0) - t_write0) / 1e9, 3))
    # The same changelog read again after the writes, as fast as the stream goes (bounded catch-up).
    end = adbc_sql(conn, f'SELECT max(snapshot_id) FROM default."{table}$snapshots"')[0][0]
    sub = tidelake.subscribe(uri, f"default.{table}", user=USER, password=PASSWORD, start="from-snapshot",
                             snapshot_id=1, end_snapshot_id=end)
    t0 = time.monotonic_ns()
    t_first, caught_up = None, 0
    for b in sub:
        if t_first is None:
            t_first = time.monotonic_ns()
        caught_up += b.num_rows
    t1 = time.monotonic_ns()
    if caught_up != rows:
        problems.append(f"throughput: the catch-up read of snapshots 1..{end} gave {caught_up:,} rows, "
                        f"the live subscriber {rows:,}")
    rec.update(catchup_rows=caught_up, catchup_s=round((t1 - t0) / 1e9, 3),
               catchup_rows_per_s=round(caught_up / ((t1 - t0) / 1e9)) if t1 > t0 else None,
               catchup_first_row_s=round(((t_first or t1) - t0) / 1e9, 3))
    emit(rec)
    return rec


# ---------------------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--commits", type=int, default=1000)
    ap.add_argument("--subscribers", default="1,16", help="comma-separated subscriber counts for the latency runs")
    ap.add_argument("--interval-ms", type=float, default=0, help="pause between the latency commits")
    ap.add_argument("--producer", default="input", choices=["none", "input", "lookup", "full-compaction"],
                    help="changelog-producer of the latency table")
    ap.add_argument("--rows", type=int, default=1_000_000, help="upserts of the throughput run")
    ap.add_argument("--chunk", type=int, default=100_000, help="rows per commit of the throughput run")
    ap.add_argument("--only", choices=["latency", "throughput"])
    ap.add_argument("--bin", default=None)
    ap.add_argument("--keep", default=None, help="keep the warehouse under DIR")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--server-log", action="store_true", help="echo the server's stderr")
    # worker mode
    ap.add_argument("--subscriber", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--uri", help=argparse.SUPPRESS)
    ap.add_argument("--table", help=argparse.SUPPRESS)
    ap.add_argument("--mode", help=argparse.SUPPRESS)
    ap.add_argument("--expect", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    ap.add_argument("--idle-s", type=float, default=60, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.subscriber:
        return run_subscriber(a)
    flight_bench.ECHO_SERVER_LOG = a.server_log
    if a.bin is None:
        rel = os.path.join(REPO, "target/release/tidelake")
        a.bin = rel if os.path.exists(rel) else os.path.join(REPO, "target/debug/tidelake")
    if not os.path.exists(a.bin):
        raise SystemExit(f"no tidelake binary at {a.bin} (build it, or pass --bin)")
    if a.keep:
        os.makedirs(a.keep, exist_ok=True)
        work = tempfile.mkdtemp(prefix="changelog-bench-", dir=a.keep)
    else:
        work = tempfile.mkdtemp(prefix="tidelake-changelog-bench-")
    print(f"# work dir {work}" + ("" if a.keep else " (removed at exit)"), file=sys.stderr)
    wh = os.path.join(work, "warehouse")
    os.makedirs(wh)
    env = dict(os.environ, TIDELAKE_USER=USER, TIDELAKE_PASSWORD=PASSWORD)
    proc = Proc("tidelake", [a.bin, "serve", "--warehouse", wh, "--listen", "127.0.0.1:0"], env=env,
                ready="tidelake listening on ")
    uri = f"grpc://127.0.0.1:{proc.port}"
    print(f"# tidelake {a.bin} on port {proc.port}", file=sys.stderr)
    problems, lat_recs, tp_rec = [], [], None
    conn = None
    try:
        conn = adbc_connect(proc.port)
        if a.only in (None, "latency"):
            for k in [int(x) for x in a.subscribers.split(",") if x.strip()]:
                lat_recs.append(latency(a, conn, uri, wh, k, work, problems))
        if a.only in (None, "throughput"):
            tp_rec = throughput(a, conn, uri, work, problems)
    finally:
        if conn is not None:
            conn.close()
        rc = proc.stop()
        if rc != 0:
            problems.append(f"tidelake exited {rc} after SIGTERM; stderr tail: " + " | ".join(proc.err_tail[-5:]))
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    report(a, lat_recs, tp_rec, problems)


def report(a, lat_recs, tp_rec, problems):
    f = lambda v, d=1: "-" if v is None else f"{v:,.{d}f}"
    print()
    if lat_recs:
        print(f"Commit-to-subscriber latency, {a.commits} one-row commits, changelog-producer = {a.producer}, "
              f"interval {a.interval_ms} ms")
        print("(ms; 'after return': receive - the writer's INSERT call returned; 'after start': receive - the call "
              "started;\n 'after snapshot': receive wall time - the snapshot's timeMillis; 'commit call': the INSERT call)")
        hdr = (f"{'subscribers':>11}{'samples':>9}{'after return p50/p99/max':>27}{'after start p50/p99':>22}"
               f"{'after snapshot p50/p99':>25}{'commit call p50/p99':>22}")
        print(hdr)
        print("-" * len(hdr))
        for r in lat_recs:
            print(f"{r['subscribers']:>11}{r['samples']:>9}"
                  f"{f(r['p50_ms']) + ' / ' + f(r['p99_ms']) + ' / ' + f(r['max_ms']):>27}"
                  f"{f(r['from_call_start_p50_ms']) + ' / ' + f(r['from_call_start_p99_ms']):>22}"
                  f"{f(r['from_snapshot_time_p50_ms']) + ' / ' + f(r['from_snapshot_time_p99_ms']):>25}"
                  f"{f(r['commit_call_p50_ms']) + ' / ' + f(r['commit_call_p99_ms']):>22}")
    if tp_rec:
        print()
        print(f"Changelog throughput, lookup producer: {tp_rec['upserts']:,} upserts in {tp_rec['commits']} commits")
        print(f"  changelog rows received   {tp_rec['changelog_rows']:>12,}  {f(tp_rec['changelog_rows_per_s'], 0):>12} rows/s "
              f"over {tp_rec['stream_s']} s (first to last row)")
        print(f"  upserts (input rows)      {tp_rec['upserts']:>12,}  {f(tp_rec['input_rows_per_s'], 0):>12} rows/s "
              f"over the same span")
        print(f"  written (ingest+commit)   {tp_rec['upserts']:>12,}  {f(tp_rec['write_rows_per_s'], 0):>12} rows/s "
              f"over {tp_rec['write_s']} s")
        print(f"  end to end                {tp_rec['upserts']:>12,}  {f(tp_rec['end_to_end_rows_per_s'], 0):>12} rows/s "
              f"over {tp_rec['end_to_end_s']} s (first write call to last row received)")
        print(f"  catch-up read afterwards  {tp_rec['catchup_rows']:>12,}  {f(tp_rec['catchup_rows_per_s'], 0):>12} rows/s "
              f"over {tp_rec['catchup_s']} s (from-snapshot 1, bounded; first row after {tp_rec['catchup_first_row_s']} s)")
    if problems:
        print()
        print("Problems:")
        for p in problems:
            print("  - " + p)

    # markdown for bench/RESULTS.md
    rel = os.path.relpath(a.bin, REPO)
    shown_bin = a.bin if rel.startswith("..") else rel
    print()
    print("## Changelog subscriptions on loopback (issue 5)")
    print()
    print("```sh")
    print(f".venv/bin/python bench/changelog_bench.py --commits {a.commits} --subscribers {a.subscribers} "
          f"--producer {a.producer} --rows {a.rows} --chunk {a.chunk} --bin {shown_bin}")
    print("```")
    print()
    print(f"Run on {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} cores, pyarrow {pa.__version__}.")
    if lat_recs:
        print()
        print(f"Commit-to-subscriber latency: {a.commits} one-row commits through ADBC, back to back"
              + (f" ({a.interval_ms} ms apart)" if a.interval_ms else "")
              + f", changelog-producer = {a.producer}; each subscriber is its own process:")
        print()
        print("| subscribers | samples | after the commit call returned: p50 / p99 / max ms | after the call started: "
              "p50 / p99 ms | after the snapshot's timeMillis: p50 / p99 ms | commit call p50 / p99 ms |")
        print("|---:|---:|---:|---:|---:|---:|")
        for r in lat_recs:
            print(f"| {r['subscribers']} | {r['samples']:,} | {f(r['p50_ms'])} / {f(r['p99_ms'])} / {f(r['max_ms'])} | "
                  f"{f(r['from_call_start_p50_ms'])} / {f(r['from_call_start_p99_ms'])} | "
                  f"{f(r['from_snapshot_time_p50_ms'])} / {f(r['from_snapshot_time_p99_ms'])} | "
                  f"{f(r['commit_call_p50_ms'])} / {f(r['commit_call_p99_ms'])} |")
    if tp_rec:
        print()
        print(f"Changelog throughput, lookup producer, {tp_rec['upserts']:,} upserts by bulk ingest in "
              f"{tp_rec['commits']} commits ({tp_rec['new_keys']:,} new keys, {tp_rec['updates']:,} updates), "
              "one subscriber:")
        print()
        print("| measurement | rows | seconds | rows/s |")
        print("|---|---:|---:|---:|")
        print(f"| changelog rows received (+I/-U/+U), first to last | {tp_rec['changelog_rows']:,} | "
              f"{tp_rec['stream_s']} | {f(tp_rec['changelog_rows_per_s'], 0)} |")
        print(f"| upserts over the same span | {tp_rec['upserts']:,} | {tp_rec['stream_s']} | "
              f"{f(tp_rec['input_rows_per_s'], 0)} |")
        print(f"| ingest + commit + lookup compaction (writer) | {tp_rec['upserts']:,} | {tp_rec['write_s']} | "
              f"{f(tp_rec['write_rows_per_s'], 0)} |")
        print(f"| end to end (first write to last row received) | {tp_rec['upserts']:,} | {tp_rec['end_to_end_s']} | "
              f"{f(tp_rec['end_to_end_rows_per_s'], 0)} |")
        print(f"| catch-up read of the same changelog afterwards (from-snapshot 1, bounded) | "
              f"{tp_rec['catchup_rows']:,} | {tp_rec['catchup_s']} | {f(tp_rec['catchup_rows_per_s'], 0)} |")
    if problems:
        print()
        for p in problems:
            print(f"- Problem: {p}")
    print()
    meta = dict(bench="changelog", config=dict(commits=a.commits, subscribers=a.subscribers, interval_ms=a.interval_ms,
                                               producer=a.producer, rows=a.rows, chunk=a.chunk, bin=a.bin,
                                               pyarrow=pa.__version__, cpus=os.cpu_count(),
                                               date=time.strftime("%Y-%m-%d %H:%M")))
    print(json.dumps(meta))
    for r in RESULTS:
        print(json.dumps(r))
    for p in problems:
        print(json.dumps(dict(bench="changelog", problem=p)))


if __name__ == "__main__":
    main()
