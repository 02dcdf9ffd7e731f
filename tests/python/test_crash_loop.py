"""kill -9 under continuous writes (issue 12): with `snapshot.num-retained.max` = 10 every commit also
expires a snapshot, so the kills land inside commits, inside expiry and between them. After each
restart every snapshot from EARLIEST to LATEST must read completely, in tidelake and in pypaimon, no
acknowledged write may be missing, and writing (and expiring) must go on.

`TIDELAKE_CRASH_LOOPS` sets the number of kills (20 in CI; scripts/nightly.sh runs more).
"""
import os
import random
import threading
import time

import pytest

import tidelake

LOOPS = int(os.environ.get("TIDELAKE_CRASH_LOOPS", "20"))
TABLE = "default.k"


def writer(uri, start, acked, stop):
    """INSERTs ids start, start+2, ... until the server dies or `stop` is set; records acknowledged ids."""
    try:
        c = tidelake.Client(uri, user="alice", password="s3cret")
    except Exception:
        return
    i = start
    try:
        while not stop.is_set():
            try:
                c.execute(f"INSERT INTO {TABLE} VALUES ({i}, 'v{i}')")
            except Exception:
                return
            acked.append(i)
            i += 2
    finally:
        try:
            c.close()
        except Exception:
            pass


def snapshot_ids(warehouse):
    d = warehouse / "default.db" / "k" / "snapshot"
    return sorted(int(n.split("-")[1]) for n in os.listdir(d) if n.startswith("snapshot-"))


def pypaimon_counts(warehouse, ids, name=TABLE):
    from pypaimon import CatalogFactory

    table = CatalogFactory.create({"warehouse": "file://" + str(warehouse)}).get_table(name)
    out = {}
    for sid in ids:
        t = table.copy({"scan.snapshot-id": str(sid)})
        rb = t.new_read_builder()
        out[sid] = rb.new_read().to_arrow(rb.new_scan().plan().splits()).num_rows
    return out


@pytest.mark.slow
def test_kill_minus_nine_under_writes_leaves_every_retained_snapshot_readable(server_factory, tmp_path):
    wh = tmp_path / "warehouse"
    srv = server_factory(wh)
    with tidelake.Client(srv.uri, user="alice", password="s3cret") as c:
        c.execute(f"CREATE TABLE {TABLE} (id BIGINT NOT NULL, v STRING, PRIMARY KEY (id)) WITH ("
                  "'bucket' = '2', 'snapshot.num-retained.min' = '2', 'snapshot.num-retained.max' = '10')")
    rng = random.Random(12)
    acked = []
    next_start = 0
    for loop in range(LOOPS):
        stop = threading.Event()
        threads = [threading.Thread(target=writer, args=(srv.uri, next_start + k, acked, stop)) for k in (0, 1)]
        next_start += 1_000_000
        for t in threads:
            t.start()
        time.sleep(rng.uniform(0.3, 1.5))
        srv.kill()
        stop.set()
        for t in threads:
            t.join(timeout=30)
        srv = server_factory(wh)
        ids = snapshot_ids(wh)
        context = f"after kill {loop + 1}: snapshots {ids[:3]}..{ids[-3:]}"
        assert ids == list(range(ids[0], ids[-1] + 1)), context
        with tidelake.Client(srv.uri, user="alice", password="s3cret") as c:
            counts = {}
            for sid in ids:
                got = c.sql(f"SELECT count(*) AS n FROM {TABLE} FOR SYSTEM_TIME AS OF {sid}").to_pylist()
                counts[sid] = got[0]["n"]
            latest = {r["id"] for r in c.sql(f"SELECT id FROM {TABLE}").to_pylist()}
        missing = set(acked) - latest
        assert not missing, f"{context}: acknowledged ids lost: {sorted(missing)[:10]}"
        assert pypaimon_counts(wh, ids) == counts, context
    # Expiry kept working: the retention holds after the last restart's first commit.
    with tidelake.Client(srv.uri, user="alice", password="s3cret") as c:
        c.execute(f"INSERT INTO {TABLE} VALUES (-1, 'last')")
    ids = snapshot_ids(wh)
    assert len(ids) <= 10 + 2, ids
    print(f"\n{LOOPS} kills, {len(acked)} acknowledged inserts, all retained snapshots readable")


# --------------------------------------------------------------------------------------------------
# Streaming writes under kill -9 (issue 16): append, upsert and row-kind streams, each a producer whose
# rows are a pure function of the source position, so after every restart the table must equal the
# model of exactly the positions up to the commit user's durable one, and that one must cover every
# acknowledged position.

STREAM_LOOPS = int(os.environ.get("TIDELAKE_STREAM_CRASH_LOOPS", "50"))
STREAM_TABLES = {
    "append": ("default.sa", "id BIGINT, pos BIGINT", "'bucket' = '-1'"),
    "upsert": ("default.su", "id BIGINT NOT NULL, pos BIGINT, PRIMARY KEY (id)", "'bucket' = '2'"),
    "changes": ("default.sc", "id BIGINT NOT NULL, pos BIGINT, PRIMARY KEY (id)",
                "'bucket' = '2', 'changelog-producer' = 'input'"),
}
RETENTION = "'snapshot.num-retained.min' = '2', 'snapshot.num-retained.max' = '6'"


