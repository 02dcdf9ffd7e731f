"""The Python helper's resume logic (clients/python), against a scripted in-process Flight server that
speaks the changelog protocol of proto/tidelake.proto and fails where a test tells it to. No tidelake binary
is needed: these tests pin down what the client does with each kind of failure, so the end-to-end tests in
test_changelog.py exercise the real server rather than the client.
"""
import threading
import time

import pyarrow as pa
import pyarrow.flight as flight
import pytest

import tidelake
from tidelake.protocol import ChangelogProgress

SCHEMA = pa.schema([("_row_kind", pa.utf8()), ("id", pa.int64())])


def batch(kind, ids):
    return pa.record_batch([pa.array([kind] * len(ids), pa.utf8()), pa.array(ids, pa.int64())], schema=SCHEMA)


class ScriptedServer(flight.FlightServerBase):
    """Snapshots 1..N (each a list of insert batches); serves the modes the client resumes with.

    `failures` is a list consumed one per DoGet: an int k makes that stream fail with Unavailable after k
    messages, an exception instance is raised before the first message, None serves normally."""

    def __init__(self, snapshots, failures=(), heartbeat_s=0.05, rewind=0):
        super().__init__("grpc://127.0.0.1:0")
        self.snapshots = snapshots  # {id: [[ids], [ids], ...]}
        self.failures = list(failures)
        self.heartbeat_s = heartbeat_s
        self.rewind = rewind  # resume this many snapshots earlier than asked (a lagging consumer position)
        self.tickets = []
        self.lock = threading.Lock()

    @property
    def uri(self):
        return f"grpc://127.0.0.1:{self.port}"

    def latest(self):
        return max(self.snapshots) if self.snapshots else 0

    def do_get(self, context, ticket):
        t = tidelake.decode_ticket(ticket.ticket)
        with self.lock:
            self.tickets.append(t)
            failure = self.failures.pop(0) if self.failures else None
        if isinstance(failure, Exception):
            raise failure
        return flight.GeneratorStream(SCHEMA, self._messages(t, failure))

    def _plan(self, t):
        """[(snapshot, batches, full)] to send, and the position after which heartbeats follow."""
        if t.start == "latest":
            return [], self.latest()
        if t.start in ("latest-full", "from-snapshot-full", "default"):
            s = t.snapshot_id if t.start == "from-snapshot-full" else self.latest()
            full = [i for k in sorted(self.snapshots) if k <= s for b in self.snapshots[k] for i in b]
            chunks = [full[i:i + 3] for i in range(0, len(full), 3)] or [[]]
            return [(s, chunks)] + [(k, self.snapshots[k]) for k in sorted(self.snapshots) if k > s], None
        if t.start == "from-snapshot":
            first = max(1, t.snapshot_id - self.rewind)
            return [(k, self.snapshots[k]) for k in sorted(self.snapshots) if k >= first], None
        raise NotImplementedError(t.start)

    def _messages(self, t, fail_after):
        plan, last = self._plan(t)
        sent = 0
        for s, chunks in plan:
            if t.end_snapshot_id and s > t.end_snapshot_id:
                return
            for i, ids in enumerate(chunks or [[]]):  # a snapshot without changes: one empty batch
                if fail_after is not None and sent >= fail_after:
                    raise flight.FlightUnavailableError("scripted connection failure")
                kind = "+I"
                meta = ChangelogProgress(s, complete=i == max(len(chunks), 1) - 1).encode()
                yield batch(kind, ids), pa.py_buffer(meta)
                sent += 1
            last = s
        if t.end_snapshot_id:
            return
        while True:  # idle: heartbeats
            if fail_after is not None and sent >= fail_after:
                raise flight.FlightUnavailableError("scripted connection failure")
            time.sleep(self.heartbeat_s)
            yield batch("+I", []), pa.py_buffer(ChangelogProgress(last or 0, True, True).encode())
            sent += 1


@pytest.fixture
def scripted():
    servers = []

    def make(*args, **kw):
        # The constructor starts the server. serve() only blocks, and it returns on a signal, which
        # under load ended a server between a scripted failure and the reconnect ("Connection
        # refused" for every retry): it is not called.
        s = ScriptedServer(*args, **kw)
        servers.append(s)
        return s

    yield make
    for s in servers:
        s.shutdown()


SNAPSHOTS = {1: [[1, 2, 3], [4, 5]], 2: [[6]], 3: [[7, 8], [9, 10], [11]], 4: [], 5: [[12, 13]]}
ALL = list(range(1, 14))


def ids_of(batches):
    return [i for b in batches for i in b.column(1).to_pylist()]


def collect(sub, n, timeout=20):
    out, deadline = [], time.monotonic() + timeout
    for ev in sub.events():
        assert time.monotonic() < deadline, f"only {out} after {timeout} s"
        out += ev.batch.column(1).to_pylist()
        if len(out) >= n:
            break
    sub.close()
    return out


def fast(**kw):
    # Short backoffs, but enough attempts to ride out a slow, loaded machine (CI ran this beside a
    # build: one reconnect found the scripted server's port refusing for a moment, and gRPC then
    # holds the channel in its own reconnect backoff, 1 s growing by 1.6x, so 40 attempts of 0.1 s
    # were once not enough). 150 attempts cover 15 s, inside collect()'s 20 s.
    kw.setdefault("max_retries", 150)
    return dict(backoff=(0.01, 0.1), **kw)


