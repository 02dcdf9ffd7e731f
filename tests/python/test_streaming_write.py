"""Streaming writes (issue 16): one DoPut with a `tidelake.StreamingWrite` descriptor, commits by
policy, each acknowledged with a WriteAck only once it is durable; resume, fencing and refusals.

Driven through the Python client's `Client.writer` (pyarrow.flight underneath) and, where the wire
itself is the subject, through raw pyarrow.flight calls.
"""
import threading
import time
import uuid

import pyarrow as pa
import pyarrow.flight as flight
import pytest

import tidelake
import tidelake.errors
from tidelake.tidelake_pb2 import WriteAck, WritePosition
from tidelake.writer import encode_command

USER, PASSWORD = "alice", "s3cret"


def client(uri):
    return tidelake.Client(uri, user=USER, password=PASSWORD)


def fresh(c, columns="id BIGINT NOT NULL, v STRING, PRIMARY KEY (id)", options="'bucket' = '2'"):
    name = f"default.s_{uuid.uuid4().hex[:8]}"
    c.execute(f"CREATE TABLE {name} ({columns}) WITH ({options})")
    return name


def batch(ids, tag="v"):
    return pa.record_batch({"id": pa.array(ids, pa.int64()), "v": pa.array([f"{tag}{i}" for i in ids])})


def count(c, table):
    return c.sql(f"SELECT count(*) AS n FROM {table}").to_pylist()[0]["n"]


def snapshot_rows(c, table, sid):
    return c.sql(f"SELECT count(*) AS n FROM {table} FOR SYSTEM_TIME AS OF {sid}").to_pylist()[0]["n"]


def test_acks_come_after_durable_commits_and_name_their_snapshots(uri):
    with client(uri) as c:
        t = fresh(c)
        w = c.writer(t, commit_user="p1", every_rows=100)
        assert w.resume_position() is None
        got = []
        for k in range(5):
            w.write(batch(list(range(k * 50, k * 50 + 50))), position=k)
            got += w.acks(timeout=0)
        got += w.close()
        # 250 rows, a commit every 100: at 100, 200, then the rest at the end of the stream.
        assert [a.rows for a in got] == [100, 100, 50], got
        assert [a.identifier for a in got] == [1, 3, 4], got
        total = 0
        for a in got:
            assert a.snapshot_ids, a
            total += a.rows
            # Acknowledged means committed: the ack's snapshot holds every row acknowledged so far.
            assert snapshot_rows(c, t, a.snapshot_ids[-1]) == total
        assert count(c, t) == 250
        info = c.sql(f'SELECT commit_user, commit_identifier FROM {t.split(".")[0]}."{t.split(".")[1]}$snapshots" '
                     'ORDER BY snapshot_id').to_pylist()
        assert {r["commit_user"] for r in info} == {"p1"}
        assert info[-1]["commit_identifier"] == 4


def test_every_ack_is_readable_the_moment_it_arrives(uri):
    with client(uri) as c:
        t = fresh(c)
        with c.writer(t, commit_user="p", every_rows=10) as w:
            for k in range(6):
                w.write(batch(list(range(k * 10, k * 10 + 10))), position=k)
                for a in w.acks(timeout=10):
                    assert count(c, t) >= (a.identifier + 1) * 10


def test_a_restarted_producer_resumes_after_the_last_durable_position(uri):
    with client(uri) as c:
        t = fresh(c)
        w = c.writer(t, commit_user="cdc", every_rows=0)
        w.write(batch([1, 2]), position=10, commit=True)
        w.wait_for(10, timeout=30)
        w.write(batch([3, 4]), position=20)  # never committed: the producer dies here
        w.abandon()
        assert count(c, t) == 2
        w = c.writer(t, commit_user="cdc")
        assert w.resume_position() == 10
        # Replaying what is durable is refused, naming the position to resume after.
        with pytest.raises(tidelake.InvalidArgumentError) as ei:  # FAILED_PRECONDITION
            w.write(batch([1, 2]), position=10)
            w.close()
        assert "not after the last durable identifier 10" in str(ei.value)
        w = c.writer(t, commit_user="cdc")
        assert w.resume_position() == 10
        w.write(batch([3, 4]), position=20)
        acks = w.close()
        assert [a.identifier for a in acks] == [20]
        assert sorted(r["id"] for r in c.sql(f"SELECT id FROM {t}").to_pylist()) == [1, 2, 3, 4]
        # Another commit user's resume position is its own.
        assert c.writer(t, commit_user="other").resume_position() is None


