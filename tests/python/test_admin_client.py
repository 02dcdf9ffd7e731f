"""The Python admin client (clients/python/tidelake/admin.py) against the server: every action, and
bad arguments that give precise errors and change nothing."""
import json

import pytest

from tidelake.admin import Admin

from conftest import PASSWORD, USER


def test_every_admin_action(server, conn, db):
    cur = conn.cursor()
    t = f"{db}.t"
    cur.execute(f"CREATE TABLE {t} (id BIGINT NOT NULL, v STRING, PRIMARY KEY (id)) "
                "WITH ('bucket' = '1', 'write-only' = 'true')")
    for i in range(3):
        cur.execute(f"INSERT INTO {t} VALUES ({i}, 'v{i}')")
    admin = Admin(server.uri, user=USER, password=PASSWORD)
    info = admin.table_info(t)
    assert info["latest_snapshot_id"] == 3 and info["total_rows"] == 3
    assert info["buckets"][0]["files"] == 3 and info["buckets"][0]["sorted_runs"] == 3
    assert json.loads(info["schema_json"])["primaryKeys"] == ["id"]

    r = admin.compact(t, full=True)
    assert r["buckets_compacted"] == 1 and r["files_before"] == 3 and r["snapshot_id"] == 4
    assert admin.table_info(t)["buckets"][0]["sorted_runs"] == 1

    assert [x["name"] for x in admin.create_tag(t, "v1", snapshot_id=2)] == ["v1"]
    assert admin.list_tags(t)[0]["snapshot_id"] == 2
    with pytest.raises(Exception, match="already exists"):
        admin.create_tag(t, "v1")
    assert admin.rollback(t, tag="v1")["snapshots"] == [4, 3]
    assert admin.table_info(t)["total_rows"] == 2
    admin.delete_tag(t, "v1")
    assert admin.list_tags(t) == []

    assert admin.expire_snapshots(t, retain_min=1, retain_max=1)["snapshots"] == [1]
    dry = admin.remove_orphan_files(t, older_than="0 ms")
    assert isinstance(dry["files"], list)

    info = admin.alter_table(t, "ADD COLUMN note STRING")
    assert info["schema_id"] == 1
    cur.execute(f"SELECT * FROM {t} ORDER BY id")
    assert cur.fetchall() == [(0, "v0", None), (1, "v1", None)]

    with pytest.raises(Exception, match=r"Cannot drop partition key or primary key: \[id\]"):
        admin.alter_table(t, "DROP COLUMN id")
    with pytest.raises(Exception, match="does not exist"):
        admin.table_info(f"{db}.nothere")
    with pytest.raises(Exception, match="invalid duration"):
        admin.expire_snapshots(t, older_than="soon")
    assert admin.table_info(t)["schema_id"] == 1
    admin.close()


def test_expire_changelogs_through_every_door(server, conn, db, tmp_path):
    """A decoupled changelog lifecycle: the Flight action (through the Admin wrapper), SQL's CALL and the
    CLI each expire long-lived changelogs, and a subscription reads what is kept."""
    import subprocess
    import tidelake
    from conftest import _binary
    t = f"{db}.dc"
    cur = conn.cursor()
    cur.execute(f"CREATE TABLE {t} (id BIGINT NOT NULL, v STRING, PRIMARY KEY (id)) WITH ('bucket' = '1', "
                "'changelog-producer' = 'input', 'snapshot.num-retained.min' = '1', "
                "'snapshot.num-retained.max' = '2', 'changelog.num-retained.max' = '100', "
                "'num-sorted-run.compaction-trigger' = '100')")
    for i in range(1, 8):
        cur.execute(f"INSERT INTO {t} VALUES ({i}, 'v{i}')")
    uri = f"grpc://{server.host}:{server.port}"
    admin = tidelake.admin.Admin(uri, user=USER, password=PASSWORD)
    # Snapshots 6 and 7 remain; the changelogs of 1..5 are kept and still subscribed to.
    sub = tidelake.subscribe(uri, t, user=USER, password=PASSWORD, start="from-snapshot", snapshot_id=1,
                             end_snapshot_id=7)
    assert sorted(sub.read_all().column("id").to_pylist()) == list(range(1, 8))
    assert admin.expire_changelogs(t) == {"snapshots": [], "files": []}  # no limits: keeps all
    with pytest.raises(tidelake.InvalidArgumentError, match=r"retain_max \(1\) must not be below retain_min \(2\)"):
        admin.expire_changelogs(t, retain_max=1, retain_min=2)
    with pytest.raises(tidelake.NotFoundError):
        admin.expire_changelogs(f"{db}.nope", retain_max=1)
    reports = []
    r = admin.expire_changelogs(t, retain_max=6, progress=reports.append)  # keeps ids 2..7
    assert r["snapshots"] == [1] and r["files"], r
    assert reports and reports[-1].phase == "deleting changelogs"
    cur.execute(f"CALL sys.expire_changelogs('{t}', 5)")  # keeps 3..7
    cur.execute(f'SELECT min(_snapshot_id) FROM {db}."dc$changelog"')
    assert cur.fetchone()[0] == 3
    # The CLI on the same warehouse removes the rest.
    out = subprocess.run([str(_binary()), "--warehouse", str(server.warehouse), "expire-changelogs", t,
                          "--delete-all"], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().startswith("expired 3 changelog(s) [3, 4, 5]"), out.stdout
    cur.execute(f'SELECT min(_snapshot_id), count(*) FROM {db}."dc$changelog"')
    assert cur.fetchone() == (6, 2)
    assert admin.remove_orphan_files(t, older_than="0 ms")["files"] == []
