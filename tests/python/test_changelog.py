"""Changelog subscriptions end to end: Flight DoGet with a tidelake.ChangelogTicket (proto/tidelake.proto),
the Python helper in clients/python (`tidelake.subscribe`), the `t$changelog` system table, and pypaimon's
streaming read of the same changelog files.

The central check is Paimon's validateFullChangelog: a subscriber folds the changes into a map by primary
key (+I only for an absent key; -U and -D carry exactly the value the map holds; +U follows the -U of its key
in the same snapshot) and ends equal to a batch read of the same snapshot.

Snapshot ids are read from `t$snapshots`. The lookup and full-compaction producers commit their changelog in
the COMPACT snapshot right after each APPEND one (the statement returns after both), so a write's changes
are complete at the snapshot that is latest when the statement returned.
"""
import asyncio
import collections
import contextlib
import json
import os
import random
import select
import socket
import threading
import time

import pyarrow as pa
import pyarrow.flight as flight
import pytest

import tidelake
from tidelake.protocol import decode_progress, encode_ticket

from conftest import PASSWORD, USER, adbc_connect

WAIT = 30  # seconds any single expected event may take on a loaded 2-core machine with a debug build


# ---------------------------------------------------------------- SQL helpers


def run(conn, query):
    with conn.cursor() as cur:
        cur.execute(query)
        return cur.fetch_arrow_table()


def dml(conn, query):
    with conn.cursor() as cur:
        cur.execute(query)
        try:
            cur.fetch_arrow_table()
        except Exception:
            pass  # DML through ADBC runs as an update: no result set


def _sort_key(row):
    return tuple((v is None, v if v is not None else 0) for v in row)


def table_rows(conn, query):
    return sorted((tuple(r.values()) for r in run(conn, query).to_pylist()), key=_sort_key)


def snapshots(conn, t):
    """[(snapshot_id, commit_kind)] in id order."""
    db, name = t.split(".")
    return [(r["snapshot_id"], r["commit_kind"]) for r in
            run(conn, f'SELECT snapshot_id, commit_kind FROM {db}."{name}$snapshots" ORDER BY snapshot_id').to_pylist()]


def latest_snapshot(conn, t):
    s = snapshots(conn, t)
    return s[-1][0] if s else 0


def wait_quiet(conn, t, quiet=0.6, timeout=WAIT, last_kind=None):
    """The latest snapshot id once no new snapshot appeared for `quiet` s (and, with `last_kind`, the latest
    is of that kind)."""
    deadline = time.monotonic() + timeout
    prev, since = None, time.monotonic()
    while True:
        s = snapshots(conn, t)
        cur = s[-1] if s else (0, None)
        if cur != prev:
            prev, since = cur, time.monotonic()
        elif time.monotonic() - since >= quiet and (last_kind is None or cur[1] == last_kind):
            return cur[0]
        if time.monotonic() > deadline:
            pytest.fail(f"{t}: snapshots did not settle (latest {cur}, wanted kind {last_kind}); all: {s[-8:]}")
        time.sleep(0.1)


def table_dir(warehouse, t):
    db, name = t.split(".")
    return warehouse / f"{db}.db" / name


def subscribe(uri, table, **kw):
    kw.setdefault("user", USER)
    kw.setdefault("password", PASSWORD)
    return tidelake.subscribe(uri, table, **kw)


# ---------------------------------------------------------------- reading a subscription


def batch_changes(batch, snapshot):
    """[(snapshot, kind, row tuple without _row_kind)] of one batch."""
    assert batch.schema.names[0] == "_row_kind", batch.schema
    kinds = batch.column(0).to_pylist()
    cols = [c.to_pylist() for c in batch.columns[1:]]
    return [(snapshot, k, tuple(c[i] for c in cols)) for i, k in enumerate(kinds)]


class Collector:
    """Reads a Subscription's events on a thread, so a test waits with timeouts instead of blocking on the
    stream. `changes` is [(snapshot, kind, row)], `completed` the completed snapshot ids in arrival order,
    `heartbeats` [(monotonic_ns, snapshot)]."""

    def __init__(self, sub):
        self.sub = sub
        self.changes, self.completed, self.heartbeats, self.arrivals = [], [], [], []
        self.error = None
        self.done = False
        self._cv = threading.Condition()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        try:
            for ev in self.sub.events():
                now = time.monotonic_ns()
                p = ev.progress
                with self._cv:
                    if p.heartbeat:
                        self.heartbeats.append((now, p.snapshot_id))
                        assert ev.batch.num_rows == 0, f"heartbeat with {ev.batch.num_rows} rows"
                    else:
                        rows = batch_changes(ev.batch, p.snapshot_id)
                        self.changes.extend(rows)
                        self.arrivals.extend((now, r) for r in rows)
                        if p.complete:
                            self.completed.append(p.snapshot_id)
                    self._cv.notify_all()
        except BaseException as e:  # reported by wait()
            self.error = e
        finally:
            with self._cv:
                self.done = True
                self._cv.notify_all()

    def wait(self, pred, what, timeout=WAIT):
        deadline = time.monotonic() + timeout
        with self._cv:
            while not pred(self):
                if self.error is not None:
                    raise AssertionError(f"subscription failed while waiting for {what}: "
                                         f"{type(self.error).__name__}: {self.error}") from self.error
                if self.done:
                    pytest.fail(f"subscription ended before {what}; last completed {self.sub.last_snapshot_id}, "
                                f"{len(self.changes)} changes")
                left = deadline - time.monotonic()
                if left <= 0:
                    pytest.fail(f"timed out after {timeout} s waiting for {what}; last completed "
                                f"{self.sub.last_snapshot_id}, {len(self.changes)} changes, "
                                f"{len(self.heartbeats)} heartbeats")
                self._cv.wait(min(left, 0.5))

    def wait_snapshot(self, snapshot_id, timeout=WAIT):
        self.wait(lambda c: (c.sub.last_snapshot_id or 0) >= snapshot_id, f"snapshot {snapshot_id}", timeout)

    def wait_connected(self, timeout=WAIT):
        """Until the first message (a heartbeat, with a short heartbeat_millis): the position is fixed."""
        self.wait(lambda c: c.heartbeats or c.completed, "the first message", timeout)

    def wait_end(self, timeout=WAIT):
        self.wait(lambda c: c.done, "the end of the stream", timeout)
        if self.error is not None:
            raise self.error

    def close(self):
        self.sub.close()
        self._thread.join(10)
        if self.error is not None and not isinstance(self.error, StopIteration):
            raise self.error


@contextlib.contextmanager
def time_limit(seconds, *streams):
    """Closes (or cancels) `streams` after `seconds`, so a stream that never delivers fails the test
    instead of hanging the session."""
    fired = threading.Event()

    def fire():
        fired.set()
        for st in streams:
            try:
                st.cancel() if hasattr(st, "cancel") else st.close()
            except Exception:
                pass

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()
    try:
        yield
    except Exception:
        if fired.is_set():
            pytest.fail(f"timed out after {seconds} s")
        raise
    finally:
        timer.cancel()
    if fired.is_set():
        pytest.fail(f"timed out after {seconds} s")