def test_no_failure(scripted):
    srv = scripted({1: [[1, 2, 3], [4, 5]], 2: [[6]]})
    sub = tidelake.subscribe(srv.uri, "db.t", start="from-snapshot", snapshot_id=1, end_snapshot_id=2)
    assert ids_of(list(sub)) == [1, 2, 3, 4, 5, 6]
    assert sub.last_snapshot_id == 2 and sub.reconnects == 0


# Messages from snapshot 1: s1 [1,2,3] | s1 [4,5] complete | s2 [6] complete | s3 [7,8] | s3 [9,10] |
# s3 [11] complete | s4 (empty) complete | s5 [12,13] complete | heartbeats.
RESUME_AT = [1, 1, 2, 3, 3, 3, 4, 5]  # after k messages, the snapshot to ask for


@pytest.mark.parametrize("fail_after", range(0, 8))
def test_resume_at_every_message_boundary(scripted, fail_after):
    """Failing after any number of messages, in or between snapshots: every row exactly once."""
    srv = scripted(SNAPSHOTS, failures=[fail_after or flight.FlightUnavailableError("refused once")])
    sub = tidelake.subscribe(srv.uri, "db.t", start="from-snapshot", snapshot_id=1, **fast())
    assert collect(sub, len(ALL)) == ALL
    assert sub.reconnects == (1 if fail_after else 0)  # a failed first attempt is no reconnect
    assert len(srv.tickets) == 2
    resumed = srv.tickets[1]
    assert (resumed.start, resumed.snapshot_id) == ("from-snapshot", RESUME_AT[fail_after]), fail_after


def test_resume_inside_the_full_snapshot(scripted):
    srv = scripted(SNAPSHOTS, failures=[2])  # after two chunks of 3 rows of the full snapshot 5
    sub = tidelake.subscribe(srv.uri, "db.t", start="latest-full", **fast())
    assert collect(sub, len(ALL)) == ALL
    assert (srv.tickets[1].start, srv.tickets[1].snapshot_id) == ("from-snapshot-full", 5)


def test_latest_resumes_after_the_heartbeat_position(scripted):
    srv = scripted(dict(SNAPSHOTS), failures=[3])  # three heartbeats, then a failure
    sub = tidelake.subscribe(srv.uri, "db.t", start="latest", **fast())
    events = []
    for ev in sub.events():
        events.append(ev)
        if len(events) == 1:
            srv.snapshots[6] = [[14]]  # committed while the subscriber is connected
        if ev.batch.num_rows:
            break
    sub.close()
    assert ids_of([e.batch for e in events]) == [14]
    assert (srv.tickets[1].start, srv.tickets[1].snapshot_id) == ("from-snapshot", 6)


def test_duplicates_from_an_earlier_resume_position_are_dropped(scripted):
    srv = scripted(SNAPSHOTS, failures=[4], rewind=2)
    sub = tidelake.subscribe(srv.uri, "db.t", start="from-snapshot", snapshot_id=1, **fast())
    assert collect(sub, len(ALL)) == ALL


def test_bounded_subscription_ends(scripted):
    srv = scripted(SNAPSHOTS, failures=[3])
    sub = tidelake.subscribe(srv.uri, "db.t", start="from-snapshot", snapshot_id=1, end_snapshot_id=3, **fast())
    t = sub.read_all()
    assert t.column("id").to_pylist() == list(range(1, 12))
    assert sub.last_snapshot_id == 3


def test_non_transient_errors_are_raised_at_once(scripted):
    srv = scripted(SNAPSHOTS, failures=[KeyError("table db.t does not exist")])
    t0 = time.monotonic()
    with pytest.raises(Exception) as ei:
        tidelake.subscribe(srv.uri, "db.t", start="latest", **fast())
    assert not tidelake.is_transient(ei.value), ei.value
    assert len(srv.tickets) == 1 and time.monotonic() - t0 < 5
    srv.failures = [flight.FlightUnauthenticatedError("who are you")]
    with pytest.raises(flight.FlightUnauthenticatedError):
        tidelake.subscribe(srv.uri, "db.t", start="latest", **fast())


def test_gives_up_after_max_retries(scripted):
    srv = scripted(SNAPSHOTS, failures=[flight.FlightUnavailableError("down")] * 10)
    with pytest.raises(flight.FlightUnavailableError):
        tidelake.subscribe(srv.uri, "db.t", start="latest", **fast(max_retries=3))
    assert len(srv.tickets) == 4


def test_reconnect_false_raises_the_first_failure(scripted):
    srv = scripted(SNAPSHOTS, failures=[2])
    sub = tidelake.subscribe(srv.uri, "db.t", start="from-snapshot", snapshot_id=1, reconnect=False)
    with pytest.raises(flight.FlightUnavailableError):
        list(sub)


def test_close_from_another_thread_ends_iteration(scripted):
    srv = scripted({1: [[1]]}, heartbeat_s=0.05)
    sub = tidelake.subscribe(srv.uri, "db.t", start="from-snapshot", snapshot_id=1)
    got = []
    th = threading.Thread(target=lambda: got.extend(ids_of(list(sub))))
    th.start()
    time.sleep(0.5)
    sub.close()
    th.join(5)
    assert not th.is_alive() and got == [1]


def test_pandas_output(scripted):
    srv = scripted({1: [[1, 2]], 2: [[3]]})
    frames = list(tidelake.subscribe(srv.uri, "db.t", start="from-snapshot", snapshot_id=1, end_snapshot_id=2,
                                     output="pandas"))
    assert [f["id"].tolist() for f in frames] == [[1, 2], [3]]
    assert list(frames[0].columns) == ["_row_kind", "id"]
