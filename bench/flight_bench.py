#!/usr/bin/env python3
"""Arrow Flight on loopback: tidelake's Flight SQL server beside pyarrow's C++ Flight server.

Both servers run at once, each in its own process; one pyarrow.flight client (this process) drives
both with the same code, the same pre-generated batches and the same batch size, alternating peers
within each repetition. Measured (workload W's columns: id BIGINT NOT NULL, k BIGINT, v DOUBLE, s STRING):

  doget           full scan of a --rows append table: GetFlightInfo(CommandStatementQuery
                  "SELECT * FROM default.a_1") + DoGet of every endpoint, read batch by batch
                  (read_chunk). MB/s = sum(batch.nbytes) of the received batches / s (MB = 10^6 bytes).
                  The pyarrow peer serves the same rows from memory (a Table cut into batches of the
                  size tidelake sent, by default) as a RecordBatchStream.
  doput_append    DoPut(CommandStatementIngest, if_exists=APPEND) of --rows rows into an append table.
  doput_parquet   the same append DoPut, the pyarrow peer writing what it receives as zstd (level 1)
                  Parquet: the same work as an ingest, encode and write.
  doput_pk_insert DoPut of --point-rows rows (random key order) into a primary-key table (4 buckets).
  doput_pk_upsert DoPut of --upserts rows into that table, half of them existing keys.
                  The pyarrow peer reads every batch and discards it; both answer with one PutResult
                  holding DoPutUpdateResult{record_count}.
  point query     p50/p99 of SELECT * FROM default.w_1 WHERE id = <random existing key> on the
                  --point-rows table, through ADBC (DB-API cursor; the literal changes every query so
                  the driver prepares every time: the BI path), through ADBC with a bound parameter
                  (prepared once, bind + execute per query), the same with LIMIT 2 (not a point
                  query's shape, so DataFusion plans it: what sql::point saves), through raw
                  pyarrow.flight (GetFlightInfo + DoGet), and from 8 concurrent ADBC clients (bound,
                  queries/s), and from 8 Rust clients making ADBC's calls (`tidelake bench
                  --point-queries`, 10 s of random existing keys: the server's ceiling, as the Rust
                  client costs the shared cores little). No pyarrow-server peer.
  doget_parquet   the same scan, the pyarrow peer reading tidelake's Parquet files of that table for
                  each DoGet (pyarrow.dataset, its threads): the same work, decode and send.
  doget_adbc      the same full scan through ADBC (cursor.execute + fetch_record_batch), tidelake only.
  doget_pk_merge  full scan of the PK table after the upsert (merge on read), tidelake only.

Ratios are tidelake / pyarrow per repetition (same-repetition pairs); the reported ratio is the
median over the --repeat pairs. Each DoPut repetition writes fresh tables (a_R, w_R) so every
repetition does the same work. DoPut timing runs from do_put() to the PutResult (the server's commit
included); generation is done once, before any timing.

Output: a human-readable table, then one JSON line per measurement and per ratio (prefix-free, for
bench/RESULTS.md).

Usage:
  .venv/bin/python bench/flight_bench.py [--rows 10000000] [--point-rows 5000000] [--upserts N]
      [--queries 200] [--repeat 3] [--batch 65536] [--bin target/release/tidelake] [--keep DIR]
      [--only both|tidelake|pyarrow] [--peer-get-batch match|N] [--server-log]
Needs: pyarrow, numpy, adbc-driver-flightsql, adbc-driver-manager and the tidelake client package
(clients/python, whose Flight SQL message codecs it uses); scripts/setup-python.sh installs them into .venv.
"""
import argparse, json, os, shutil, signal, statistics, subprocess, sys, tempfile, threading, time
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.flight as flight

try:  # the Python client's message codecs (scripts/setup-python.sh installs it into .venv)
    from tidelake import flight_sql
except ImportError:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "clients", "python"))
    from tidelake import flight_sql

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("k", pa.int64()), ("v", pa.float64()),
                    ("s", pa.string())])
USER = PASSWORD = "bench"
RESULTS = []  # every emitted measurement, in order
ECHO_SERVER_LOG = False


# ---------------------------------------------------------------- Flight SQL messages
def query_descriptor(sql):
    return flight.FlightDescriptor.for_command(flight_sql.encode_statement_query(sql))


def ingest_descriptor(table, schema="default"):
    # TableDefinitionOptions{if_not_exist = FAIL(2), if_exists = APPEND(2)}
    return flight.FlightDescriptor.for_command(flight_sql.encode_statement_ingest(table, database=schema,
                                                                                  mode="append"))


def put_result_count(buf):
    """DoPutUpdateResult{int64 record_count = 1} -> record_count (None if absent)."""
    if buf is None:
        return None
    return flight_sql.decode_update_result(buf)