def read_bounded(sub, timeout=WAIT * 2):
    """All changes of a bounded subscription; fails (instead of hanging) when it does not end."""
    c = Collector(sub)
    try:
        c.wait_end(timeout)
    finally:
        sub.close()
    return c


# ---------------------------------------------------------------- folding (Paimon's validateFullChangelog)


def fold_exact(changes, key=(0,)):
    """Folds an exact changelog into {key: row}; asserts the changelog is consistent on the way."""
    state, pending_before = {}, {}
    current = None
    for i, (snap, kind, row) in enumerate(changes):
        if snap != current:
            assert not pending_before, f"-U without +U in snapshot {current}: {pending_before}"
            current = snap
        k = tuple(row[j] for j in key)
        where = f"change #{i} {kind} {row} of snapshot {snap}"
        if kind == "+I":
            assert k not in state, f"{where}: +I of a present key (holds {state[k]})"
            state[k] = row
        elif kind == "-U":
            assert k in state, f"{where}: -U of an absent key"
            assert state[k] == row, f"{where}: -U does not carry the previous value {state[k]}"
            del state[k]
            pending_before[k] = snap
        elif kind == "+U":
            assert pending_before.pop(k, None) == snap, f"{where}: +U without a -U of the same key before it"
            state[k] = row
        elif kind == "-D":
            assert k in state, f"{where}: -D of an absent key"
            assert state[k] == row, f"{where}: -D does not carry the current value {state[k]}"
            del state[k]
        else:
            pytest.fail(f"{where}: unknown row kind")
    assert not pending_before, f"-U without +U in snapshot {current}: {pending_before}"
    return state


def fold_upsert(changes, key=(0,)):
    """The none producer: +I/+U put, -D removes; no -U is ever sent."""
    state = {}
    for snap, kind, row in changes:
        k = tuple(row[j] for j in key)
        assert kind in ("+I", "+U", "-D"), f"{kind} {row} in snapshot {snap}: the none producer sends no -U"
        if kind == "-D":
            state.pop(k, None)
        else:
            state[k] = row
    return state


def fold_append(changes):
    kinds = {kind for _, kind, _ in changes}
    assert kinds <= {"+I"}, f"an append table sent {kinds}"
    return sorted((row for _, _, row in changes), key=_sort_key)


def per_snapshot(changes):
    out = collections.defaultdict(list)
    for snap, kind, row in changes:
        out[snap].append((kind, row))
    return {s: sorted(v, key=lambda kr: (kr[0], _sort_key(kr[1]))) for s, v in out.items()}


# ---------------------------------------------------------------- random workloads

COMBOS = [
    ("none", "deduplicate"),
    ("input", "deduplicate"),
    ("lookup", "deduplicate"),
    ("lookup", "partial-update"),
    ("lookup", "aggregation"),
    ("lookup", "first-row"),
    ("full-compaction", "deduplicate"),
    ("full-compaction", "partial-update"),
    ("full-compaction", "aggregation"),
    ("append", None),
]
ENGINE_OPTIONS = {
    "deduplicate": {},
    "partial-update": {"partial-update.remove-record-on-delete": "true"},
    "aggregation": {"fields.n.aggregate-function": "sum", "aggregation.remove-record-on-delete": "true"},
    "first-row": {},
}
KEYS = 30


def create_table(conn, t, producer, engine, bucket=2, **extra):
    """`id BIGINT NOT NULL, v STRING, n BIGINT` with the given changelog producer and merge engine
    (producer "append": no primary key)."""
    if producer == "append":
        opts = dict(extra)
        pk = ""
    else:
        opts = {"bucket": str(bucket), "changelog-producer": producer, "merge-engine": engine,
                **ENGINE_OPTIONS[engine], **extra}
        pk = ", PRIMARY KEY (id)"
    with_ = ", ".join(f"'{k}' = '{v}'" for k, v in opts.items())
    run(conn, f"CREATE TABLE {t} (id BIGINT NOT NULL, v STRING, n BIGINT{pk})" + (f" WITH ({with_})" if with_ else ""))


def _lit(v):
    return "NULL" if v is None else (f"'{v}'" if isinstance(v, str) else str(v))


def random_statements(rng, producer, engine, commits):
    """Seeded INSERT/UPDATE/DELETE statements (one commit each) the table type accepts. The input producer
    writes its input as the changelog, so it gets a proper changelog: inserts of absent keys only."""
    present = set()
    out = []
    for _ in range(commits):
        ops = ["insert", "insert"]  # inserts as often as the rest, so the table does not run empty
        if producer != "append" and engine in ("deduplicate", "partial-update"):
            ops += ["update"]
        if producer != "append" and engine != "first-row":
            ops += ["delete"]
        if len(ops) == 4:
            ops += ["insert", "insert"]
        op = rng.choice(ops) if present else "insert"
        if op == "insert":
            pool = [k for k in range(KEYS) if k not in present] if producer == "input" else list(range(KEYS))
            if not pool:
                op = "delete"
            else:
                ids = rng.sample(pool, min(len(pool), rng.randint(1, 5)))
                values = []
                for i in ids:
                    v = rng.choice([None, f"s{rng.randint(0, 99)}", f"t{rng.randint(0, 99)}"])
                    n = rng.choice([None, rng.randint(-50, 50)]) if engine != "aggregation" else rng.randint(-50, 50)
                    values.append(f"({i}, {_lit(v)}, {_lit(n)})")
                present.update(ids)
                out.append(("insert", "INSERT INTO {t} VALUES " + ", ".join(values)))
                continue
        ids = rng.sample(sorted(present), min(len(present), rng.randint(1, 3)))
        where = "id IN (" + ", ".join(map(str, ids)) + ")"
        if op == "update":
            out.append(("update", f"UPDATE {{t}} SET n = {rng.randint(0, 999)}, v = 'u{rng.randint(0, 99)}' "
                                  f"WHERE {where}"))
        else:
            present.difference_update(ids)
            out.append(("delete", f"DELETE FROM {{t}} WHERE {where}"))
    return out


# ---------------------------------------------------------------- protocol codec (no server)