def test_a_dynamic_bucket_table_takes_a_stream_and_a_second_writer_conflicts(uri):
    """Streams into a primary-key table without a bucket count (dynamic buckets): keys spread over
    buckets of two keys each and keep them across commits. A second writer that adds keys to the
    same partition meanwhile is refused at commit, and the stream ends with the last durable
    identifier, so its producer resumes."""
    with client(uri) as c:
        t = fresh(c, options="'dynamic-bucket.target-row-num' = '2'")
        w = c.writer(t, commit_user="dyn", every_rows=0)
        w.write(batch([1, 2, 3, 4, 5]), position=1, commit=True)
        w.wait_for(1, timeout=30)
        w.write(batch([5, 4, 6], tag="u"), position=2, commit=True)
        w.wait_for(2, timeout=30)
        assert sorted((r["id"], r["v"]) for r in c.sql(f"SELECT * FROM {t}").to_pylist()) == [
            (1, "v1"), (2, "v2"), (3, "v3"), (4, "u4"), (5, "u5"), (6, "u6")]
        buckets = c.sql(f'SELECT DISTINCT bucket FROM {t.split(".")[0]}."{t.split(".")[1]}$files"').to_pylist()
        assert len(buckets) == 3, buckets
        # Another writer adds a key: the stream's next new key is a conflict, not a duplicate.
        c.upsert(t, pa.table({"id": pa.array([7], pa.int64()), "v": ["other"]}))
        w.write(batch([8]), position=3, commit=True)
        with pytest.raises(tidelake.ConflictError, match="last durable identifier 2"):
            w.wait_for(3, timeout=30)
        w.abandon()
        w = c.writer(t, commit_user="dyn")
        assert w.resume_position() == 2
        w.write(batch([8]), position=3)
        assert [a.identifier for a in w.close()] == [3]
        assert count(c, t) == 8


def test_commits_by_time_without_more_input(uri):
    with client(uri) as c:
        t = fresh(c)
        w = c.writer(t, commit_user="timed", every_ms=200)
        started = time.monotonic()
        w.write(batch([1, 2, 3]), position=0)
        acks = w.acks(timeout=10)
        assert acks and acks[0].rows == 3 and acks[0].identifier == 0, acks
        assert time.monotonic() - started >= 0.15
        assert count(c, t) == 3
        assert w.close() == []


def test_positions_that_go_back_are_refused_and_pending_rows_dropped(uri):
    with client(uri) as c:
        t = fresh(c)
        w = c.writer(t, commit_user="back")
        w.write(batch([1]), position=5, commit=True)
        w.wait_for(5, timeout=30)
        w.write(batch([2]), position=9)
        with pytest.raises(tidelake.InvalidArgumentError) as ei:
            w.write(batch([3]), position=7)
            w.close()
        assert "goes back" in str(ei.value) and "last durable identifier 5" in str(ei.value)
        assert [r["id"] for r in c.sql(f"SELECT id FROM {t}").to_pylist()] == [1]


def raw_stream(uri, table, commit_user, schema, kind="upsert", **policy):
    """A streaming write over plain pyarrow.flight: (client, writer, reader, resume ack)."""
    fc = flight.FlightClient(uri)
    opts = flight.FlightCallOptions(headers=[fc.authenticate_basic_token(USER, PASSWORD)])
    cmd = encode_command(table, commit_user=commit_user, kind=kind, **policy)
    writer, reader = fc.do_put(flight.FlightDescriptor.for_command(cmd), schema, opts)
    first = WriteAck()
    first.ParseFromString(reader.read().to_pybytes())
    return fc, writer, reader, first


def position(p, commit=False):
    return pa.py_buffer(WritePosition(position=p, commit=commit).SerializeToString())


