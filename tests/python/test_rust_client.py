"""The Rust client's example (clients/rust/examples/subscribe.rs) against the real server: it follows
a lookup-producer table's changelog from snapshot 1 up to a bound and prints every change."""
import os
import pathlib
import subprocess

from conftest import PASSWORD, REPO, USER


def _example():
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    return target / "debug" / "examples" / "subscribe"


def _require_example():
    assert _example().exists(), f"{_example()} is missing: cargo build -p tidelake-client --examples"


def test_rust_example_prints_the_changelog(server, conn, db):
    _require_example()
    cur = conn.cursor()
    cur.execute(
        f"CREATE TABLE {db}.t (id BIGINT NOT NULL, v STRING, PRIMARY KEY (id)) "
        "WITH ('bucket' = '1', 'changelog-producer' = 'lookup')"
    )
    cur.execute(f"INSERT INTO {db}.t VALUES (1, 'a'), (2, 'b')")
    cur.execute(f"UPDATE {db}.t SET v = 'z' WHERE id = 1")
    cur.execute(f"DELETE FROM {db}.t WHERE id = 2")
    cur.execute(f"SELECT max(snapshot_id) FROM {db}.t$snapshots")
    latest = cur.fetchone()[0]
    env = dict(os.environ, TIDELAKE_USER=USER, TIDELAKE_PASSWORD=PASSWORD)
    out = subprocess.run(
        [str(_example()), f"http://{server.host}:{server.port}", f"{db}.t", "--from", "1", "--until", str(latest)],
        env=env, capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 0, out.stderr
    lines = [line.split(" ", 1)[1] for line in out.stdout.splitlines()]
    assert lines == ["+I 1 a", "+I 2 b", "-U 1 a", "+U 1 z", "-D 2 b"], out.stdout


def test_rust_example_reports_an_unknown_table(server):
    _require_example()
    env = dict(os.environ, TIDELAKE_USER=USER, TIDELAKE_PASSWORD=PASSWORD)
    out = subprocess.run(
        [str(_example()), f"http://{server.host}:{server.port}", "nope.nothing", "--until", "1"],
        env=env, capture_output=True, text=True, timeout=60,
    )
    assert out.returncode != 0
    assert "NotFound" in out.stderr or "not found" in out.stderr.lower(), out.stderr


def test_rust_example_follows_a_live_schema_change(server, conn, db):
    """arrow-rs takes the server's second schema message (SchemaChangeMode SCHEMA_MESSAGE)."""
    _require_example()
    cur = conn.cursor()
    cur.execute(f"CREATE TABLE {db}.s (id BIGINT, v STRING) WITH ('write-only' = 'true')")
    cur.execute(f"INSERT INTO {db}.s VALUES (1, 'a')")
    env = dict(os.environ, TIDELAKE_USER=USER, TIDELAKE_PASSWORD=PASSWORD)
    proc = subprocess.Popen(
        [str(_example()), f"http://{server.host}:{server.port}", f"{db}.s", "--from", "1", "--until", "3"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        # The subscription is live (it read snapshot 1 with the old schema) before the ALTER.
        assert proc.stdout.readline().strip() == "1 +I 1 a"
        cur.execute(f"ALTER TABLE {db}.s ADD COLUMN w INT")
        cur.execute(f"INSERT INTO {db}.s VALUES (2, 'b', 7)")
        cur.execute(f"ALTER TABLE {db}.s RENAME COLUMN v TO vv")
        cur.execute(f"INSERT INTO {db}.s VALUES (3, 'c', 8)")
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert out.splitlines() == [
        "schema _row_kind id v w", "2 +I 2 b 7", "schema _row_kind id vv w", "3 +I 3 c 8",
    ], out


def test_rust_quickstart_covers_sql_ingest_and_admin(server, conn):
    """clients/rust/examples/quickstart.rs: the typed Client's SQL, ingest with row kinds, ALTER, compaction
    with progress, tags, table info and a NotFound, each checked against the server's answers."""
    quickstart = _example().with_name("quickstart")
    assert quickstart.exists(), f"{quickstart} is missing: cargo build -p tidelake-client --examples"
    env = dict(os.environ, TIDELAKE_USER=USER, TIDELAKE_PASSWORD=PASSWORD)
    out = subprocess.run([str(quickstart), f"http://{server.host}:{server.port}", "rust_qs"],
                         env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "ingested 2",
        "applied 3",
        "row 1 apple 4",
        "row 3 plum 1",
        "schema 1",
        "compacted 1 bucket(s); progress reports: yes; last phase: committing",
        "tag v1 -> snapshot 3",
        "table rust_qs.items: 2 row(s) in 1 file(s)",
        "missing table: NotFound",
    ], out.stdout
    # What it did is what the server holds.
    cur = conn.cursor()
    cur.execute("SELECT id, name, qty, note FROM rust_qs.items ORDER BY id")
    assert cur.fetchall() == [(1, "apple", 4, None), (3, "plum", 1, None)]
    cur.execute('SELECT tag_name, snapshot_id FROM rust_qs."items$tags"')
    assert cur.fetchall() == [("v1", 3)]


def test_rust_stream_writer_acknowledges_and_resumes(server, conn, db):
    """clients/rust/examples/stream_write.rs: acks per commit, then a second run resumes after them."""
    example = _example().parent / "stream_write"
    assert example.exists(), f"{example} is missing: cargo build -p tidelake-client --examples"
    cur = conn.cursor()
    cur.execute(f"CREATE TABLE {db}.w (id BIGINT NOT NULL, v STRING, PRIMARY KEY (id)) WITH ('bucket' = '2')")
    env = dict(os.environ, TIDELAKE_USER=USER, TIDELAKE_PASSWORD=PASSWORD)
    base = [str(example), f"http://{server.host}:{server.port}", f"{db}.w", "--commit-user", "rs", "--every-rows", "20"]
    out = subprocess.run(base + ["--positions", "5"], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "resume none"
    acks = [line.split(" ", 3) for line in lines[1:]]
    # 50 rows, a commit every 20: at positions 1 and 3, the rest (10 rows) at the end.
    assert [(a[1], a[2]) for a in acks] == [("1", "20"), ("3", "20"), ("4", "10")], out.stdout
    out = subprocess.run(base + ["--positions", "7"], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == "resume 4", out.stdout
    cur.execute(f"SELECT count(*), min(id), max(id) FROM {db}.w")
    assert cur.fetchone() == (70, 0, 69)