def test_ticket_and_progress_encoding():
    b = encode_ticket("db.t", "from-snapshot", snapshot_id=5, consumer_id="c", columns=["id", "v"],
                      filter="id > 1", heartbeat_millis=100, end_snapshot_id=9)
    # google.protobuf.Any{type_url = 1, value = 2}
    assert b.startswith(b"\x0a\x2ctype.googleapis.com/tidelake.ChangelogTicket\x12")
    t = tidelake.decode_ticket(b)
    assert (t.table, t.start, t.snapshot_id, t.consumer_id, t.columns, t.filter, t.heartbeat_millis,
            t.end_snapshot_id) == ("db.t", "from-snapshot", 5, "c", ["id", "v"], "id > 1", 100, 9)
    # ChangelogTicket{table = "x", start = FROM_SNAPSHOT (3), snapshot_id = 300}, defaults omitted
    assert b"\x12\x08\x0a\x01x\x10\x03\x18\xac\x02" in encode_ticket("x", "FROM_SNAPSHOT", snapshot_id=300,
                                                                   schema_change="schema-message")
    # The Python client's default asks for END_STREAM (schema_change = 11: 1), which pyarrow can follow.
    b = encode_ticket("x", "FROM_SNAPSHOT", snapshot_id=300)
    assert b.endswith(b"\x12\x0a\x0a\x01x\x10\x03\x18\xac\x02\x58\x01")
    assert tidelake.decode_ticket(b).schema_change == "end-stream"
    assert tidelake.decode_progress(b"\x08\x07\x10\x01\x18\x01") == tidelake.ChangelogProgress(7, True, True)
    assert tidelake.decode_progress(b"") == tidelake.ChangelogProgress(0, False, False)
    assert tidelake.decode_progress(pa.py_buffer(b"\x08\x96\x01")) == tidelake.ChangelogProgress(150)
    with pytest.raises(ValueError):
        encode_ticket("db.t", "sometimes")


# ---------------------------------------------------------------- fold equals batch read, per producer/engine


@pytest.mark.parametrize("producer,engine", COMBOS, ids=[f"{p}-{e}" if e else p for p, e in COMBOS])
def test_folded_changelog_equals_batch_read(uri, conn, db, producer, engine):
    t = f"{db}.t"
    create_table(conn, t, producer, engine)
    rng = random.Random(f"{producer}/{engine}/5")
    statements = random_statements(rng, producer, engine, commits=30)
    live = Collector(subscribe(uri, t, start="latest-full", heartbeat_millis=100))
    try:
        live.wait_connected()
        for _, sql in statements:
            dml(conn, sql.format(t=t))
        exact = producer in ("input", "lookup", "full-compaction")
        end = wait_quiet(conn, t, last_kind="COMPACT" if producer in ("lookup", "full-compaction") else None)
        live.wait_snapshot(end)
    finally:
        live.close()
    live_changes = [c for c in live.changes if c[0] <= end]
    bounded = read_bounded(subscribe(uri, t, start="from-snapshot", snapshot_id=1, end_snapshot_id=end))
    assert bounded.sub.last_snapshot_id == end
    expected = table_rows(conn, f"SELECT * FROM {t} FOR SYSTEM_TIME AS OF {end}")
    assert expected, "the workload left the table empty; the comparison would prove little"
    for name, changes in (("live (latest-full)", live_changes), ("bounded (from-snapshot 1)", bounded.changes)):
        if producer == "append":
            assert fold_append(changes) == expected, name
            continue
        folded = fold_exact(changes) if exact else fold_upsert(changes)
        assert sorted(folded.values(), key=_sort_key) == expected, f"{name}: fold != SELECT AS OF {end}"
    # Both subscriptions saw the same changes, snapshot by snapshot, in the same order.
    assert live_changes == bounded.changes
    # Every completed snapshot id is announced once, in increasing order.
    assert bounded.completed == sorted(set(bounded.completed))
    kinds = collections.Counter(k for _, k, _ in bounded.changes)
    if producer in ("lookup", "full-compaction") and engine != "first-row":
        assert kinds["-U"] == kinds["+U"] > 0, kinds


# ---------------------------------------------------------------- one subscriber, many commits


def _ordered_workload(conn, t, commits, on_commit=None):
    """Commit i inserts key i, and every 5th commit updates the previous key instead: returns the exact
    changes an input-producer subscriber must receive, in order."""
    expected = []
    for i in range(commits):
        if i % 5 == 4:
            old = (i - 1, f"v{i - 1}", i - 1)
            dml(conn, f"UPDATE {t} SET n = n + 1000 WHERE id = {i - 1}")
            expected += [("-U", old), ("+U", (i - 1, f"v{i - 1}", i - 1 + 1000))]
        else:
            dml(conn, f"INSERT INTO {t} VALUES ({i}, 'v{i}', {i})")
            expected.append(("+I", (i, f"v{i}", i)))
        if on_commit:
            on_commit(i)
    return expected


def _kinds_rows(changes):
    return [(k, r) for _, k, r in changes]


@pytest.mark.slow
def test_subscriber_across_many_commits_gets_every_change_once_in_order(uri, conn, db):
    t = f"{db}.t"
    create_table(conn, t, "input", "deduplicate")
    c = Collector(subscribe(uri, t, start="latest", heartbeat_millis=100))
    try:
        c.wait_connected()
        expected = _ordered_workload(conn, t, 120)
        end = wait_quiet(conn, t)
        c.wait_snapshot(end)
    finally:
        c.close()
    assert _kinds_rows(c.changes) == expected
    snaps = [s for s, _, _ in c.changes]
    assert snaps == sorted(snaps)
    assert c.completed == sorted(set(c.completed)) and c.completed[-1] == end
    assert {s for s, k in snapshots(conn, t) if k == "APPEND"} <= set(c.completed)


def _raw_stream(uri, ticket):
    client = flight.FlightClient(uri)
    opts = flight.FlightCallOptions(headers=[client.authenticate_basic_token(USER, PASSWORD)])
    return client, client.do_get(flight.Ticket(ticket), opts)


@pytest.mark.slow
def test_resume_from_last_app_metadata_snapshot_after_killing_the_connection(uri, conn, db):
    """Raw pyarrow.flight: cut the stream twice while commits go on, resume each time FROM_SNAPSHOT
    (last complete + 1); what is kept (the changes of completed snapshots) is every change exactly once."""
    t = f"{db}.t"
    create_table(conn, t, "input", "deduplicate")
    expected, done = [], threading.Event()
    writer_conn = adbc_connect(uri)

    def write():
        try:
            expected.extend(_ordered_workload(writer_conn, t, 110, on_commit=lambda i: time.sleep(0.005)))
        finally:
            done.set()

    kept, last = [], 0
    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        for cut_after in (25, 60, None):  # completed snapshots per connection; None: to the end
            if cut_after is None:
                assert done.wait(WAIT * 4), "writer did not finish"
                end = wait_quiet(conn, t)
                ticket = encode_ticket(t, "from-snapshot", snapshot_id=last + 1, end_snapshot_id=end)
            else:
                ticket = encode_ticket(t, "from-snapshot", snapshot_id=last + 1, heartbeat_millis=100)
            client, reader = _raw_stream(uri, ticket)
            pending, completed = [], 0
            try:
                with time_limit(WAIT * 4, reader):
                    while True:
                        try:
                            chunk = reader.read_chunk()
                        except StopIteration:
                            assert cut_after is None, "an unbounded stream ended"
                            break
                        p = decode_progress(chunk.app_metadata)
                        if p.heartbeat:
                            assert chunk.data.num_rows == 0 and p.complete
                            continue
                        assert p.snapshot_id > last, f"snapshot {p.snapshot_id} after completing {last}"
                        pending += batch_changes(chunk.data, p.snapshot_id)
                        if p.complete:
                            kept += pending
                            pending, last = [], p.snapshot_id
                            completed += 1
                            if cut_after is not None and completed >= cut_after:
                                break
            finally:
                reader.cancel()  # the connection goes away mid-stream, whatever was in flight is lost
                client.close()
        assert last == end
    finally:
        done.wait(WAIT * 4)
        writer_conn.close()
    assert _kinds_rows(kept) == expected


