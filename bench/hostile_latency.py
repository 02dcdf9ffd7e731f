"""A small query's latency while heavy ones run (issue 12).

Starts `tidelake serve` (``--bin``, default target/release/tidelake) with a statement timeout, runs
``--heavy`` cartesian joins at a time from one user for ``--seconds``, and meanwhile `SELECT 1` in a loop
from another user. Prints the light query's latency percentiles and how long past their timeout the heavy
queries ended.

    .venv/bin/python bench/hostile_latency.py --bin target/release/tidelake --seconds 20
"""
import argparse
import pathlib
import re
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


def start(binary, warehouse, timeout_s):
    pw = serve.password_hash(binary)
    return serve.start(binary, warehouse, f"""
[[users]]
name = "heavy"
password_hash = "{pw}"
role = "reader"
[[users]]
name = "light"
password_hash = "{pw}"
role = "reader"
[query]
timeout_seconds = {timeout_s}
""")


pct = serve.pct


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=str(REPO / "target" / "release" / "tidelake"))
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--heavy", type=int, default=4)
    ap.add_argument("--timeout", type=int, default=3)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        proc, uri = start(a.bin, tmp, a.timeout)
        try:
            stop = time.monotonic() + a.seconds
            overruns, outcomes = [], {}
            idle = []
            for _ in range(30):
                t0 = time.monotonic()
                with tidelake.Client(uri, user="light", password="pw") as c:
                    c.sql("SELECT 1")
                idle.append(time.monotonic() - t0)

            def heavy():
                with tidelake.Client(uri, user="heavy", password="pw") as c:
                    while time.monotonic() < stop:
                        t0 = time.monotonic()
                        try:
                            c.sql(HEAVY)
                            kind = "ok"
                        except Exception as e:
                            kind = type(e).__name__
                        outcomes[kind] = outcomes.get(kind, 0) + 1
                        overruns.append(time.monotonic() - t0 - a.timeout)

            threads = [threading.Thread(target=heavy) for _ in range(a.heavy)]
            for t in threads:
                t.start()
            time.sleep(0.5)
            loaded, failed = [], []
            while time.monotonic() < stop:
                t0 = time.monotonic()
                try:
                    # A new connection each time, as a dashboard refresh or a new client would.
                    with tidelake.Client(uri, user="light", password="pw") as c:
                        c.sql("SELECT 1")
                    loaded.append(time.monotonic() - t0)
                except Exception as e:
                    failed.append((time.monotonic() - t0, type(e).__name__))
            for t in threads:
                t.join()
            print(f"SELECT 1 (new connection) idle: n={len(idle)} p50={pct(idle, .5):.1f} ms p99={pct(idle, .99):.1f} ms")
            print(f"SELECT 1 (new connection) beside {a.heavy} cartesian joins: n={len(loaded)} p50={pct(loaded, .5):.1f} ms "
                  f"p95={pct(loaded, .95):.1f} ms p99={pct(loaded, .99):.1f} ms max={pct(loaded, 1):.1f} ms")
            if failed:
                print(f"SELECT 1 failed {len(failed)} times: {sorted(set(f[1] for f in failed))}, after up to "
                      f"{max(f[0] for f in failed) * 1000:.0f} ms")
            print(f"heavy queries: {outcomes}; ended past their {a.timeout} s timeout by "
                  f"p50={pct(overruns, .5):.0f} ms max={pct(overruns, 1):.0f} ms")
            status = pathlib.Path(f"/proc/{proc.pid}/status").read_text()
            hwm = re.search(r"VmHWM:\s+(\d+)", status)
            print(f"server peak RSS: {int(hwm.group(1)) // 1024 if hwm else '?'} MB")
        finally:
            serve.stop(proc)


if __name__ == "__main__":
    main()