@pytest.mark.parametrize("bad", ["null key", "unknown column", "bad row kind", "wrong type"])
def test_a_bad_batch_commits_no_row_of_it(uri, bad):
    with client(uri) as c:
        t = fresh(c)
        with c.writer(t, commit_user="bad") as w:
            w.write(batch([1, 2]), position=1)
        kind = "upsert"
        good = None
        if bad == "null key":
            good = pa.record_batch({"id": pa.array([3], pa.int64()), "v": pa.array(["a"])})
            rows = pa.record_batch({"id": pa.array([4, None], pa.int64()), "v": pa.array(["a", "b"])})
        elif bad == "unknown column":
            rows = pa.record_batch({"id": pa.array([3], pa.int64()), "v": pa.array(["a"]), "zz": pa.array([1])})
        elif bad == "bad row kind":
            kind = "changes"
            good = pa.record_batch({"id": pa.array([3], pa.int64()), "v": pa.array(["a"]),
                                    "_row_kind": pa.array(["+I"])})
            rows = pa.record_batch({"id": pa.array([4, 5], pa.int64()), "v": pa.array(["a", "b"]),
                                    "_row_kind": pa.array(["+I", "+X"])})
        else:
            rows = pa.record_batch({"id": pa.array(["x"]), "v": pa.array(["a"])})
        fc, writer, reader, first = raw_stream(uri, t, "bad", rows.schema, kind=kind)
        assert first.resume and first.identifier == 1
        if good is not None:
            writer.write_with_metadata(good, position(2))  # pending, never acknowledged
        with pytest.raises(pa.ArrowException) as ei:
            writer.write_with_metadata(rows, position(3, commit=True))
            while reader.read() is not None:
                pass
            writer.close()
        fc.close()
        assert "last durable identifier 1" in str(ei.value), ei.value
        assert isinstance(tidelake.errors.map_error(ei.value), tidelake.InvalidArgumentError), ei.value
        assert sorted(r["id"] for r in c.sql(f"SELECT id FROM {t}").to_pylist()) == [1, 2]
        assert c.writer(t, commit_user="bad").resume_position() == 1


def test_one_stream_per_table_and_commit_user_on_a_server(uri):
    with client(uri) as c:
        t = fresh(c)
        first = c.writer(t, commit_user="dup")
        with pytest.raises(tidelake.InvalidArgumentError) as ei:
            c.writer(t, commit_user="dup")
        assert "is streaming into" in str(ei.value), ei.value
        # Other commit users and other tables are independent.
        other = c.writer(t, commit_user="dup2")
        t2 = fresh(c)
        third = c.writer(t2, commit_user="dup")
        for w, ids in ((first, [1]), (other, [2]), (third, [3])):
            w.write(batch(ids), position=1)
            assert [a.rows for a in w.close()] == [1]
        # Once the first ended, its commit user may stream again.
        again = c.writer(t, commit_user="dup")
        assert again.resume_position() == 1
        again.close()


def test_two_servers_fence_a_commit_user_streaming_on_both(server_factory, tmp_path):
    a = server_factory(tmp_path / "wh")
    b = server_factory(tmp_path / "wh")
    with client(a.uri) as ca, client(b.uri) as cb:
        t = fresh(ca)
        wa = ca.writer(t, commit_user="twin")
        wa.write(batch([1]), position=1, commit=True)
        wa.wait_for(1, timeout=30)
        wb = cb.writer(t, commit_user="twin")
        assert wb.resume_position() == 1
        wb.write(batch([2]), position=2, commit=True)
        wb.wait_for(2, timeout=30)
        # A's next commit finds B's snapshot of its commit user: A is fenced, nothing of it lands.
        with pytest.raises(tidelake.ConflictError) as ei:
            wa.write(batch([3]), position=3, commit=True)
            wa.wait_for(3, timeout=30)
        assert "fenced" in str(ei.value), ei.value
        assert sorted(r["id"] for r in ca.sql(f"SELECT id FROM {t}").to_pylist()) == [1, 2]
        wb.close()


def test_changes_streams_apply_row_kinds(uri):
    with client(uri) as c:
        t = fresh(c)
        with c.writer(t, commit_user="chg", kind="changes", every_rows=3) as w:
            w.write(pa.record_batch({"id": pa.array([1, 2, 3], pa.int64()), "v": pa.array(["a", "b", "c"]),
                                     "_row_kind": pa.array(["+I", "+I", "+I"])}), position=1)
            w.write(pa.record_batch({"id": pa.array([2, 3, 3], pa.int64()), "v": pa.array(["b", "c", "C"]),
                                     "_row_kind": pa.array(["-D", "-U", "+U"])}), position=2)
        rows = c.sql(f"SELECT id, v FROM {t} ORDER BY id").to_pylist()
        assert rows == [{"id": 1, "v": "a"}, {"id": 3, "v": "C"}]


def test_append_streams_and_the_kinds_a_table_allows(uri):
    with client(uri) as c:
        t = fresh(c, columns="id BIGINT, v STRING", options="'bucket' = '-1'")
        with c.writer(t, commit_user="app", every_rows=2) as w:
            assert w.kind == "append"
            for i in range(5):
                w.write(batch([i]), position=i)
        assert count(c, t) == 5
        with pytest.raises(tidelake.InvalidArgumentError, match="UPSERT needs a primary-key table"):
            c.writer(t, commit_user="x", kind="upsert")
        keyed = fresh(c)
        with pytest.raises(tidelake.InvalidArgumentError, match="has a primary key"):
            c.writer(keyed, commit_user="x", kind="append")
        with pytest.raises(tidelake.NotFoundError):
            c.writer("default.nope", commit_user="x", kind="append", schema=batch([1]).schema)