class CuttableProxy:
    """A TCP proxy in front of the server whose live connections can be cut (the client sees a reset)
    while it keeps accepting new ones; server-to-client bytes may be throttled so a large snapshot is
    still in flight when the cut comes."""

    def __init__(self, port, down_bytes_per_s=None):
        self.target = ("127.0.0.1", port)
        self.rate = down_bytes_per_s
        self.lsock = socket.socket()
        self.lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(16)
        self.port = self.lsock.getsockname()[1]
        self.conns = []
        self.lock = threading.Lock()
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def uri(self):
        return f"grpc://127.0.0.1:{self.port}"

    def _accept(self):
        while not self.closed:
            try:
                c, _ = self.lsock.accept()
            except OSError:
                return
            s = socket.create_connection(self.target)
            with self.lock:
                self.conns.append((c, s))
            threading.Thread(target=self._pump, args=(c, s, None), daemon=True).start()
            threading.Thread(target=self._pump, args=(s, c, self.rate), daemon=True).start()

    def _pump(self, src, dst, rate):
        try:
            while True:
                r, _, _ = select.select([src], [], [], 0.5)
                if not r:
                    if self.closed:
                        return
                    continue
                data = src.recv(16384 if rate else 65536)
                if not data:
                    dst.shutdown(socket.SHUT_WR)
                    return
                dst.sendall(data)
                if rate:
                    time.sleep(len(data) / rate)
        except (OSError, ValueError):  # cut: the sockets were closed under this thread
            return

    def cut(self):
        with self.lock:
            conns, self.conns = self.conns, []
        for pair in conns:
            for s in pair:
                try:
                    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                    s.close()  # RST
                except OSError:
                    pass

    def close(self):
        self.closed = True
        self.lsock.close()
        self.cut()


@pytest.mark.slow
def test_helper_resumes_inside_a_snapshot_after_the_connection_is_cut(uri, conn, db):
    """tidelake.subscribe reconnects after a reset in the middle of a large snapshot: it asks for that
    snapshot again and drops the rows it already handed out; nothing is lost or repeated."""
    t = f"{db}.t"
    create_table(conn, t, "input", "deduplicate", bucket=1)
    n = 200_000
    dml(conn, f"INSERT INTO {t} SELECT value AS id, concat('row-', CAST(value AS VARCHAR)) AS v, value AS n "
              f"FROM generate_series(0, {n - 1})")
    first = latest_snapshot(conn, t)
    proxy = CuttableProxy(int(uri.rsplit(":", 1)[1]), down_bytes_per_s=4_000_000)
    ids, cut_mid_snapshot = [], None
    try:
        sub = subscribe(proxy.uri, t, start="from-snapshot", snapshot_id=1, heartbeat_millis=200)
        with time_limit(WAIT * 2, sub):
            for ev in sub.events():
                if not ev.batch.num_rows:
                    continue
                assert set(ev.batch.column(0).to_pylist()) == {"+I"}
                ids += ev.batch.column(1).to_pylist()
                if cut_mid_snapshot is None:
                    cut_mid_snapshot = sub.last_snapshot_id is None or sub.last_snapshot_id < ev.progress.snapshot_id
                    proxy.cut()
                    dml(conn, f"INSERT INTO {t} VALUES ({n}, 'after', 0)")
                if len(ids) >= n + 1:
                    break
        sub.close()
    finally:
        proxy.close()
    assert sub.reconnects >= 1
    assert cut_mid_snapshot, f"the first batch completed snapshot {first}: nothing to resume inside (batches too big)"
    assert len(ids) == len(set(ids)) == n + 1, f"{len(ids)} rows, {len(set(ids))} distinct"
    assert sorted(ids) == list(range(n + 1))


@pytest.mark.slow
def test_helper_reconnects_after_server_restart(server_factory, tmp_path):
    """Kill -9 the server mid-subscription and start it again on the same port and warehouse: the helper
    resumes from its last completed snapshot and hands out every change exactly once, in order."""
    srv = server_factory()
    conn = adbc_connect(srv.uri)
    run(conn, "CREATE DATABASE r")
    t = "r.t"
    create_table(conn, t, "input", "deduplicate")
    c = Collector(subscribe(srv.uri, t, start="latest", heartbeat_millis=100, max_retries=20))
    try:
        c.wait_connected()
        expected = _ordered_workload(conn, t, 30)
        conn.close()
        srv.kill()
        srv2 = server_factory(warehouse=srv.warehouse, port=srv.port)
        conn = adbc_connect(srv2.uri)
        more = []
        for i in range(30, 60):
            dml(conn, f"INSERT INTO {t} VALUES ({i}, 'v{i}', {i})")
            more.append(("+I", (i, f"v{i}", i)))
        end = wait_quiet(conn, t)
        c.wait_snapshot(end)
    finally:
        c.close()
        with contextlib.suppress(Exception):
            conn.close()
    assert _kinds_rows(c.changes) == expected + more
    assert c.sub.reconnects >= 1


# ---------------------------------------------------------------- consumer id


def _consumer_file(warehouse, t, consumer):
    return table_dir(warehouse, t) / "consumer" / f"consumer-{consumer}"


def _wait_consumer(warehouse, t, consumer, next_snapshot):
    path = _consumer_file(warehouse, t, consumer)
    deadline = time.monotonic() + 10
    content = None
    while time.monotonic() < deadline:
        if path.exists():
            content = path.read_text()
            try:
                if json.loads(content).get("nextSnapshot") == next_snapshot:
                    return json.loads(content)
            except ValueError:
                pass
        time.sleep(0.1)
    pytest.fail(f"{path}: expected nextSnapshot {next_snapshot}, found {content!r} "
                f"(consumer dir: {sorted(p.name for p in path.parent.glob('*')) if path.parent.exists() else None})")


