"""Branches through Flight: the tidelake.*_branch actions (Python admin client) and SQL over ADBC
on `<table>$branch_<name>`; pypaimon creates a branch of tidelake's table and writes it, tidelake
reads and fast-forwards it, pypaimon reads the result; a reader may list branches but not change
them."""
import pyarrow as pa
import pytest

from tidelake.admin import Admin

from conftest import PASSWORD, USER


def rows(cur, sql):
    cur.execute(sql)
    return cur.fetchall()


def test_branch_actions_and_pypaimon_branches(server, conn, db):
    from pypaimon import CatalogFactory

    cur = conn.cursor()
    t = f"{db}.t"
    cur.execute(f"CREATE TABLE {t} (id BIGINT NOT NULL, v STRING, PRIMARY KEY (id)) WITH ('bucket' = '1')")
    cur.execute(f"INSERT INTO {t} VALUES (1, 'a'), (2, 'b')")
    admin = Admin(server.uri, user=USER, password=PASSWORD)
    admin.create_tag(t, "v1")
    cur.execute(f"INSERT INTO {t} VALUES (3, 'c')")

    # Actions: create from the tag, list, write the branch over SQL.
    assert [b["name"] for b in admin.create_branch(t, "dev", from_tag="v1")] == ["dev"]
    assert [b["name"] for b in admin.list_branches(t)] == ["dev"]
    assert admin.list_branches(t)[0]["create_time_millis"] > 0
    with pytest.raises(Exception, match="already exists"):
        admin.create_branch(t, "dev")
    with pytest.raises(Exception, match="doesn't exist"):
        admin.create_branch(t, "x", from_tag="nope")
    cur.execute(f"INSERT INTO {t}$branch_dev VALUES (2, 'bb'), (4, 'd')")
    assert rows(cur, f"SELECT id, v FROM {t}$branch_dev ORDER BY id") == [(1, "a"), (2, "bb"), (4, "d")]
    assert rows(cur, f"SELECT id, v FROM {t} ORDER BY id") == [(1, "a"), (2, "b"), (3, "c")]

    # pypaimon makes its own branch of the same table and writes it; tidelake reads it.
    catalog = CatalogFactory.create({"warehouse": "file://" + str(server.warehouse)})
    catalog.create_branch(t, "py")
    assert sorted(catalog.list_branches(t)) == ["dev", "py"]
    py = catalog.get_table(f"{t}$branch_py")
    wb = py.new_batch_write_builder()
    w = wb.new_write()
    w.write_arrow(pa.table({"id": pa.array([7], pa.int64()), "v": ["seven"]},
                           schema=pa.schema([pa.field("id", pa.int64(), False), pa.field("v", pa.string())])))
    wb.new_commit().commit(w.prepare_commit())
    w.close()
    assert rows(cur, f"SELECT id, v FROM {t}$branch_py") == [(7, "seven")]
    assert sorted(b["name"] for b in admin.list_branches(t)) == ["dev", "py"]

    # Fast-forward main to dev; pypaimon reads main as tidelake does.
    admin.fast_forward(t, "dev")
    assert rows(cur, f"SELECT id, v FROM {t} ORDER BY id") == [(1, "a"), (2, "bb"), (4, "d")]
    main = catalog.get_table(t)
    rb = main.new_read_builder()
    got = rb.new_read().to_arrow(rb.new_scan().plan().splits()).sort_by("id").to_pylist()
    assert [(r["id"], r["v"]) for r in got] == [(1, "a"), (2, "bb"), (4, "d")]

    assert [b["name"] for b in admin.delete_branch(t, "dev,py")] == []
    with pytest.raises(Exception, match="does not exist"):
        rows(cur, f"SELECT * FROM {t}$branch_dev")
    admin.close()


def test_every_door_that_names_a_table_reaches_a_branch(server, conn, db):
    """DoPut ingest (one commit), a streaming writer's acknowledged commit, DoGet of a query and a
    bounded changelog subscription, each on `t$branch_b`: the branch changes, main does not."""
    import tidelake

    cur = conn.cursor()
    t = f"{db}.doors"
    cur.execute(f"CREATE TABLE {t} (id BIGINT NOT NULL, v STRING, PRIMARY KEY (id)) WITH ('bucket' = '1')")
    cur.execute(f"INSERT INTO {t} VALUES (1, 'a')")
    admin = Admin(server.uri, user=USER, password=PASSWORD)
    admin.create_tag(t, "base")
    admin.create_branch(t, "b", from_tag="base")
    branch = f"{t}$branch_b"
    schema = pa.schema([pa.field("id", pa.int64(), False), pa.field("v", pa.string())])
    with tidelake.Client(server.uri, user=USER, password=PASSWORD) as c:
        assert c.ingest(branch, pa.table({"id": [2, 3], "v": ["b", "c"]}, schema=schema)) == 2
        with c.writer(branch, commit_user="doors-test") as w:
            w.write(pa.table({"id": [4], "v": ["d"]}, schema=schema), commit=True)
        assert c.sql(f"SELECT id, v FROM {branch} ORDER BY id").to_pylist() == [
            {"id": 1, "v": "a"}, {"id": 2, "v": "b"}, {"id": 3, "v": "c"}, {"id": 4, "v": "d"}]
        assert c.sql(f"SELECT id FROM {t}").to_pylist() == [{"id": 1}]
        ids = [r[0] for r in rows(cur, f'SELECT snapshot_id FROM {db}."doors$branch_b$snapshots" ORDER BY 1')]
        assert ids[0] == 1 and len(ids) >= 3, ids
        changes = c.subscribe(branch, start="from-snapshot", snapshot_id=2, end_snapshot_id=ids[-1]).read_all()
        assert sorted(changes.column("id").to_pylist()) == [2, 3, 4]
        assert set(changes.column("_row_kind").to_pylist()) == {"+I"}
    assert rows(cur, f'SELECT snapshot_id FROM {db}."doors$snapshots"') == [(1,)]
    admin.close()
