"""Latency of unary calls (issue 13: TCP_NODELAY on accepted sockets).

Starts `tidelake serve` from ``--bin`` and, when given, from ``--baseline`` (an older build) side by
side on fresh warehouses, then alternates between them: ``--n`` times `SELECT 1` through ADBC and
ListActions through pyarrow.flight. Prints p50/p99 per server and the ratio.

    .venv/bin/python bench/unary_latency.py --bin target/release/tidelake --baseline /tmp/old --n 200
"""
import argparse
import os
import re
import statistics
import subprocess
import tempfile
import time

import adbc_driver_flightsql.dbapi as flight_sql
import pyarrow.flight as fl


def start(binary, warehouse):
    env = dict(os.environ, TIDELAKE_USER="bench", TIDELAKE_PASSWORD="pw")
    proc = subprocess.Popen([binary, "--warehouse", warehouse, "serve", "--listen", "127.0.0.1:0"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    line = proc.stdout.readline()
    m = re.search(r"listening on (\S+)", line)
    if not m:
        proc.kill()
        raise SystemExit(f"{binary} did not start: {line!r}")
    return proc, m.group(1)


def quantile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/tidelake")
    ap.add_argument("--baseline")
    ap.add_argument("--n", type=int, default=200)
    args = ap.parse_args()
    servers = [("current", args.bin)] + ([("baseline", args.baseline)] if args.baseline else [])
    running, conns, flights = [], {}, {}
    try:
        for name, binary in servers:
            proc, addr = start(binary, tempfile.mkdtemp(prefix=f"tl-{name}-"))
            running.append(proc)
            conns[name] = flight_sql.connect(f"grpc://{addr}", db_kwargs={"username": "bench", "password": "pw"})
            client = fl.FlightClient(f"grpc://{addr}")
            token = client.authenticate_basic_token(b"bench", b"pw")
            flights[name] = (client, fl.FlightCallOptions(headers=[token]))
        times = {(name, what): [] for name, _ in servers for what in ("SELECT 1 (ADBC)", "ListActions")}
        for _ in range(args.n):
            for name, _ in servers:
                cur = conns[name].cursor()
                t0 = time.perf_counter()
                cur.execute("SELECT 1")
                cur.fetchall()
                times[(name, "SELECT 1 (ADBC)")].append(time.perf_counter() - t0)
                cur.close()
                client, opts = flights[name]
                t0 = time.perf_counter()
                list(client.list_actions(opts))
                times[(name, "ListActions")].append(time.perf_counter() - t0)
        for what in ("SELECT 1 (ADBC)", "ListActions"):
            row = []
            for name, _ in servers:
                xs = times[(name, what)]
                row.append(f"{name}: p50 {quantile(xs, 0.5) * 1e3:.2f} ms, p99 {quantile(xs, 0.99) * 1e3:.2f} ms")
            line = f"{what:18s} " + " | ".join(row)
            if args.baseline:
                ratio = statistics.median(times[("baseline", what)]) / statistics.median(times[("current", what)])
                line += f" | baseline/current p50 {ratio:.1f}x"
            print(line)
    finally:
        for c in conns.values():
            c.close()
        for p in running:
            p.terminate()
            p.wait()


if __name__ == "__main__":
    main()