@pytest.mark.slow
def test_consumer_id_survives_a_server_restart(server_factory):
    srv = server_factory()
    conn = adbc_connect(srv.uri)
    run(conn, "CREATE DATABASE c")
    t = "c.t"
    create_table(conn, t, "input", "deduplicate", **{"write-only": "true"})  # one snapshot per statement
    for i in range(5):
        dml(conn, f"INSERT INTO {t} VALUES ({i}, 'v{i}', {i})")
    assert [k for _, k in snapshots(conn, t)] == ["APPEND"] * 5
    first = read_bounded(subscribe(srv.uri, t, start="from-snapshot", snapshot_id=1, end_snapshot_id=3,
                                   consumer_id="billing"))
    assert first.sub.last_snapshot_id == 3
    assert [r[0] for _, _, r in first.changes] == [0, 1, 2]
    assert _wait_consumer(srv.warehouse, t, "billing", 4) == {"nextSnapshot": 4}
    for i in range(5, 7):
        dml(conn, f"INSERT INTO {t} VALUES ({i}, 'v{i}', {i})")
    conn.close()
    assert srv.stop() == 0
    srv2 = server_factory(warehouse=srv.warehouse)
    again = read_bounded(subscribe(srv2.uri, t, start="default", consumer_id="billing", end_snapshot_id=7))
    assert [(s, r[0]) for s, _, r in again.changes] == [(4, 3), (5, 4), (6, 5), (7, 6)]
    assert again.completed[0] == 4
    assert _wait_consumer(srv.warehouse, t, "billing", 8) == {"nextSnapshot": 8}
    # Another consumer id starts where its own start mode says.
    other = read_bounded(subscribe(srv2.uri, t, start="from-snapshot", snapshot_id=6, end_snapshot_id=7,
                                   consumer_id="audit"))
    assert [r[0] for _, _, r in other.changes] == [5, 6]
    # pypaimon reads the same consumer file (Paimon's format).
    from pypaimon.consumer.consumer import Consumer

    assert Consumer.from_json(_consumer_file(srv.warehouse, t, "billing").read_text()).next_snapshot == 8


# ---------------------------------------------------------------- two servers, one warehouse


@pytest.mark.slow
def test_subscriber_sees_commits_made_through_another_server(server, uri, conn, db, server_factory):
    other = server_factory(warehouse=server.warehouse)
    other_conn = adbc_connect(other.uri)
    try:
        t = f"{db}.t"
        create_table(conn, t, "input", "deduplicate")
        for sub_uri, write_conn, label in ((uri, other_conn, "A sees B"), (other.uri, conn, "B sees A")):
            c = Collector(subscribe(sub_uri, t, start="latest", heartbeat_millis=100))
            try:
                c.wait_connected()
                base = 100 if label == "A sees B" else 200
                lat = []
                for i in range(base, base + 3):
                    dml(write_conn, f"INSERT INTO {t} VALUES ({i}, '{label}', {i})")
                    committed = time.monotonic_ns()
                    c.wait(lambda c, i=i: any(r[0] == i for _, _, r in c.changes), f"{label}: key {i}", timeout=10)
                    got = next(ns for ns, (_, _, r) in c.arrivals if r[0] == i)
                    lat.append((got - committed) / 1e9)
                assert max(lat) < 5, f"{label}: commit-to-subscriber {lat} s"
            finally:
                c.close()
            assert [r[0] for _, _, r in c.changes] == list(range(base, base + 3))
    finally:
        other_conn.close()


# ---------------------------------------------------------------- heartbeats


