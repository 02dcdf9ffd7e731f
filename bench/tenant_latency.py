"""A second tenant's small-query latency while the first saturates its limits (issue 14).

Starts `tidelake serve` (``--bin``, default target/release/tidelake) with tenants `acme`
(``--limit`` concurrent statements, a statement timeout) and `beta`, and for ``--seconds`` keeps
twice acme's limit of cartesian joins in flight from acme (the ones beyond its limit and queue are
refused with ResourceExhausted and retried at once), while beta runs `SELECT 1` in a loop on one
connection and on a new connection each time. Prints beta's latency percentiles idle and loaded, and
what became of acme's joins.

    .venv/bin/python bench/tenant_latency.py --bin target/release/tidelake --seconds 60
"""
import argparse
import pathlib
import sys
import tempfile
import threading
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "clients" / "python"))
import tidelake  # noqa: E402

import serve  # noqa: E402  (bench/serve.py)

HEAVY = ("SELECT count(*) FROM generate_series(1, 1000000) a, generate_series(1, 1000000) b "
         "WHERE a.value + b.value = 7")


def start(binary, tmp, limit, timeout_s):
    pw = serve.password_hash(binary)
    return serve.start(binary, tmp, f"""
[[tenants]]
name = "acme"
max_concurrent_statements = {limit}
statement_timeout_seconds = {timeout_s}
[[tenants]]
name = "beta"
[[users]]
name = "a"
password_hash = "{pw}"
tenant = "acme"
role = "reader"
[[users]]
name = "b"
password_hash = "{pw}"
tenant = "beta"
role = "reader"
""")


def summary(name, xs):
    pct = serve.pct
    return (f"{name}: n={len(xs)} p50={pct(xs, .5):.1f} ms p95={pct(xs, .95):.1f} ms "
            f"p99={pct(xs, .99):.1f} ms max={pct(xs, 1):.1f} ms")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=str(REPO / "target" / "release" / "tidelake"))
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--limit", type=int, default=4)
    ap.add_argument("--timeout", type=int, default=5)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        proc, uri = start(a.bin, tmp, a.limit, a.timeout)
        try:
            idle = []
            with tidelake.Client(uri, user="b", password="pw") as c:
                for _ in range(50):
                    t0 = time.monotonic()
                    c.sql("SELECT 1")
                    idle.append(time.monotonic() - t0)
            stop = time.monotonic() + a.seconds
            outcomes = {}
            lock = threading.Lock()

            def heavy():
                with tidelake.Client(uri, user="a", password="pw") as c:
                    while time.monotonic() < stop:
                        try:
                            c.sql(HEAVY)
                            kind = "ok"
                        except Exception as e:
                            kind = getattr(e, "code", type(e).__name__)
                            if kind == "RESOURCE_EXHAUSTED" and "max_concurrent_statements" in str(e):
                                kind = "refused at the limit"
                                time.sleep(0.05)
                        with lock:
                            outcomes[kind] = outcomes.get(kind, 0) + 1

            threads = [threading.Thread(target=heavy) for _ in range(2 * a.limit)]
            for t in threads:
                t.start()
            time.sleep(1.0)
            same, fresh, failed = [], [], []
            with tidelake.Client(uri, user="b", password="pw") as c:
                while time.monotonic() < stop:
                    t0 = time.monotonic()
                    try:
                        c.sql("SELECT 1")
                        same.append(time.monotonic() - t0)
                        t0 = time.monotonic()
                        with tidelake.Client(uri, user="b", password="pw") as n:
                            n.sql("SELECT 1")
                        fresh.append(time.monotonic() - t0)
                    except Exception as e:
                        failed.append(type(e).__name__)
            for t in threads:
                t.join()
            print(summary("beta SELECT 1, idle server", idle))
            print(summary(f"beta SELECT 1, one connection, acme at {2 * a.limit} joins / limit {a.limit}", same))
            print(summary("beta SELECT 1, new connection each (login + query)", fresh))
            print(f"beta failures: {len(failed)} {sorted(set(failed))}")
            print(f"acme joins: {outcomes}")
        finally:
            serve.stop(proc)


if __name__ == "__main__":
    main()