# ---------------------------------------------------------------- data
def make_batch(rng, ids):
    """Workload W's row shape (../shared/bench/peers_w.py make_batch)."""
    n = len(ids)
    s = pc.utf8_lpad(pc.cast(pa.array(rng.integers(0, 10**13, n, dtype=np.int64)), pa.string()), 14, "0")
    s = pc.binary_join_element_wise(pa.scalar("s-"), s, "")
    return pa.RecordBatch.from_arrays([pa.array(ids, pa.int64()),
                                       pa.array(rng.integers(0, 1_000_000, n, dtype=np.int64)),
                                       pa.array(rng.random(n)), s], schema=SCHEMA)


def batches_for(rng, ids, batch):
    return [make_batch(rng, ids[i:i + batch]) for i in range(0, len(ids), batch)]


def nbytes(batches):
    return sum(b.nbytes for b in batches)


# ---------------------------------------------------------------- the pyarrow peer server
class PeerServer(flight.FlightServerBase):
    """pyarrow's C++ Flight server: DoGet streams an in-memory Table, DoPut reads and discards."""

    def __init__(self, location, table):
        super().__init__(location)
        self.table = table
        self.parquet = None  # a glob: DoGet then reads these Parquet files (decode and send)
        self.write_dir = None  # a directory: DoPut then writes what it receives as zstd Parquet there
        self.puts = 0

    def get_flight_info(self, context, descriptor):
        ep = flight.FlightEndpoint(b"scan", [])
        return flight.FlightInfo(self.table.schema, descriptor, [ep], self.table.num_rows, -1)

    def do_get(self, context, ticket):
        if self.parquet is not None:
            import glob
            import pyarrow.dataset as ds
            # The same work as tidelake's DoGet of a table: read its Parquet files and send them,
            # batch by batch, decoding ahead on pyarrow's threads.
            d = ds.dataset(sorted(glob.glob(self.parquet)), format="parquet")
            return flight.GeneratorStream(d.schema, d.to_batches(use_threads=True))
        return flight.RecordBatchStream(self.table)

    def do_put(self, context, descriptor, reader, writer):
        n = 0
        out = None
        if self.write_dir is not None:  # the same work as an ingest: write them as zstd Parquet
            import pyarrow.parquet as pq
            self.puts += 1
            out = pq.ParquetWriter(os.path.join(self.write_dir, f"put-{self.puts}.parquet"), reader.schema,
                                   compression="zstd", compression_level=1)
        while True:
            try:
                chunk = reader.read_chunk()
            except StopIteration:
                break
            n += chunk.data.num_rows
            if out is not None:
                out.write_batch(chunk.data)
        if out is not None:
            out.close()
        writer.write(pa.py_buffer(flight_sql.encode_update_result(n)))

    def do_action(self, context, action):
        if action.type == "parquet":  # serve DoGet from these files (a glob) from now on
            self.parquet = action.body.to_pybytes().decode()
            return [pa.py_buffer(b"ok")]
        if action.type == "rechunk":  # serve batches of this many rows from now on
            rows = int(action.body.to_pybytes())
            t = self.table.combine_chunks()
            self.table = pa.Table.from_batches(t.to_batches(max_chunksize=rows), schema=t.schema)
            return [pa.py_buffer(str(self.table.num_rows).encode())]
        if action.type == "write_parquet":  # DoPut writes zstd Parquet into this directory ("" stops)
            self.write_dir = action.body.to_pybytes().decode() or None
            return [pa.py_buffer(b"ok")]
        if action.type == "memory":  # serve the in-memory table again
            self.parquet = None
            return [pa.py_buffer(b"ok")]
        raise flight.FlightUnavailableError(action.type)