def test_heartbeats_when_idle(uri, conn, db):
    t = f"{db}.t"
    create_table(conn, t, "input", "deduplicate")
    dml(conn, f"INSERT INTO {t} VALUES (1, 'a', 1)")
    last = latest_snapshot(conn, t)
    sub = subscribe(uri, t, start="latest", heartbeat_millis=200)
    times = []
    try:
        with time_limit(10, sub):
            t0 = time.monotonic()
            for ev in sub.events():
                p = ev.progress
                assert ev.batch.num_rows == 0, "changes on an idle table"
                assert p.heartbeat and p.complete and p.snapshot_id == last, p
                times.append(time.monotonic())
                if time.monotonic() - t0 > 2.2:
                    break
    finally:
        sub.close()
    gaps = [b - a for a, b in zip(times, times[1:])]
    assert 8 <= len(times) <= 14, f"{len(times)} heartbeats in 2.2 s at 200 ms: gaps {gaps}"
    assert 0.15 <= sorted(gaps)[len(gaps) // 2] <= 0.3, gaps
    assert sub.last_snapshot_id == last


# ---------------------------------------------------------------- errors


def _error_text(e):
    return str(e).lower()


def test_unknown_table_is_not_found(uri, db):
    with pytest.raises((pa.ArrowKeyError, flight.FlightError, pa.ArrowException)) as ei:
        sub = subscribe(uri, f"{db}.no_such_table", start="latest", reconnect=False)
        with time_limit(10, sub):
            next(sub)
    assert isinstance(ei.value, pa.ArrowKeyError), f"expected NotFound, got {type(ei.value).__name__}: {ei.value}"
    assert "no_such_table" in str(ei.value)
    with pytest.raises(pa.ArrowKeyError):
        subscribe(uri, "no_such_db_x.t", start="latest")  # the helper does not retry it


def test_expired_start_snapshot_names_the_earliest(uri, conn, db):
    t = f"{db}.t"
    # An append table: one APPEND snapshot per insert (no COMPACT ones), and expiry runs after each commit.
    create_table(conn, t, "append", None, **{"snapshot.num-retained.max": "2", "snapshot.num-retained.min": "1"})
    for i in range(6):
        dml(conn, f"INSERT INTO {t} VALUES ({i}, 'v', {i})")
    earliest = snapshots(conn, t)[0][0]
    assert earliest > 1
    with pytest.raises((pa.ArrowException, flight.FlightError)) as ei:
        sub = subscribe(uri, t, start="from-snapshot", snapshot_id=1)
        with time_limit(10, sub):
            next(sub)
    assert not tidelake.is_transient(ei.value), f"{type(ei.value).__name__}: {ei.value}"
    assert str(earliest) in str(ei.value), f"the message does not name snapshot {earliest}: {ei.value}"
    # Starting at the earliest retained one works.
    c = read_bounded(subscribe(uri, t, start="from-snapshot", snapshot_id=earliest, end_snapshot_id=6))
    assert [r[0] for _, _, r in c.changes] == list(range(earliest - 1, 6))


def _any(value):
    url = tidelake.TICKET_TYPE_URL.encode()
    return b"\x0a" + bytes([len(url)]) + url + b"\x12" + bytes([len(value)]) + value


@pytest.mark.parametrize("make_ticket", [
    lambda t: b"garbage",
    lambda t: _any(b"\xff\xff"),  # the value is not a ChangelogTicket
    lambda t: encode_ticket("", "latest"),  # no table
    lambda t: _any(b"\x0a" + bytes([len(t)]) + t.encode() + b"\x10\x63"),  # start = 99
    lambda t: encode_ticket(t, "from-snapshot", snapshot_id=-4),
], ids=["not-protobuf", "bad-value", "no-table", "unknown-start", "negative-snapshot"])
def test_malformed_ticket_is_invalid_argument(flight_client, auth_header, conn, db, make_ticket):
    t = f"{db}.t"
    create_table(conn, t, "input", "deduplicate")
    dml(conn, f"INSERT INTO {t} VALUES (1, 'a', 1)")
    opts = flight.FlightCallOptions(headers=[auth_header], timeout=10)  # a stream that never ends fails
    with pytest.raises(pa.ArrowInvalid) as ei:
        flight_client.do_get(flight.Ticket(make_ticket(t)), opts).read_all()
    assert "invalid" in _error_text(ei.value)


def test_bad_arguments_are_invalid_argument(uri, conn, db):
    t = f"{db}.t"
    create_table(conn, t, "input", "deduplicate")
    dml(conn, f"INSERT INTO {t} VALUES (1, 'a', 1)")
    for kw in (dict(start="latest", columns=["no_such_column"]), dict(start="latest", filter="id >"),
               dict(start="latest", filter="no_such_column = 1")):
        with pytest.raises(pa.ArrowInvalid):
            subscribe(uri, t, **kw)


def test_unauthenticated_subscription_is_refused(uri, flight_client, conn, db):
    t = f"{db}.t"
    create_table(conn, t, "input", "deduplicate")
    with pytest.raises(flight.FlightUnauthenticatedError):
        flight_client.do_get(flight.Ticket(encode_ticket(t, "latest")), flight.FlightCallOptions(timeout=10)).read_all()
    with pytest.raises(flight.FlightUnauthenticatedError):
        subscribe(uri, t, start="latest", password="wrong")
    forged = flight.FlightCallOptions(headers=[(b"authorization", b"Bearer not-a-token")], timeout=10)
    with pytest.raises(flight.FlightUnauthenticatedError):
        flight_client.do_get(flight.Ticket(encode_ticket(t, "latest")), forged).read_all()


# ---------------------------------------------------------------- start modes and bounds


def test_start_modes_and_bounds(uri, conn, db, warehouse):
    t = f"{db}.t"
    create_table(conn, t, "lookup", "deduplicate", bucket=1)  # every write: APPEND, then COMPACT with its changelog
    dml(conn, f"INSERT INTO {t} VALUES (1, 'a', 1), (2, 'b', 2)")
    time.sleep(0.02)  # distinct commit milliseconds for the timestamp bounds
    dml(conn, f"UPDATE {t} SET n = 20 WHERE id = 2")
    time.sleep(0.02)
    dml(conn, f"INSERT INTO {t} VALUES (3, 'c', 3)")
    time.sleep(0.02)
    dml(conn, f"DELETE FROM {t} WHERE id = 1")
    snaps = snapshots(conn, t)
    latest = snaps[-1][0]
    millis = {}
    for f in (table_dir(warehouse, t) / "snapshot").glob("snapshot-*"):
        js = json.loads(f.read_text())
        millis[js["id"]] = js["timeMillis"]
    compacts = [i for i, k in snaps if k == "COMPACT"]
    assert len(compacts) >= 3, snaps

    def state_at(sid):
        return table_rows(conn, f"SELECT * FROM {t} FOR SYSTEM_TIME AS OF {sid}")

    def bounded(**kw):
        return read_bounded(subscribe(uri, t, **kw))

    # latest-full: the latest snapshot's rows as +I, completed as that snapshot.
    c = bounded(start="latest-full", end_snapshot_id=latest)
    assert {k for _, k, _ in c.changes} == {"+I"} and c.completed == [latest]
    assert sorted((r for _, _, r in c.changes), key=_sort_key) == state_at(latest)
    # from-snapshot-full: snapshot S as +I, then the changes of later snapshots; the fold ends at latest.
    s = compacts[0]
    c = bounded(start="from-snapshot-full", snapshot_id=s, end_snapshot_id=latest)
    assert c.completed[0] == s and c.completed[-1] == latest
    assert sorted((r for snap, _, r in c.changes if snap == s), key=_sort_key) == state_at(s)
    assert sorted(fold_exact(c.changes).values(), key=_sort_key) == state_at(latest)
    # compacted-full: the latest COMPACT snapshot in full.
    c = bounded(start="compacted-full", end_snapshot_id=latest)
    assert c.completed[0] == compacts[-1]
    assert sorted((r for snap, _, r in c.changes if snap == compacts[-1]), key=_sort_key) == state_at(compacts[-1])
    # from-timestamp: the first snapshot committed at or after the time.
    ts = millis[compacts[1]]
    c = bounded(start="from-timestamp", timestamp_millis=ts, end_snapshot_id=latest)
    assert c.completed[0] == min(i for i, m in millis.items() if m >= ts), (ts, millis, c.completed)
    # end_timestamp_millis: the last snapshot committed at or before the time.
    c = bounded(start="from-snapshot", snapshot_id=1, end_timestamp_millis=ts)
    assert c.completed[-1] == max(i for i, m in millis.items() if m <= ts), (ts, millis, c.completed)
    assert sorted(fold_exact(c.changes).values(), key=_sort_key) == state_at(c.completed[-1])
    # An unqualified name is looked up in the session's current database ("default").
    with pytest.raises(pa.ArrowKeyError):
        subscribe(uri, "t", start="latest")
    # A consumer id must be usable as a file name.
    with pytest.raises(pa.ArrowInvalid):
        subscribe(uri, t, start="latest", consumer_id="../escape")


# ---------------------------------------------------------------- projection and filter


def test_projection_and_filter(uri, conn, db):
    t = f"{db}.t"
    create_table(conn, t, "input", "deduplicate")
    dml(conn, f"INSERT INTO {t} VALUES (1, 'a', 1), (2, 'b', 20), (3, 'c', 30)")
    dml(conn, f"UPDATE {t} SET n = 5 WHERE id = 3")
    end = latest_snapshot(conn, t)
    c = read_bounded(subscribe(uri, t, start="from-snapshot", snapshot_id=1, end_snapshot_id=end,
                               columns=["n", "id"], filter="n >= 10"))
    assert c.sub.schema.names == ["_row_kind", "n", "id"]
    assert sorted(_kinds_rows(c.changes)) == sorted([("+I", (20, 2)), ("+I", (30, 3)), ("-U", (30, 3))])


def test_pandas_output(uri, conn, db):
    t = f"{db}.t"
    create_table(conn, t, "input", "deduplicate")
    dml(conn, f"INSERT INTO {t} VALUES (1, 'a', 1), (2, NULL, 2)")
    sub = subscribe(uri, t, start="from-snapshot", snapshot_id=1, end_snapshot_id=latest_snapshot(conn, t),
                    output="pandas")
    with time_limit(WAIT, sub):
        frames = list(sub)
    df = frames[0] if len(frames) == 1 else __import__("pandas").concat(frames)
    assert list(df.columns) == ["_row_kind", "id", "v", "n"]
    assert sorted(df["id"].tolist()) == [1, 2] and set(df["_row_kind"]) == {"+I"}


# ---------------------------------------------------------------- t$changelog over Flight SQL


@pytest.mark.parametrize("producer,engine", [("lookup", "deduplicate"), ("none", "deduplicate"),
                                             ("input", "deduplicate"), ("append", None)],
                         ids=["lookup", "none", "input", "append"])
def test_changelog_system_table_matches_the_stream(uri, conn, db, producer, engine):
    t = f"{db}.t"
    create_table(conn, t, producer, engine)
    for _, sql in random_statements(random.Random(f"sys/{producer}"), producer, engine or "deduplicate", 15):
        dml(conn, sql.format(t=t))
    end = wait_quiet(conn, t, last_kind="COMPACT" if producer == "lookup" else None)
    stream = read_bounded(subscribe(uri, t, start="from-snapshot", snapshot_id=1, end_snapshot_id=end))
    name = t.split(".")[1]
    cl = run(conn, f'SELECT * FROM {db}."{name}$changelog" WHERE _snapshot_id <= {end}')
    assert cl.column_names == ["_row_kind", "_snapshot_id", "id", "v", "n"]
    sql_changes = [(r[1], r[0], tuple(r[2:])) for r in (tuple(d.values()) for d in cl.to_pylist())]
    assert per_snapshot(sql_changes) == per_snapshot(stream.changes)
    # Bounds on _snapshot_id select whole snapshots.
    mid = end // 2
    part = run(conn, f'SELECT * FROM {db}."{name}$changelog" WHERE _snapshot_id > {mid} AND _snapshot_id <= {end}')
    assert part.num_rows == sum(1 for s, _, _ in stream.changes if mid < s <= end)


def test_changelog_system_table_is_ordered_by_snapshot(uri, conn, db):
    """`ORDER BY _snapshot_id` lists the changes snapshot by snapshot, each snapshot's rows in the stream's
    order (the scan is declared ordered, so no sort reorders a snapshot), with or without bounds."""
    t = f"{db}.t"
    create_table(conn, t, "input", "deduplicate", bucket=4)
    _ordered_workload(conn, t, 20)
    end = wait_quiet(conn, t)
    stream = read_bounded(subscribe(uri, t, start="from-snapshot", snapshot_id=1, end_snapshot_id=end)).changes
    name = t.split(".")[1]
    for where, lo in (("", 0), (f"WHERE _snapshot_id <= {end}", 0),
                      (f"WHERE _snapshot_id > 3 AND _snapshot_id <= {end}", 3)):
        cl = run(conn, f'SELECT * FROM {db}."{name}$changelog" {where} ORDER BY _snapshot_id')
        got = [(r["_snapshot_id"], r["_row_kind"], (r["id"], r["v"], r["n"])) for r in cl.to_pylist()]
        snaps = [g[0] for g in got]
        assert snaps == sorted(snaps), f"{where or 'no WHERE'}: snapshot ids in result order: {snaps}"
        assert got == [c for c in stream if c[0] > lo], where or "no WHERE"


# ---------------------------------------------------------------- pypaimon's streaming read


def snapshots_with_changelog(warehouse, t, end):
    """Ids <= end whose snapshot file lists changelog manifests (what pypaimon's follow-up scanner reads)."""
    out = []
    for f in (table_dir(warehouse, t) / "snapshot").glob("snapshot-*"):
        js = json.loads(f.read_text())
        if js["id"] <= end and js.get("changelogManifestList"):
            out.append(js["id"])
    return sorted(out)


def pypaimon_changes(warehouse, t, end, timeout=20):
    """pypaimon 2.1's streaming scan from snapshot 1 (one plan per snapshot with a changelog), read with
    row kinds: [(snapshot, kind, row)]."""
    from pypaimon import CatalogFactory

    with_changelog = snapshots_with_changelog(warehouse, t, end)
    assert with_changelog, "no snapshot has changelog files"

    table = CatalogFactory.create({"warehouse": "file://" + str(warehouse)}).get_table(t)
    builder = table.new_stream_read_builder().with_include_row_kind(True)
    scan = builder.new_streaming_scan()
    scan.next_snapshot_id = 1
    scan._diff_threshold = 1 << 62  # snapshot by snapshot, never one diff of the whole range
    read = builder.new_read()
    out = []
    loop = asyncio.new_event_loop()
    stream = scan.stream()
    try:
        while True:
            try:
                plan = loop.run_until_complete(asyncio.wait_for(stream.__anext__(), timeout))
            except asyncio.TimeoutError:
                pytest.fail(f"pypaimon's streaming scan yielded nothing for {timeout} s after {out[-1:]}")
            if plan.snapshot_id is not None and plan.snapshot_id > end:
                break
            data = read.to_arrow(plan.splits()) if plan.splits() else None
            if data is not None and data.num_rows:
                assert data.column_names[0] == "_row_kind", data.schema
                for b in data.to_batches():
                    out += batch_changes(b, plan.snapshot_id)
            if plan.snapshot_id is None or plan.snapshot_id >= with_changelog[-1]:
                break
    finally:
        if scan._prefetch_executor is not None:
            scan._prefetch_executor.shutdown(wait=False)
        loop.close()
    return out


@pytest.mark.parametrize("producer", ["input", "lookup"])
def test_pypaimon_streaming_read_returns_the_same_row_kinds(uri, conn, db, warehouse, producer):
    t = f"{db}.t"
    create_table(conn, t, producer, "deduplicate")
    for _, sql in random_statements(random.Random(f"paimon/{producer}"), producer, "deduplicate", 12):
        dml(conn, sql.format(t=t))
    end = wait_quiet(conn, t, last_kind="COMPACT" if producer == "lookup" else None)
    ours = read_bounded(subscribe(uri, t, start="from-snapshot", snapshot_id=1, end_snapshot_id=end)).changes
    theirs = pypaimon_changes(warehouse, t, end)
    assert collections.Counter(k for _, k, _ in theirs) == collections.Counter(k for _, k, _ in ours)
    assert per_snapshot(theirs) == per_snapshot(ours)
    assert {"-U", "+U"} <= {k for _, k, _ in ours}, "the workload should have produced updates"


# ---------------------------------------------------------------- back-pressure


def test_a_client_that_stops_reading_holds_back_only_its_own_stream(uri, conn, db, warehouse, flight_client,
                                                                   auth_header):
    """A subscriber that opens a stream and stops reading: the server reads only a few snapshots ahead
    (bounded buffers plus the HTTP/2 window), as its consumer position shows, while the table keeps taking
    commits; once the client reads on, every change arrives."""
    t = f"{db}.t"
    create_table(conn, t, "input", "deduplicate", bucket=1, **{"write-only": "true"})
    pad = "x" * 200
    for i in range(40):
        # 5,000 rows of ~220 bytes per snapshot: about 1 MB of changes each.
        dml(conn, f"INSERT INTO {t} SELECT value + {i * 5000}, '{pad}', value FROM generate_series(0, 4999)")
    ticket = encode_ticket(table=t, start="from-snapshot", snapshot_id=1, consumer_id="stalled")
    reader = flight_client.do_get(flight.Ticket(ticket), flight.FlightCallOptions(headers=[auth_header]))
    reader.read_chunk()  # the start position
    time.sleep(2.0)
    consumer = table_dir(warehouse, t) / "consumer" / "consumer-stalled"
    ahead = json.loads(consumer.read_text())["nextSnapshot"] if consumer.exists() else 1
    # Observed: 7 snapshots (the client's gRPC receive window holds several MB).
    assert ahead <= 25, f"the server read {ahead - 1} snapshots ahead of a client that reads nothing"
    # The writer is not held back by the stalled reader.
    dml(conn, f"INSERT INTO {t} VALUES (-1, 'late', 0)")
    rows = 0
    while rows < 40 * 5000 + 1:
        chunk = reader.read_chunk()
        if chunk.data is not None:
            rows += chunk.data.num_rows
    assert rows == 40 * 5000 + 1


# ---------------------------------------------------------------- schema changes on a live stream


def test_end_stream_mode_ends_at_a_schema_change_and_resumes_with_the_new_schema(uri, conn, db):
    """pyarrow cannot take a second schema message, so its tickets ask for END_STREAM: the stream ends
    after the last snapshot of the old schema, marked schema_changed, and the next one has the new schema."""
    t = f"{db}.t"
    dml(conn, f"CREATE TABLE {t} (id BIGINT NOT NULL, v STRING, PRIMARY KEY (id)) "
              "WITH ('bucket' = '1', 'changelog-producer' = 'input', 'write-only' = 'true')")
    dml(conn, f"INSERT INTO {t} VALUES (1, 'a')")
    client, reader = _raw_stream(uri, encode_ticket(t, "latest", heartbeat_millis=100, schema_change="end-stream"))
    try:
        assert reader.schema.names == ["_row_kind", "id", "v"]  # the stream is open with schema 0
        dml(conn, f"INSERT INTO {t} VALUES (2, 'b')")
        dml(conn, f"ALTER TABLE {t} ADD COLUMN w INT")
        dml(conn, f"INSERT INTO {t} VALUES (3, 'c', 7)")
        got = []
        with time_limit(WAIT, reader):
            for chunk in reader:
                p = decode_progress(chunk.app_metadata)
                if not p.heartbeat:
                    got.append((p.snapshot_id, chunk.data.num_rows, p.complete, p.schema_changed))
        assert got == [(2, 1, False, False), (2, 0, True, False), (2, 0, True, True)]
    finally:
        client.close()
    # Resuming after the announced snapshot gives the new schema and snapshot 3's rows.
    c = read_bounded(subscribe(uri, t, start="from-snapshot", snapshot_id=3, end_snapshot_id=3))
    assert c.sub.schema.names == ["_row_kind", "id", "v", "w"]
    assert _kinds_rows(c.changes) == [("+I", (3, "c", 7))]


def test_helper_follows_schema_changes_on_a_live_subscription(uri, conn, db):
    """tidelake.subscribe across ADD, RENAME, widening and DROP: every change once, each batch in the schema
    of its snapshot, and the projection (by field id) follows the renamed column."""
    t = f"{db}.t"
    dml(conn, f"CREATE TABLE {t} (id BIGINT NOT NULL, v STRING, n INT, PRIMARY KEY (id)) "
              "WITH ('bucket' = '1', 'changelog-producer' = 'input', 'write-only' = 'true')")
    dml(conn, f"INSERT INTO {t} VALUES (1, 'a', 1)")
    sub = subscribe(uri, t, start="latest", heartbeat_millis=100)
    it = sub.events()
    with time_limit(WAIT, sub):
        first = next(it)  # the start position: the subscription is live with schema 0
        assert first.progress.heartbeat and sub.schema.names == ["_row_kind", "id", "v", "n"]
        statements = [
            f"INSERT INTO {t} VALUES (2, 'b', 2)",
            f"ALTER TABLE {t} ADD COLUMN w STRING",
            f"INSERT INTO {t} VALUES (3, 'c', 3, 'x')",
            f"ALTER TABLE {t} RENAME COLUMN v TO vv",
            f"ALTER TABLE {t} ALTER COLUMN n TYPE BIGINT",
            f"UPDATE {t} SET n = 30 WHERE id = 3",
            f"ALTER TABLE {t} DROP COLUMN w",
            f"DELETE FROM {t} WHERE id = 1",
        ]
        for s in statements:
            dml(conn, s)
        end = latest_snapshot(conn, t)
        got = []
        while not got or got[-1][0] < end:
            e = next(it)
            if e.batch.num_rows and not e.progress.heartbeat:
                got.append((e.progress.snapshot_id, e.batch.schema.names, [str(f.type) for f in e.batch.schema],
                            [tuple(r.values()) for r in e.batch.to_pylist()]))
    sub.close()
    assert [(names, rows) for _, names, _, rows in got] == [
        (["_row_kind", "id", "v", "n"], [("+I", 2, "b", 2)]),
        (["_row_kind", "id", "v", "n", "w"], [("+I", 3, "c", 3, "x")]),
        (["_row_kind", "id", "vv", "n", "w"], [("-U", 3, "c", 3, "x"), ("+U", 3, "c", 30, "x")]),
        (["_row_kind", "id", "vv", "n"], [("-D", 1, "a", 1)]),
    ]
    assert got[2][2][3] == "int64"  # n was widened before the UPDATE's snapshot
    assert sub.schema_changes == 3


def test_postpone_table_stages_rows_streams_them_and_a_compaction_publishes_them(uri, conn, db):
    """A postpone-bucket table (`bucket` = -2) through Flight SQL: writes are staged (batch reads do not see
    them, as Paimon's), a subscription with the `none` producer streams the staged changes as Paimon's
    streaming reads do, and `CALL sys.compact` moves them into `postpone.default-bucket-num` buckets."""
    t = f"{db}.later"
    create_table(conn, t, "none", "deduplicate", bucket=-2, **{"postpone.default-bucket-num": "2"})
    c = Collector(subscribe(uri, t, start="latest", heartbeat_millis=100))
    try:
        c.wait_connected()
        dml(conn, f"INSERT INTO {t} VALUES (1, 'a', 1), (2, 'b', 2), (3, 'c', 3)")
        dml(conn, f"INSERT INTO {t} VALUES (2, 'b2', 20)")
        assert table_rows(conn, f"SELECT * FROM {t}") == []
        run(conn, f"CALL sys.compact('{t}')")
        assert snapshots(conn, t)[-1][1] == "COMPACT"
        assert table_rows(conn, f"SELECT * FROM {t}") == [(1, "a", 1), (2, "b2", 20), (3, "c", 3)]
        dml(conn, f"DELETE FROM {t} WHERE id = 1")
        assert table_rows(conn, f"SELECT * FROM {t}") == [(1, "a", 1), (2, "b2", 20), (3, "c", 3)]
        run(conn, f"CALL sys.compact('{t}')")
        final = table_rows(conn, f"SELECT * FROM {t}")
        assert final == [(2, "b2", 20), (3, "c", 3)]
        end = latest_snapshot(conn, t)
        c.wait_snapshot(end)
    finally:
        c.close()
    assert sorted(fold_upsert(c.changes).values(), key=_sort_key) == final
    buckets = {r["bucket"] for r in run(conn, f'SELECT bucket FROM {db}."later$files"').to_pylist()}
    assert buckets == {0, 1}, buckets
