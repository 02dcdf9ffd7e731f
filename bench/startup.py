#!/usr/bin/env python3
"""Start-up and shutdown time of `tidelake serve` on an existing warehouse: spawn to the
`tidelake listening on` line, and SIGTERM to exit. Prints one JSON line per run.

Usage: python bench/startup.py [--bin target/debug/tidelake] [--warehouse DIR] [--runs 5]"""
import argparse, json, os, signal, subprocess, tempfile, time

ap = argparse.ArgumentParser()
ap.add_argument("--bin", default="target/debug/tidelake")
ap.add_argument("--warehouse")
ap.add_argument("--runs", type=int, default=5)
a = ap.parse_args()
wh = a.warehouse or tempfile.mkdtemp(prefix="tidelake-startup-")
env = dict(os.environ, TIDELAKE_PASSWORD="bench")
for i in range(a.runs):
    t0 = time.perf_counter()
    p = subprocess.Popen([a.bin, "serve", "--warehouse", wh, "--listen", "127.0.0.1:0"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    line = p.stdout.readline().decode().strip()
    up = time.perf_counter() - t0
    t1 = time.perf_counter()
    p.send_signal(signal.SIGTERM)
    rc = p.wait()
    down = time.perf_counter() - t1
    print(json.dumps({"bench": "startup", "run": i, "listening_ms": round(up * 1000, 1),
                      "shutdown_ms": round(down * 1000, 1), "exit": rc, "line": line}))