def test_raw_flight_first_result_is_the_resume_answer(uri):
    """The wire, without the client: the first PutResult arrives before any batch is sent."""
    with client(uri) as c:
        t = fresh(c)
        schema = c.table_schema(t)
    fc, writer, reader, first = raw_stream(uri, t, "raw", schema, every_rows=1)
    opts = flight.FlightCallOptions(headers=[fc.authenticate_basic_token(USER, PASSWORD)])
    assert first.resume and first.identifier == -1
    writer.write_with_metadata(pa.record_batch([pa.array([7], pa.int64()), pa.array(["v7"])], schema=schema),
                               position(3))
    ack = WriteAck()
    ack.ParseFromString(reader.read().to_pybytes())
    assert (ack.identifier, ack.rows, ack.resume) == (3, 1, False) and len(ack.snapshot_ids) >= 1
    writer.done_writing()
    assert reader.read() is None
    writer.close()
    # Missing and oversized commit users are refused before anything is opened.
    for user, code in (("", "commit_user is required"), ("u" * 300, "at most 256 bytes")):
        cmd = encode_command(t, commit_user=user, kind="upsert")
        writer, reader = fc.do_put(flight.FlightDescriptor.for_command(cmd), schema, opts)
        with pytest.raises(pa.ArrowException, match=code):
            reader.read()
            writer.close()
    fc.close()


def test_readers_cannot_stream(server_factory, tmp_path):
    from conftest import hash_password

    cfg = tmp_path / "tidelake.toml"
    cfg.write_text(f"""
[[users]]
name = "alice"
password_hash = "{hash_password(PASSWORD)}"
[[users]]
name = "ro"
password_hash = "{hash_password(PASSWORD)}"
role = "reader"
""")
    srv = server_factory(tmp_path / "wh", config=cfg)
    with client(srv.uri) as c:
        t = fresh(c)
    with tidelake.Client(srv.uri, user="ro", password=PASSWORD) as r:
        with pytest.raises(tidelake.PermissionDeniedError):
            r.writer(t, commit_user="ro", kind="upsert", schema=batch([1]).schema)


def test_a_stream_holds_no_statement_slot_and_streams_are_limited(server_factory, tmp_path):
    from conftest import hash_password

    cfg = tmp_path / "tidelake.toml"
    cfg.write_text(f"""
[query]
max_concurrent_per_user = 1
[ingest]
max_streams = 2
[[users]]
name = "alice"
password_hash = "{hash_password(PASSWORD)}"
""")
    srv = server_factory(tmp_path / "wh", config=cfg)
    with client(srv.uri) as c:
        t = fresh(c)
        w1 = c.writer(t, commit_user="a")
        w2 = c.writer(t, commit_user="b")
        # Statements still run while the two streams are open (one slot per user).
        assert count(c, t) == 0
        with pytest.raises(tidelake.ResourceExhaustedError, match="max_streams = 2"):
            c.writer(t, commit_user="c")
        w1.write(batch([1]), position=1)
        w1.close()
        w3 = c.writer(t, commit_user="c")
        for w in (w2, w3):
            w.close()


def test_graceful_shutdown_acknowledges_what_is_pending(server_factory, tmp_path):
    srv = server_factory(tmp_path / "wh")
    with client(srv.uri) as c:
        t = fresh(c)
        w = c.writer(t, commit_user="sd")
        w.write(batch([1, 2, 3]), position=3)
        time.sleep(0.3)
        # Nothing is sent once the shutdown starts: a batch in flight when the server closes the
        # connection may meet a broken pipe instead of the status (gRPC's race, not the protocol's).
        stopper = threading.Thread(target=srv.stop)
        stopper.start()
        acks = []
        with pytest.raises(tidelake.UnavailableError, match="last durable identifier 3"):
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                acks += w.acks(timeout=1)
        stopper.join()
        assert [(a.identifier, a.rows) for a in acks] == [(3, 3)], acks
        with pytest.raises(tidelake.UnavailableError):
            w.write(batch([9]), position=4)
    # What was acknowledged is durable: a restarted server resumes the producer after it.
    again = server_factory(tmp_path / "wh")
    with client(again.uri) as c:
        with c.writer(t, commit_user="sd") as w:
            assert w.resume_position() == 3
        assert count(c, t) == 3