def source_rows(kind, p):
    """The rows a producer sends for source position p."""
    import pyarrow as pa

    if kind == "append":
        return pa.record_batch({"id": pa.array([p * 3 + j for j in range(3)], pa.int64()),
                                "pos": pa.array([p] * 3, pa.int64())})
    if kind == "upsert":
        ids = [(p * 2 + j) % 50 for j in range(2)]
        return pa.record_batch({"id": pa.array(ids, pa.int64()), "pos": pa.array([p] * 2, pa.int64())})
    ids, kinds = [p], ["+I"]
    if p >= 3:
        ids.append(p - 3)
        kinds.append("-D")
    return pa.record_batch({"id": pa.array(ids, pa.int64()), "pos": pa.array([p - 3 if k == "-D" else p
                                                                             for k in kinds], pa.int64()),
                            "_row_kind": pa.array(kinds)})


def model(kind, durable):
    """The rows (sorted (id, pos) pairs) of the table after positions 0..durable, each exactly once."""
    if durable is None:
        return []
    if kind == "append":
        return sorted((p * 3 + j, p) for p in range(durable + 1) for j in range(3))
    if kind == "upsert":
        state = {}
        for p in range(durable + 1):
            for j in range(2):
                state[(p * 2 + j) % 50] = p
        return sorted(state.items())
    return sorted((p, p) for p in range(max(0, durable - 2), durable + 1))


def producer(uri, kind, acked, stop):
    """Streams positions after the durable one until the server dies; records acknowledged ones."""
    table = STREAM_TABLES[kind][0]
    try:
        c = tidelake.Client(uri, user="alice", password="s3cret")
        w = c.writer(table, commit_user=f"crash-{kind}", kind=kind, every_rows=12, every_ms=80)
    except Exception:
        return
    try:
        start = w.resume_position()
        p = 0 if start is None else start + 1
        while not stop.is_set():
            w.write(source_rows(kind, p), position=p)
            for a in w.acks():
                acked[kind] = max(acked[kind], a.identifier)
            p += 1
            time.sleep(0.002)
    except Exception:
        pass
    finally:
        try:
            for a in w.acks():
                acked[kind] = max(acked[kind], a.identifier)
        except Exception:
            pass
        try:
            c.close()
        except Exception:
            pass


def table_ids(warehouse, table):
    d = warehouse / "default.db" / table.split(".")[1] / "snapshot"
    return sorted(int(n.split("-")[1]) for n in os.listdir(d) if n.startswith("snapshot-"))


def check_streams(srv, wh, acked, context):
    """Every kind's table equals its model at the durable position, which covers every ack; every
    retained snapshot reads the same in tidelake and pypaimon. Returns the durable positions."""
    durable = {}
    with tidelake.Client(srv.uri, user="alice", password="s3cret") as c:
        for kind, (table, _, _) in STREAM_TABLES.items():
            w = c.writer(table, commit_user=f"crash-{kind}", kind=kind)
            d = w.resume_position()
            w.close()
            assert d is not None or acked[kind] < 0, f"{context}: {kind}: nothing durable, {acked[kind]} acked"
            assert d is None or d >= acked[kind], f"{context}: {kind}: durable {d} < acknowledged {acked[kind]}"
            durable[kind] = d
            got = sorted((r["id"], r["pos"]) for r in c.sql(f"SELECT id, pos FROM {table}").to_pylist())
            want = model(kind, d)
            assert got == want, (f"{context}: {kind}: {len(got)} rows, model of 0..{d} has {len(want)}; "
                                 f"first difference {next((a, b) for a, b in zip(got + [None], want + [None]) if a != b)}")
            ids = table_ids(wh, table)
            if not ids:
                continue
            assert ids == list(range(ids[0], ids[-1] + 1)), f"{context}: {kind}: snapshots {ids}"
            ours = {sid: c.sql(f"SELECT count(*) AS n FROM {table} FOR SYSTEM_TIME AS OF {sid}").to_pylist()[0]["n"]
                    for sid in ids}
            assert pypaimon_counts(wh, ids, table) == ours, f"{context}: {kind}: pypaimon and tidelake differ"
    return durable


@pytest.mark.slow
def test_kill_minus_nine_under_streaming_writes_loses_and_doubles_nothing(server_factory, tmp_path):
    wh = tmp_path / "warehouse"
    srv = server_factory(wh)
    with tidelake.Client(srv.uri, user="alice", password="s3cret") as c:
        for table, columns, options in STREAM_TABLES.values():
            c.execute(f"CREATE TABLE {table} ({columns}) WITH ({options}, {RETENTION})")
    rng = random.Random(16)
    acked = {kind: -1 for kind in STREAM_TABLES}
    totals = {"loops": 0, "acknowledged positions": 0}
    for loop in range(STREAM_LOOPS):
        stop = threading.Event()
        threads = [threading.Thread(target=producer, args=(srv.uri, kind, acked, stop)) for kind in STREAM_TABLES]
        for t in threads:
            t.start()
        time.sleep(rng.uniform(0.4, 1.2))
        srv.kill()
        stop.set()
        for t in threads:
            t.join(timeout=30)
        srv = server_factory(wh)
        check_streams(srv, wh, acked, f"after kill {loop + 1}")
        totals["loops"] += 1
    # Orphan removal takes what the kills left; every snapshot still reads, the tables still match.
    with tidelake.Client(srv.uri, user="alice", password="s3cret") as c:
        removed = 0
        for table, _, _ in STREAM_TABLES.values():
            removed += len(c.admin.remove_orphan_files(table, older_than="1 ms", delete=True)["files"])
    durable = check_streams(srv, wh, acked, "after orphan removal")
    totals["acknowledged positions"] = sum(a + 1 for a in acked.values())
    rows = {k: len(model(k, d)) for k, d in durable.items()}
    print(f"\nstreaming kill -9: {totals['loops']} loops, acknowledged positions {acked}, durable {durable}, "
          f"rows {rows}, lost 0, duplicated 0, corrupt 0, orphans removed {removed}")
