"""The exactly-once replication example (clients/python/examples/replicate_stream.py) under kill -9
of the source server, the target server and the replicator itself, while the source keeps changing.

At the end the target holds the source's rows, its commits of the replicator's commit user carry
strictly increasing source snapshot ids, and its changelog has exactly as many change rows as the
source's changelog up to the last applied snapshot: no snapshot applied twice, none skipped.
"""
import os
import random
import subprocess
import sys
import threading
import time

import pytest

import tidelake
from conftest import PASSWORD, REPO, USER

EXAMPLE = REPO / "clients" / "python" / "examples" / "replicate_stream.py"
KILLS = int(os.environ.get("TIDELAKE_REPLICATE_KILLS", "6"))
DDL = ("CREATE TABLE default.{} (id BIGINT NOT NULL, v STRING, PRIMARY KEY (id)) "
       "WITH ('bucket' = '2', 'changelog-producer' = 'input')")


def source_changes(uri, stop, rng_seed):
    """Upserts and deletes on the source until stopped, riding out its restarts."""
    rng = random.Random(rng_seed)
    i = 0
    while not stop.is_set():
        try:
            with tidelake.Client(uri, user=USER, password=PASSWORD) as c:
                while not stop.is_set():
                    k = rng.randrange(40)
                    if rng.random() < 0.2:
                        c.execute(f"DELETE FROM default.src WHERE id = {k}")
                    else:
                        c.execute(f"INSERT INTO default.src VALUES ({k}, 'v{i}'), ({k + 100}, 'w{i}')")
                    i += 1
                    time.sleep(0.02)
        except Exception:
            time.sleep(0.2)


def start_replicator(src, dst):
    env = dict(os.environ, TIDELAKE_PASSWORD=PASSWORD, PYTHONPATH=str(REPO / "clients" / "python"))
    return subprocess.Popen(
        [sys.executable, str(EXAMPLE), "--source-uri", src.uri, "--target-uri", dst.uri, "--user", USER,
         "--source", "default.src", "--target", "default.dst", "--commit-user", "rep"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)


def rows(uri, table):
    with tidelake.Client(uri, user=USER, password=PASSWORD) as c:
        return sorted((r["id"], r["v"]) for r in c.sql(f"SELECT id, v FROM default.{table}").to_pylist())


@pytest.mark.slow
def test_replication_is_exactly_once_across_kill_minus_nine_of_every_side(server_factory, tmp_path):
    src = server_factory(tmp_path / "src")
    dst = server_factory(tmp_path / "dst")
    with tidelake.Client(src.uri, user=USER, password=PASSWORD) as c:
        c.execute(DDL.format("src"))
    with tidelake.Client(dst.uri, user=USER, password=PASSWORD) as c:
        c.execute(DDL.format("dst"))
    stop = threading.Event()
    changer = threading.Thread(target=source_changes, args=(src.uri, stop, 7))
    changer.start()
    rep = start_replicator(src, dst)
    rng = random.Random(16)
    killed = []
    try:
        for _ in range(KILLS):
            time.sleep(rng.uniform(1.0, 2.5))
            victim = rng.choice(["source", "target", "replicator"])
            killed.append(victim)
            if victim == "replicator":
                rep.kill()
                rep.wait()
                rep = start_replicator(src, dst)
            elif victim == "source":
                src.kill()
                src = server_factory(tmp_path / "src", port=src.port)
            else:
                dst.kill()
                dst = server_factory(tmp_path / "dst", port=dst.port)
        time.sleep(1.0)
        stop.set()
        changer.join(timeout=60)
        want = rows(src.uri, "src")
        deadline = time.monotonic() + 90
        while rows(dst.uri, "dst") != want:
            assert rep.poll() is None, "the replicator exited: " + rep.stderr.read().decode()[-3000:]
            assert time.monotonic() < deadline, f"the target did not catch up (kills: {killed})"
            time.sleep(0.5)
    finally:
        stop.set()
        rep.kill()
        rep.wait()
    with tidelake.Client(dst.uri, user=USER, password=PASSWORD) as c:
        commits = c.sql('SELECT commit_identifier FROM default."dst$snapshots" '
                        "WHERE commit_user = 'rep' AND commit_kind = 'APPEND' ORDER BY snapshot_id").to_pylist()
        ids = [r["commit_identifier"] for r in commits]
        assert ids == sorted(set(ids)), f"a source snapshot was applied twice: {ids}"
        applied = c.sql('SELECT count(*) AS n FROM default."dst$changelog"').to_pylist()[0]["n"]
    with tidelake.Client(src.uri, user=USER, password=PASSWORD) as c:
        changes = c.sql(f'SELECT count(*) AS n FROM default."src$changelog" WHERE _snapshot_id <= {ids[-1]}'
                        ).to_pylist()[0]["n"]
    assert applied == changes, f"target changelog {applied} rows, source's up to {ids[-1]}: {changes}"
    print(f"\nreplication: kills {killed}, {len(ids)} target commits, {applied} change rows, equal")