def serve_peer(ipc_path):
    with pa.OSFile(ipc_path) as f:  # read into memory (not mapped)
        table = pa.ipc.open_file(f).read_all()
    server = PeerServer("grpc://127.0.0.1:0", table)
    print(f"peer listening on 127.0.0.1:{server.port}", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    server.serve()


# ---------------------------------------------------------------- processes
class Proc:
    """A server child: waits for its 'listening on HOST:PORT' line, drains its output, reads its CPU."""

    def __init__(self, name, argv, env=None, ready="listening on ", timeout=120):
        self.name = name
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)
        self.err_tail = []
        self.port = None
        got = threading.Event()

        def out():
            for line in self.p.stdout:
                if self.port is None and ready in line:
                    self.port = int(line.strip().rsplit(":", 1)[1])
                    got.set()
            got.set()

        def err():
            for line in self.p.stderr:
                self.err_tail.append(line.rstrip())
                if ECHO_SERVER_LOG:
                    print(f"[{name}] {line.rstrip()}", file=sys.stderr)
                del self.err_tail[:-50]

        threading.Thread(target=out, daemon=True).start()
        threading.Thread(target=err, daemon=True).start()
        if not got.wait(timeout) or self.port is None:
            self.stop()
            raise RuntimeError(f"{name} did not print '{ready}HOST:PORT' (exit {self.p.poll()}); "
                               f"stderr tail:\n" + "\n".join(self.err_tail[-20:]))

    def cpu(self):
        try:
            with open(f"/proc/{self.p.pid}/stat") as f:
                parts = f.read().rsplit(")", 1)[1].split()
            return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")
        except OSError:
            return float("nan")

    def rss_mb(self):
        try:
            with open(f"/proc/{self.p.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) / 1024
        except OSError:
            pass
        return float("nan")

    def stop(self, timeout=60):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(timeout)
            except subprocess.TimeoutExpired:
                print(f"# {self.name} did not stop {timeout}s after SIGTERM; killing it", file=sys.stderr)
                self.p.kill()
                self.p.wait()
        return self.p.returncode


def client_cpu():
    t = os.times()
    return t.user + t.system


# ---------------------------------------------------------------- measurements
class Peer:
    def __init__(self, name, proc, options):
        self.name, self.proc, self.options = name, proc, options
        self.client = flight.FlightClient(f"grpc://127.0.0.1:{proc.port}")


def timed(peer, fn):
    c0, s0 = client_cpu(), peer.proc.cpu()
    t0 = time.perf_counter()
    out = fn()
    dt = time.perf_counter() - t0
    return dt, out, dict(client_cpu_s=round(client_cpu() - c0, 3), server_cpu_s=round(peer.proc.cpu() - s0, 3))


def flight_doget(peer, sql):
    """GetFlightInfo + DoGet of every endpoint, streaming; returns stats (timing is the caller's)."""
    t0 = time.perf_counter()
    info = peer.client.get_flight_info(query_descriptor(sql), peer.options)
    t_info = time.perf_counter() - t0
    rows = size = nb = 0
    sizes = []
    t_first = None
    schema_note = None
    for ep in info.endpoints:
        reader = peer.client.do_get(ep.ticket, peer.options)
        if not reader.schema.equals(info.schema) and schema_note is None:
            schema_note = f"GetFlightInfo schema {info.schema} != DoGet stream schema {reader.schema}"
        while True:
            try:
                chunk = reader.read_chunk()
            except StopIteration:
                break
            b = chunk.data
            if t_first is None:
                t_first = time.perf_counter() - t0
            rows += b.num_rows
            size += b.nbytes
            nb += 1
            sizes.append(b.num_rows)
    return dict(rows=rows, bytes=size, batches=nb, endpoints=len(info.endpoints),
                median_batch_rows=int(statistics.median(sizes)) if sizes else 0,
                flight_info_s=round(t_info, 4), first_batch_s=round(t_first or 0, 4),
                **({"schema_note": " ".join(schema_note.split())} if schema_note else {}))


def flight_doput(peer, table, batches):
    writer, reader = peer.client.do_put(ingest_descriptor(table), SCHEMA, peer.options)
    for b in batches:
        writer.write_batch(b)
    writer.done_writing()
    res = reader.read()
    writer.close()
    return put_result_count(res)


def emit(op, peer, path, seconds, rows, **kw):
    rec = dict(bench="flight", op=op, peer=peer, path=path, rows=rows, seconds=round(seconds, 4),
               rows_per_s=round(rows / seconds) if seconds > 0 else None)
    if "bytes" in kw:
        rec["mb_per_s"] = round(kw["bytes"] / 1e6 / seconds, 1)
    rec.update(kw)
    RESULTS.append(rec)
    print("  " + json.dumps(rec), file=sys.stderr, flush=True)
    return rec


def percentile(xs, q):
    return float(np.percentile(np.array(xs), q)) if xs else float("nan")


# ---------------------------------------------------------------- tidelake via ADBC
def adbc_connect(port):
    import adbc_driver_flightsql.dbapi as fsql
    return fsql.connect(f"grpc://127.0.0.1:{port}", db_kwargs={"username": USER, "password": PASSWORD},
                        autocommit=True)


def adbc_sql(conn, sql):
    cur = conn.cursor()
    try:
        cur.execute(sql)
        return cur.fetchall()
    finally:
        cur.close()


def point_queries(name, conn, peer, table, table_rows, keys, problems, warmup=5, connect=None, rust_client=None):
    """Three client paths over the same keys, then (with `connect`) 8 concurrent ADBC clients and
    (with `rust_client`, (binary, port)) 8 Rust clients; returns {path: [latencies s]} (errors
    reported)."""
    out = {}

    def check(tbl, key, where):
        if tbl.num_rows != 1 or tbl.column("id")[0].as_py() != key:
            raise AssertionError(f"{where}: id = {key} returned {tbl.num_rows} rows "
                                 f"{tbl.column('id').to_pylist()[:5] if tbl.num_rows else ''}")

    def run(path, one):
        lat = []
        try:
            for i, key in enumerate(list(keys[:warmup]) + list(keys)):
                t0 = time.perf_counter()
                tbl = one(int(key))
                dt = time.perf_counter() - t0
                check(tbl, int(key), path)
                if i >= warmup:
                    lat.append(dt)
        except Exception as e:  # report, go on with the other paths
            msg = " ".join(f"{type(e).__name__}: {e}".split())[:600]
            print(f"# point query via {path} FAILED after {len(lat)} queries: {msg}", file=sys.stderr)
            problems.append(f"point query via {path} failed after {len(lat)} timed queries: {msg}")
            RESULTS.append(dict(bench="flight", op="point_query", peer=name, path=path, error=msg))
            return
        out[path] = lat
        rec = dict(bench="flight", op="point_query", peer=name, path=path, table_rows=table_rows, queries=len(lat),
                   p50_ms=round(percentile(lat, 50) * 1e3, 3), p99_ms=round(percentile(lat, 99) * 1e3, 3),
                   mean_ms=round(statistics.mean(lat) * 1e3, 3), max_ms=round(max(lat) * 1e3, 3))
        RESULTS.append(rec)
        print("  " + json.dumps(rec), file=sys.stderr, flush=True)

    cur = conn.cursor()

    def adbc_literal(key):
        cur.execute(f"SELECT * FROM default.{table} WHERE id = {key}")
        return cur.fetch_arrow_table()

    pcur = conn.cursor()

    def adbc_param(key):
        pcur.execute(f"SELECT * FROM default.{table} WHERE id = ?", (key,))
        return pcur.fetch_arrow_table()

    def adbc_planned(key):
        # Not a point query's shape (LIMIT): DataFusion plans it, as every query was before sql::point.
        pcur.execute(f"SELECT * FROM default.{table} WHERE id = ? LIMIT 2", (key,))
        return pcur.fetch_arrow_table()

    def raw(key):
        info = peer.client.get_flight_info(query_descriptor(f"SELECT * FROM default.{table} WHERE id = {key}"),
                                           peer.options)
        parts = [peer.client.do_get(ep.ticket, peer.options).read_all() for ep in info.endpoints]
        return pa.concat_tables(parts) if len(parts) != 1 else parts[0]

    run("adbc (prepare per query)", adbc_literal)
    run("adbc (prepared once, bound ?)", adbc_param)
    run("adbc (bound ?, LIMIT 2: planned)", adbc_planned)
    run("pyarrow.flight", raw)
    cur.close()
    pcur.close()
    if connect is not None:
        concurrent_point_queries(name, connect, table, table_rows, keys, problems, check)
    if rust_client is not None:
        rust_point_queries(name, rust_client, table, table_rows, problems)
    return out


def rust_point_queries(name, rust_client, table, table_rows, problems, clients=8, seconds=10):
    """`tidelake bench --point-queries`: `clients` Rust Flight SQL clients (arrow-flight's, making
    ADBC's calls for a bound prepared query) for `seconds`, random existing keys. The client costs
    little CPU, so this shows the server's ceiling on the shared cores."""
    binary, port = rust_client
    path = f"rust flight sql bound ?, {clients} clients"
    cmd = [binary, "bench", "--point-queries", f"grpc://127.0.0.1:{port}", "--table", f"default.{table}",
           "--key-below", str(table_rows), "--clients", str(clients), "--seconds", str(seconds), "--user", USER]
    got = subprocess.run(cmd, env=dict(os.environ, TIDELAKE_PASSWORD=PASSWORD), capture_output=True, text=True)
    if got.returncode != 0:
        msg = " ".join(got.stderr.split())[:600]
        problems.append(f"point query via {path} failed: {msg}")
        RESULTS.append(dict(bench="flight", op="point_query", peer=name, path=path, error=msg))
        return
    rec = dict(json.loads(got.stdout.strip().splitlines()[-1]), peer=name, table_rows=table_rows)
    RESULTS.append(rec)
    print("  " + json.dumps(rec), file=sys.stderr, flush=True)


def concurrent_point_queries(name, connect, table, table_rows, keys, problems, check, clients=8):
    """`clients` threads, each with its own ADBC connection and a statement prepared once, run every
    key bound (each from another offset); queries/s over the wall time of all of them, and the p50/p99
    of every query. Client and server share the machine's cores, as they would on one box."""
    conns = [connect() for _ in range(clients)]
    lat = [[] for _ in range(clients)]
    errors = []
    ready = threading.Barrier(clients + 1)
    sql = f"SELECT * FROM default.{table} WHERE id = ?"

    def work(i):
        cur = conns[i].cursor()
        try:
            cur.execute(sql, (int(keys[0]),))
            cur.fetch_arrow_table()
            ready.wait()
            for j in range(len(keys)):
                key = int(keys[(j + i * len(keys) // clients) % len(keys)])
                t0 = time.perf_counter()
                cur.execute(sql, (key,))
                tbl = cur.fetch_arrow_table()
                lat[i].append(time.perf_counter() - t0)
                check(tbl, key, f"{clients} clients")
        except Exception as e:
            errors.append(" ".join(f"{type(e).__name__}: {e}".split())[:600])
            try:
                ready.abort()
            except Exception:
                pass
        finally:
            cur.close()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    try:
        ready.wait()
    except threading.BrokenBarrierError:
        pass
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    for c in conns:
        c.close()
    path = f"adbc bound ?, {clients} clients"
    if errors:
        problems.append(f"point query via {path} failed: {errors[0]}")
        RESULTS.append(dict(bench="flight", op="point_query", peer=name, path=path, error=errors[0]))
        return
    every = [x for xs in lat for x in xs]
    rec = dict(bench="flight", op="point_query", peer=name, path=path, table_rows=table_rows, queries=len(every),
               p50_ms=round(percentile(every, 50) * 1e3, 3), p99_ms=round(percentile(every, 99) * 1e3, 3),
               mean_ms=round(statistics.mean(every) * 1e3, 3), max_ms=round(max(every) * 1e3, 3),
               queries_per_s=round(len(every) / wall, 1))
    RESULTS.append(rec)
    print("  " + json.dumps(rec), file=sys.stderr, flush=True)


# ---------------------------------------------------------------- main
def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=10_000_000, help="rows of the DoGet scan and the append DoPut")
    ap.add_argument("--point-rows", type=int, default=5_000_000, help="rows inserted into the PK table")
    ap.add_argument("--upserts", type=int, default=None, help="rows upserted (half existing keys); "
                    "default --point-rows")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=3, help="pairs per transfer measurement")
    ap.add_argument("--batch", type=int, default=65536, help="rows per DoPut batch (both peers)")
    ap.add_argument("--peer-get-batch", default="match",
                    help="rows per batch the pyarrow peer sends on DoGet: 'match' = tidelake's median "
                         "batch size seen on the first DoGet (--batch when tidelake is not run), or a number")
    ap.add_argument("--bin", default=None, help="tidelake binary (default target/release/tidelake if it "
                    "exists, else target/debug/tidelake)")
    ap.add_argument("--keep", default=None, help="keep the warehouse (and the peer's IPC file) under DIR")
    ap.add_argument("--only", choices=["both", "tidelake", "pyarrow"], default="both")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--server-log", action="store_true", help="echo the servers' stderr")
    ap.add_argument("--serve-peer", default=None, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.serve_peer:
        return serve_peer(a.serve_peer)
    global ECHO_SERVER_LOG
    ECHO_SERVER_LOG = a.server_log

    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if a.bin is None:
        rel = os.path.join(repo, "target/release/tidelake")
        a.bin = rel if os.path.exists(rel) else os.path.join(repo, "target/debug/tidelake")
    U = a.upserts if a.upserts is not None else a.point_rows
    run_tl, run_pa = a.only in ("both", "tidelake"), a.only in ("both", "pyarrow")
    if a.keep:
        os.makedirs(a.keep, exist_ok=True)
        work = tempfile.mkdtemp(prefix="flight-bench-", dir=a.keep)
    else:
        work = tempfile.mkdtemp(prefix="tidelake-flight-bench-")
    print(f"# work dir {work}" + ("" if a.keep else " (removed at exit)"), file=sys.stderr)

    # ---- data, generated once
    t0 = time.perf_counter()
    rng = np.random.default_rng(a.seed)
    append_b = batches_for(rng, np.arange(a.rows, dtype=np.int64), a.batch)
    ins_ids = rng.permutation(a.point_rows).astype(np.int64)
    insert_b = batches_for(rng, ins_ids, a.batch)
    n_old = U // 2
    up_ids = np.concatenate([rng.choice(a.point_rows, size=min(n_old, a.point_rows), replace=False),
                             np.arange(a.point_rows, a.point_rows + U - min(n_old, a.point_rows))]).astype(np.int64)
    rng.shuffle(up_ids)
    upsert_b = batches_for(rng, up_ids, a.batch)
    keys = rng.integers(0, a.point_rows, a.queries)
    ipc = os.path.join(work, "peer_table.arrow")
    if run_pa:
        with pa.OSFile(ipc, "wb") as f, pa.ipc.new_file(f, SCHEMA) as w:
            for b in append_b:
                w.write_batch(b)
    print(f"# generated {a.rows:,} + {a.point_rows:,} + {U:,} rows in {time.perf_counter() - t0:.1f}s "
          f"({nbytes(append_b) / 1e6:.0f} MB for the scan table); batch {a.batch:,} rows", file=sys.stderr)

    tl = pa_peer = None
    conn = None
    problems = []
    try:
        # ---- servers
        if run_tl:
            if not os.path.exists(a.bin):
                raise SystemExit(f"no tidelake binary at {a.bin} (build it, or pass --bin / --only pyarrow)")
            wh = os.path.join(work, "warehouse")
            os.makedirs(wh, exist_ok=True)
            env = dict(os.environ, TIDELAKE_USER=USER, TIDELAKE_PASSWORD=PASSWORD)
            proc = Proc("tidelake", [a.bin, "serve", "--warehouse", wh, "--listen", "127.0.0.1:0"], env=env,
                        ready="tidelake listening on ")
            tl = Peer("tidelake", proc, None)
            try:
                pair = tl.client.authenticate_basic_token(USER, PASSWORD)
            except Exception as e:
                raise SystemExit(f"pyarrow.flight authenticate_basic_token failed: {type(e).__name__}: {e}")
            tl.options = flight.FlightCallOptions(headers=[pair])
            try:
                conn = adbc_connect(proc.port)
            except Exception as e:
                raise SystemExit(f"ADBC connect failed: {type(e).__name__}: {e}")
            print(f"# tidelake {a.bin} on port {proc.port}", file=sys.stderr)
        if run_pa:
            proc = Proc("pyarrow", [sys.executable, os.path.abspath(__file__), "--serve-peer", ipc],
                        ready="peer listening on ")
            pa_peer = Peer("pyarrow", proc, flight.FlightCallOptions())
            print(f"# pyarrow {pa.__version__} Flight server on port {proc.port} "
                  f"(rss {proc.rss_mb():.0f} MB)", file=sys.stderr)

        def guard(what, p, fn):
            """Run one call; on error record it (with the server's last log lines) and return None."""
            try:
                return fn()
            except Exception as e:
                msg = " ".join(f"{type(e).__name__}: {e}".split())[:600]
                tail = " | ".join(p.proc.err_tail[-3:]) if p is not None else ""
                problems.append(f"{what}: {msg}" + (f" [{p.name} stderr: {tail}]" if tail else ""))
                print(f"# FAILED {what}: {msg}", file=sys.stderr)
                if p is not None and p.proc.p.poll() is not None:
                    raise SystemExit(f"{p.name} exited with {p.proc.p.returncode}; stderr tail:\n"
                                     + "\n".join(p.proc.err_tail[-20:]))
                return None

        def ddl(sql):
            guard(f"ADBC cursor.execute({sql!r})", tl, lambda: adbc_sql(conn, sql))

        def ordered(r):  # alternate which peer goes first
            peers = [p for p in (tl, pa_peer) if p is not None]
            return peers if r % 2 == 0 else peers[::-1]

        # ---- DoPut append
        print("# DoPut append", file=sys.stderr)
        for r in range(a.repeat):
            if tl:
                ddl(f"CREATE TABLE default.a_{r + 1} (id BIGINT NOT NULL, k BIGINT, v DOUBLE, s STRING)")
            for p in ordered(r):
                got = guard(f"{p.name} DoPut(CommandStatementIngest default.a_{r + 1})", p,
                            lambda: timed(p, lambda: flight_doput(p, f"a_{r + 1}", append_b)))
                if got is None:
                    continue
                dt, n, cpu = got
                emit("doput_append", p.name, "pyarrow.flight", dt, a.rows, rep=r + 1, bytes=nbytes(append_b),
                     put_result_count=n, batch_rows=a.batch, **cpu)
                if n is not None and n != a.rows and n != -1:
                    problems.append(f"{p.name} DoPut append a_{r + 1}: PutResult record_count {n} != {a.rows}")

        # ---- DoPut append beside a peer that writes zstd Parquet (the same work: encode and write)
        if pa_peer:
            put_dir = os.path.join(work, "peer-puts")
            os.makedirs(put_dir, exist_ok=True)
            list(pa_peer.client.do_action(flight.Action("write_parquet", put_dir.encode()), pa_peer.options))
            print("# DoPut append, the pyarrow peer writing zstd Parquet", file=sys.stderr)
            for r in range(a.repeat):
                if tl:
                    ddl(f"CREATE TABLE default.ap_{r + 1} (id BIGINT NOT NULL, k BIGINT, v DOUBLE, s STRING)")
                for p in ordered(r):
                    got = guard(f"{p.name} DoPut append (peer writes Parquet) ap_{r + 1}", p,
                                lambda: timed(p, lambda: flight_doput(p, f"ap_{r + 1}", append_b)))
                    if got is None:
                        continue
                    dt, n, cpu = got
                    emit("doput_parquet", p.name, "pyarrow.flight", dt, a.rows, rep=r + 1, bytes=nbytes(append_b),
                         put_result_count=n, batch_rows=a.batch, **cpu)
            list(pa_peer.client.do_action(flight.Action("write_parquet", b""), pa_peer.options))
            shutil.rmtree(put_dir, ignore_errors=True)

        # ---- DoGet
        print("# DoGet", file=sys.stderr)
        get_batch = a.batch
        for r in range(a.repeat):
            # the first repetition runs tidelake first so the peer can send batches of tidelake's size
            for p in ordered(r) if r > 0 else [x for x in (tl, pa_peer) if x]:
                if p is pa_peer and r == 0:
                    want = get_batch if a.peer_get_batch == "match" else int(a.peer_get_batch)
                    list(p.client.do_action(flight.Action("rechunk", str(want).encode()), p.options))
                    print(f"# pyarrow peer serves batches of {want:,} rows", file=sys.stderr)
                got = guard(f"{p.name} GetFlightInfo/DoGet(SELECT * FROM default.a_1)", p,
                            lambda: timed(p, lambda: flight_doget(p, "SELECT * FROM default.a_1")))
                if got is None:
                    continue
                dt, st, cpu = got
                emit("doget", p.name, "pyarrow.flight read_chunk", dt, rep=r + 1, **st, **cpu)
                if st["rows"] != a.rows:
                    problems.append(f"{p.name} DoGet SELECT * FROM default.a_1 returned {st['rows']} rows, "
                                    f"expected {a.rows}")
                if "schema_note" in st and r == 0:
                    problems.append(f"{p.name} SELECT * FROM default.a_1: {st['schema_note']}")
                if p is tl and r == 0:
                    get_batch = st["median_batch_rows"] or a.batch
        if tl and pa_peer:  # the same files decoded and sent: tidelake's table, pyarrow reading it
            files = os.path.join(wh, "default.db", "a_1", "bucket-*", "*.parquet")
            list(pa_peer.client.do_action(flight.Action("parquet", files.encode()), pa_peer.options))
            print(f"# DoGet of the Parquet files of default.a_1 (pyarrow peer decodes them per DoGet)",
                  file=sys.stderr)
            for r in range(a.repeat):
                for p in ordered(r):
                    got = guard(f"{p.name} DoGet of default.a_1's Parquet files", p,
                                lambda: timed(p, lambda: flight_doget(p, "SELECT * FROM default.a_1")))
                    if got is None:
                        continue
                    dt, st, cpu = got
                    emit("doget_parquet", p.name, "pyarrow.flight read_chunk", dt, rep=r + 1, **st, **cpu)
                    if st["rows"] != a.rows:
                        problems.append(f"{p.name} DoGet of a_1's files returned {st['rows']} rows")
            list(pa_peer.client.do_action(flight.Action("memory", b""), pa_peer.options))
        if tl:  # ADBC path, tidelake only
            def adbc_scan():
                cur = conn.cursor()
                cur.execute("SELECT * FROM default.a_1")
                rows = size = nb = 0
                for b in cur.fetch_record_batch():
                    rows += b.num_rows
                    size += b.nbytes
                    nb += 1
                cur.close()
                return dict(rows=rows, bytes=size, batches=nb)
            for r in range(a.repeat):
                got = guard("ADBC execute/fetch_record_batch(SELECT * FROM default.a_1)", tl,
                            lambda: timed(tl, adbc_scan))
                if got is None:
                    break
                dt, st, cpu = got
                emit("doget_adbc", "tidelake", "adbc fetch_record_batch", dt, rep=r + 1, **st, **cpu)

        # ---- PK insert, point queries, upsert
        print("# DoPut PK insert / upsert", file=sys.stderr)
        for r in range(a.repeat):
            if tl:
                ddl(f"CREATE TABLE default.w_{r + 1} (id BIGINT NOT NULL, k BIGINT, v DOUBLE, s STRING, "
                    f"PRIMARY KEY (id)) WITH ('bucket' = '4')")
            for phase, bs, n_exp in (("doput_pk_insert", insert_b, a.point_rows), ("doput_pk_upsert", upsert_b, U)):
                for p in ordered(r):
                    got = guard(f"{p.name} {phase}: DoPut(CommandStatementIngest default.w_{r + 1})", p,
                                lambda: timed(p, lambda: flight_doput(p, f"w_{r + 1}", bs)))
                    if got is None:
                        continue
                    dt, n, cpu = got
                    emit(phase, p.name, "pyarrow.flight", dt, n_exp, rep=r + 1, bytes=nbytes(bs),
                         put_result_count=n, batch_rows=a.batch, **cpu)
                    if n is not None and n != n_exp and n != -1:
                        problems.append(f"{p.name} {phase} w_{r + 1}: PutResult record_count {n} != {n_exp}")
                if phase == "doput_pk_insert" and r == 0 and tl:
                    print(f"# point queries on w_1 ({a.point_rows:,} rows)", file=sys.stderr)
                    point_queries("tidelake", conn, tl, "w_1", a.point_rows, keys, problems,
                                  connect=lambda: adbc_connect(tl.proc.port),
                                  rust_client=(a.bin, tl.proc.port))
        if tl:
            exp = a.point_rows + (U - min(U // 2, a.point_rows))
            got = guard("ADBC SELECT count(*) FROM default.w_1", tl,
                        lambda: adbc_sql(conn, "SELECT count(*) FROM default.w_1"))
            if got is not None and got[0][0] != exp:
                problems.append(f"SELECT count(*) FROM default.w_1 = {got[0][0]}, expected {exp} after the upsert")
            got = guard("GetFlightInfo/DoGet(SELECT * FROM default.w_1)", tl,
                        lambda: timed(tl, lambda: flight_doget(tl, "SELECT * FROM default.w_1")))
            if got is not None:
                dt, st, cpu = got
                emit("doget_pk_merge", "tidelake", "pyarrow.flight read_chunk", dt, **st, **cpu)
                if st["rows"] != exp:
                    problems.append(f"DoGet SELECT * FROM default.w_1 returned {st['rows']} rows, expected {exp}")
            print(f"# tidelake rss {tl.proc.rss_mb():.0f} MB", file=sys.stderr)
    finally:
        if conn is not None:
            try:
                conn.close()
            except Exception:
                pass
        for p in (tl, pa_peer):
            if p is not None:
                rc = p.proc.stop()
                if rc not in (0, -signal.SIGTERM) and p is tl:
                    problems.append(f"tidelake exited {rc} after SIGTERM; stderr tail: "
                                    + " | ".join(p.proc.err_tail[-5:]))
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)

    report(a, U, problems)


def report(a, U, problems):
    def recs(op, peer):
        return [r for r in RESULTS if r.get("op") == op and r.get("peer") == peer and "seconds" in r]

    def med(rs, key):
        v = [r[key] for r in rs if r.get(key) is not None]
        return statistics.median(v) if v else None

    ratios = []
    print()
    print(f"Arrow Flight on loopback, tidelake vs pyarrow {pa.__version__} C++ Flight server "
          f"(medians of {a.repeat}; batch {a.batch:,} rows; pyarrow.flight client for both)")
    hdr = f"{'measurement':<34}{'rows':>12}{'tidelake rows/s':>17}{'MB/s':>8}{'pyarrow rows/s':>17}{'MB/s':>8}{'ratio':>8}"
    print(hdr)
    print("-" * len(hdr))
    for op, label in (("doget", "DoGet scan (read_chunk)"),
                      ("doget_parquet", "DoGet scan, peer decodes the files"),
                      ("doput_append", "DoPut append"),
                      ("doput_parquet", "DoPut append, peer writes Parquet"),
                      ("doput_pk_insert", "DoPut PK insert"), ("doput_pk_upsert", "DoPut PK upsert (half existing)"),
                      ("doget_adbc", "DoGet scan via ADBC"), ("doget_pk_merge", "DoGet PK table (merge on read)")):
        t, p = recs(op, "tidelake"), recs(op, "pyarrow")
        if not t and not p:
            continue
        pair_r = []
        for rt in t:
            rp = [x for x in p if x.get("rep") == rt.get("rep")]
            if rp and rp[0]["rows_per_s"]:
                pair_r.append(rt["rows_per_s"] / rp[0]["rows_per_s"])
        ratio = statistics.median(pair_r) if pair_r else None
        rows = (t or p)[0]["rows"]
        f = lambda v: f"{v:,.0f}" if v is not None else "-"
        print(f"{label:<34}{rows:>12,}{f(med(t, 'rows_per_s')):>17}{f(med(t, 'mb_per_s')):>8}"
              f"{f(med(p, 'rows_per_s')):>17}{f(med(p, 'mb_per_s')):>8}"
              f"{(f'{ratio:.2f}x' if ratio is not None else '-'):>8}")
        if ratio is not None:
            ratios.append(dict(bench="flight", op=op, ratio="tidelake/pyarrow rows_per_s", median=round(ratio, 3),
                               pairs=[round(x, 3) for x in pair_r]))
    pq = [r for r in RESULTS if r.get("op") == "point_query"]
    if pq:
        print()
        print(f"Point query SELECT * FROM w WHERE id = <random key>, {a.point_rows:,}-row PK table, tidelake only")
        print(f"{'client path':<34}{'queries':>8}{'p50 ms':>10}{'p99 ms':>10}{'mean ms':>10}{'queries/s':>11}")
        for r in pq:
            if "error" in r:
                print(f"{r['path']:<34}  FAILED: {r['error'][:120]}")
            else:
                qps = f"{r['queries_per_s']:,.0f}" if "queries_per_s" in r else "-"
                print(f"{r['path']:<34}{r['queries']:>8}{r['p50_ms']:>10.2f}{r['p99_ms']:>10.2f}{r.get('mean_ms', float('nan')):>10.2f}"
                      f"{qps:>11}")
    if problems:
        print()
        print("Problems:")
        for p in problems:
            print("  - " + p)
    print()
    meta = dict(bench="flight", config=dict(rows=a.rows, point_rows=a.point_rows, upserts=U, queries=a.queries,
                                            repeat=a.repeat, batch=a.batch, bin=a.bin, pyarrow=pa.__version__,
                                            cpus=os.cpu_count(), date=time.strftime("%Y-%m-%d %H:%M")))
    print(json.dumps(meta))
    for r in RESULTS + ratios:
        print(json.dumps(r))
    for p in problems:
        print(json.dumps(dict(bench="flight", problem=p)))


if __name__ == "__main__":
    main()
