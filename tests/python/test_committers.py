"""32 committers in separate processes on one table (issue 16): 4 servers share a warehouse, and 32
producer processes (8 per server) each stream commits under their own commit user. The snapshot ids
come out contiguous, every (commit user, identifier) is committed exactly once, and the rows add up.
"""
import json
import os
import subprocess
import sys

import pytest

import tidelake
from conftest import PASSWORD, REPO, USER

PRODUCERS = int(os.environ.get("TIDELAKE_COMMITTERS", "32"))
COMMITS = int(os.environ.get("TIDELAKE_COMMITS_EACH", "4"))
ROWS = 3

PRODUCER = r"""
import json, sys
import pyarrow as pa
import tidelake
uri, user, password, n, commits, rows = sys.argv[1:7]
n, commits, rows = int(n), int(commits), int(rows)
with tidelake.Client(uri, user=user, password=password) as c:
    w = c.writer("default.many", commit_user=f"p{n}", kind="append",
                 schema=pa.schema([("who", pa.int64()), ("pos", pa.int64())]))
    acks = []
    for p in range(commits):
        w.write(pa.record_batch({"who": pa.array([n] * rows, pa.int64()), "pos": pa.array([p] * rows, pa.int64())}),
                position=p, commit=True)
        acks += w.wait_for(p, timeout=120)
    acks += w.close()
print(json.dumps([[a.identifier, a.rows, a.snapshot_ids] for a in acks]))
"""


@pytest.mark.slow
def test_32_committers_in_processes_commit_exactly_once_with_contiguous_ids(server_factory, tmp_path):
    wh = tmp_path / "wh"
    servers = [server_factory(wh) for _ in range(4)]
    with tidelake.Client(servers[0].uri, user=USER, password=PASSWORD) as c:
        c.execute("CREATE TABLE default.many (who BIGINT, pos BIGINT) WITH ('bucket' = '-1', "
                  "'commit.max-retries' = '200', 'snapshot.num-retained.min' = '100000', "
                  "'snapshot.num-retained.max' = '100000')")
    env = dict(os.environ, PYTHONPATH=str(REPO / "clients" / "python"))
    procs = [subprocess.Popen([sys.executable, "-c", PRODUCER, servers[n % 4].uri, USER, PASSWORD, str(n),
                               str(COMMITS), str(ROWS)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
             for n in range(PRODUCERS)]
    acked = {}
    for n, p in enumerate(procs):
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, f"producer {n}: {err.decode()[-3000:]}"
        acked[n] = json.loads(out.decode().strip().splitlines()[-1])
    for n, acks in acked.items():
        assert [a[0] for a in acks] == list(range(COMMITS)), (n, acks)
        assert all(a[1] == ROWS and len(a[2]) == 1 for a in acks), (n, acks)
    with tidelake.Client(servers[0].uri, user=USER, password=PASSWORD) as c:
        snaps = c.sql('SELECT snapshot_id, commit_user, commit_identifier FROM default."many$snapshots" '
                      "ORDER BY snapshot_id").to_pylist()
        ids = [s["snapshot_id"] for s in snaps]
        assert ids == list(range(1, len(ids) + 1)), ids
        pairs = [(s["commit_user"], s["commit_identifier"]) for s in snaps]
        want = [(f"p{n}", p) for n in range(PRODUCERS) for p in range(COMMITS)]
        assert sorted(pairs) == sorted(want), "a commit is missing or doubled"
        # Every ack names the snapshot that holds its commit.
        by_id = {s["snapshot_id"]: (s["commit_user"], s["commit_identifier"]) for s in snaps}
        for n, acks in acked.items():
            for identifier, _, sids in acks:
                assert by_id[sids[0]] == (f"p{n}", identifier)
        got = c.sql("SELECT who, pos, count(*) AS n FROM default.many GROUP BY who, pos").to_pylist()
        assert sorted((r["who"], r["pos"], r["n"]) for r in got) == sorted(
            (n, p, ROWS) for n in range(PRODUCERS) for p in range(COMMITS))
    print(f"\n{PRODUCERS} producer processes on 4 servers: {len(ids)} contiguous snapshots, each commit once")
