"""tidelake on S3 (moto's S3 server) beside the local filesystem, in one run:

- commit latency p50/p99 of single-row INSERTs through ADBC, S3 and local;
- a prepared point query and a metadata call (GetTables) with warm caches: milliseconds and
  object-store requests per call (from the server's `tidelake_object_store_requests_total`);
- commit rate of one server with two clients beside two servers with one client each, on one
  S3 warehouse (each client on its own table, and all on one table).

    .venv/bin/python bench/object_store.py --bin target/release/tidelake [--commits 100]

moto is a Python server, so S3 latencies here are moto's, not AWS's; the request counts are what
carries over.
"""
import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid

import adbc_driver_flightsql.dbapi as flightsql

sys.path.insert(0, os.path.dirname(__file__))
from serve import pct, stop  # noqa: E402


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def start_moto():
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            urllib.request.urlopen(url + "/moto-api/", timeout=1)
            return proc, url
        except Exception:
            time.sleep(0.1)
    raise SystemExit("moto did not start")


def serve(binary, warehouse, tmp, env):
    cfg = os.path.join(tmp, f"{uuid.uuid4().hex}.toml")
    with open(cfg, "w") as f:
        f.write('[metrics]\nlisten = "127.0.0.1:0"\n')
    proc = subprocess.Popen([binary, "serve", "--warehouse", warehouse, "--listen", "127.0.0.1:0", "--config", cfg],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=dict(os.environ, TIDELAKE_PASSWORD="pw", **env))
    first = proc.stdout.readline().decode()
    second = proc.stdout.readline().decode()
    m = re.match(r"tidelake listening on 127\.0\.0\.1:(\d+)", first)
    mm = re.match(r"tidelake metrics on (\S+)", second)
    if not m or not mm:
        proc.kill()
        raise SystemExit(f"server did not start: {first!r} {second!r}")
    return proc, f"grpc://127.0.0.1:{m.group(1)}", mm.group(1)


def store_requests(metrics_url):
    text = urllib.request.urlopen(metrics_url, timeout=5).read().decode()
    return sum(float(v) for v in re.findall(r"^tidelake_object_store_requests_total\{[^}]*\} (\S+)$", text, re.M))


def connect(uri):
    return flightsql.connect(uri, db_kwargs={"username": "tidelake", "password": "pw"}, autocommit=True)


def run(conn, sql, params=None):
    with conn.cursor() as cur:
        cur.execute(sql, params)
        return cur.fetchall()


def commit_latency(uri, table, n):
    c = connect(uri)
    run(c, f"CREATE TABLE {table} (id BIGINT NOT NULL, v STRING, PRIMARY KEY (id)) WITH ('bucket' = '2')")
    times = []
    for i in range(n):
        t = time.perf_counter()
        run(c, f"INSERT INTO {table} VALUES ({i}, 'v{i}')")
        times.append(time.perf_counter() - t)
    c.close()
    return times


def warm_calls(uri, metrics_url, table, n):
    c = connect(uri)
    point, meta = [], []
    with c.cursor() as cur:
        for i in range(5):  # warm
            cur.execute(f"SELECT v FROM {table} WHERE id = ?", (i,))
            cur.fetchall()
            c.adbc_get_objects(depth="tables").read_all()
        before = store_requests(metrics_url)
        for i in range(n):
            t = time.perf_counter()
            cur.execute(f"SELECT v FROM {table} WHERE id = ?", (i % 50,))
            cur.fetchall()
            point.append(time.perf_counter() - t)
        mid = store_requests(metrics_url)
        for _ in range(n):
            t = time.perf_counter()
            c.adbc_get_objects(depth="tables").read_all()
            meta.append(time.perf_counter() - t)
        after = store_requests(metrics_url)
    c.close()
    return point, meta, (mid - before) / n, (after - mid) / n


def commit_rate(uris_tables, per_client):
    errors = []

    def client(uri, table):
        try:
            c = connect(uri)
            for i in range(per_client):
                run(c, f"INSERT INTO {table} VALUES ({i}, 'x')")
            c.close()
        except Exception as e:
            errors.append(e)

    threads = [threading.Thread(target=client, args=ut) for ut in uris_tables]
    t = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    took = time.perf_counter() - t
    if errors:
        raise SystemExit(f"commit errors: {errors[:3]}")
    return len(uris_tables) * per_client / took


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/tidelake")
    ap.add_argument("--commits", type=int, default=100)
    ap.add_argument("--calls", type=int, default=100)
    args = ap.parse_args()
    import boto3

    moto, endpoint = start_moto()
    tmp = tempfile.mkdtemp()
    procs = []
    try:
        bucket = f"bench-{uuid.uuid4().hex[:8]}"
        boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="k", aws_secret_access_key="s",
                     region_name="us-east-1").create_bucket(Bucket=bucket)
        env = {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s",
               "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true"}
        s3 = serve(args.bin, f"s3://{bucket}/wh", tmp, env)
        local = serve(args.bin, os.path.join(tmp, "local-wh"), tmp, {})
        procs += [s3[0], local[0]]
        print(f"{'':<28}{'local':>12}{'S3 (moto)':>12}")
        lat = {name: commit_latency(srv[1], "t", args.commits) for name, srv in (("local", local), ("s3", s3))}
        for q in (0.5, 0.99):
            print(f"{f'commit p{int(q * 100)} (ms)':<28}{pct(lat['local'], q):>12.1f}{pct(lat['s3'], q):>12.1f}")
        warm = {name: warm_calls(srv[1], srv[2], "t", args.calls) for name, srv in (("local", local), ("s3", s3))}
        for label, i in (("point query p50 (ms)", 0), ("GetTables p50 (ms)", 1)):
            print(f"{label:<28}{pct(warm['local'][i], 0.5):>12.2f}{pct(warm['s3'][i], 0.5):>12.2f}")
        for label, i in (("point query store requests", 2), ("GetTables store requests", 3)):
            print(f"{label:<28}{warm['local'][i]:>12.1f}{warm['s3'][i]:>12.1f}")
        # Several servers on one S3 warehouse.
        s3b = serve(args.bin, f"s3://{bucket}/wh", tmp, env)
        procs.append(s3b[0])
        c = connect(s3[1])
        for t in ("r1", "r2", "shared1", "shared2"):
            run(c, f"CREATE TABLE {t} (id BIGINT NOT NULL, v STRING) WITH ('commit.max-retries' = '200')")
        c.close()
        per = max(10, args.commits // 2)
        one = commit_rate([(s3[1], "r1"), (s3[1], "r2")], per)
        two = commit_rate([(s3[1], "r1"), (s3b[1], "r2")], per)
        one_shared = commit_rate([(s3[1], "shared1"), (s3[1], "shared1")], per)
        two_shared = commit_rate([(s3[1], "shared2"), (s3b[1], "shared2")], per)
        print(f"{'commits/s, 2 tables':<28}{'1 server':>12}{'2 servers':>12}")
        print(f"{'':<28}{one:>12.1f}{two:>12.1f}")
        print(f"{'commits/s, 1 table':<28}{one_shared:>12.1f}{two_shared:>12.1f}")
    finally:
        for p in procs:
            stop(p)
        moto.kill()


if __name__ == "__main__":
    main()
