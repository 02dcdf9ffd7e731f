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
