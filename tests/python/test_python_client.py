"""The Python client (clients/python: tidelake.Client) against a real `tidelake serve`: SQL into pyarrow,
pandas and polars, bulk ingest in every mode, upsert/delete/row kinds on primary-key tables, a changelog
applied to another table, the error classes, logging in again after a restart, and every example script.
"""
import datetime
import decimal
import json
import os
import pathlib
import socket
import subprocess
import sys
import time

import adbc_driver_manager
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.flight as flight
import pytest

import tidelake
from tidelake.errors import classify, map_error
from tidelake.flight_sql import decode_statement_ingest, decode_update_result, encode_statement_ingest

from conftest import PASSWORD, REPO, USER

EXAMPLES = REPO / "clients" / "python" / "examples"


@pytest.fixture
def tl(uri):
    with tidelake.Client(uri, user=USER, password=PASSWORD) as client:
        yield client


def rows(tl, query, params=None):
    return tl.sql(query, params).to_pylist()


def count(tl, table):
    return tl.sql(f"SELECT count(*) AS n FROM {table}").column("n")[0].as_py()


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def snapshot_ids(tl, table):
    db, name = table.split(".")
    return [r["snapshot_id"] for r in rows(tl, f'SELECT snapshot_id FROM {db}."{name}$snapshots" ORDER BY snapshot_id')]


def schema_file(warehouse, table):
    db, name = table.split(".")
    files = sorted((warehouse / f"{db}.db" / name / "schema").glob("schema-*"), key=lambda p: int(p.name.split("-")[1]))
    return json.loads(files[-1].read_text())


# ---------------------------------------------------------------- wire format and error mapping (no server)


def test_statement_ingest_encoding_round_trips():
    cmd = encode_statement_ingest("orders", database="shop", mode="create_append",
                                  options={"primary-key": "id,dt", "bucket": "2", "row-kind-column": "_k"})
    assert cmd.startswith(b"\x0a\x44type.googleapis.com/arrow.flight.protocol.sql.CommandStatementIngest")
    assert decode_statement_ingest(cmd) == {"table": "orders", "database": "shop", "mode": "create_append",
                                            "options": {"primary-key": "id,dt", "bucket": "2", "row-kind-column": "_k"}}
    for mode in ("append", "create", "replace", "create_append"):
        assert decode_statement_ingest(encode_statement_ingest("t", mode=mode))["mode"] == mode
    assert decode_statement_ingest(encode_statement_ingest("t"))["database"] is None
    with pytest.raises(ValueError, match="unknown ingest mode 'upsert'"):
        encode_statement_ingest("t", mode="upsert")
    # DoPutUpdateResult: record_count = 1 (varint); proto3 leaves a zero count out.
    assert decode_update_result(b"\x08\xac\x02") == 300
    assert decode_update_result(b"") == 0
    assert decode_update_result(None) == -1


def test_error_classification_of_both_transports():
    e = pa.ArrowKeyError("Flight returned not found error, with message: table 'a.b' does not exist. "
                         "gRPC client debug context: NOT_FOUND:table 'a.b' does not exist. Client context: OK")
    assert classify(e) == ("NOT_FOUND", "table 'a.b' does not exist")
    m = map_error(e)
    assert isinstance(m, tidelake.NotFoundError) and isinstance(m, pa.ArrowKeyError)
    assert str(m) == "table 'a.b' does not exist" and m.original is e and m.code == "NOT_FOUND"
    # AlreadyExists reaches pyarrow as a plain ArrowException; the debug context names the code.
    e = pa.ArrowException("Unknown: Flight returned already exists error, with message: table 't' already "
                          "exists. gRPC client debug context: ALREADY_EXISTS:table 't' already exists. Client context: OK")
    assert isinstance(map_error(e), tidelake.AlreadyExistsError)
    # ADBC's own names: UNAUTHORIZED is PermissionDenied, NOT_IMPLEMENTED Unimplemented, TIMEOUT a timeout.
    for prefix, cls in [("UNAUTHORIZED", tidelake.PermissionDeniedError), ("NOT_IMPLEMENTED", tidelake.UnsupportedError),
                        ("TIMEOUT", tidelake.TimedOutError), ("IO", tidelake.UnavailableError),
                        ("INVALID_STATE", tidelake.InvalidArgumentError)]:
        e = adbc_driver_manager.ProgrammingError(f"{prefix}: [FlightSQL] INSERT needs the writer role",
                                                 status_code=adbc_driver_manager.AdbcStatusCode.UNKNOWN)
        m = map_error(e)
        assert isinstance(m, cls), (prefix, type(m))
        assert str(m) == "INSERT needs the writer role"
    # RESOURCE_EXHAUSTED reaches pyarrow as ArrowInvalid worded "gRPC returned ...": the phrase wins.
    e = pa.ArrowInvalid("gRPC returned resource exhausted error, with message: tenant 'acme' has max_subscriptions "
                        "= 1 open; close one or retry later. gRPC client debug context: RESOURCE_EXHAUSTED:tenant "
                        "'acme' has max_subscriptions = 1 open. Client context: IOError: Server never sent a data message")
    m = map_error(e)
    assert isinstance(m, tidelake.ResourceExhaustedError) and m.code == "RESOURCE_EXHAUSTED"
    assert str(m) == "tenant 'acme' has max_subscriptions = 1 open; close one or retry later"
    e = flight.FlightUnauthenticatedError("Flight returned unauthenticated error, with message: invalid user name or password")
    m = map_error(e)
    assert isinstance(m, tidelake.UnauthenticatedError) and isinstance(m, flight.FlightUnauthenticatedError)
    assert str(m) == "invalid user name or password"
    e = adbc_driver_manager.ProgrammingError(
        "INVALID_ARGUMENT: [FlightSQL] SQL syntax error: \"Expected: an SQL statement\" (InvalidArgument; Prepare)",
        status_code=adbc_driver_manager.AdbcStatusCode.INVALID_ARGUMENT)
    m = map_error(e)
    assert isinstance(m, tidelake.InvalidArgumentError) and isinstance(m, adbc_driver_manager.ProgrammingError)
    assert str(m) == 'SQL syntax error: "Expected: an SQL statement"'
    assert m.status_code == adbc_driver_manager.AdbcStatusCode.INVALID_ARGUMENT
    e = adbc_driver_manager.OperationalError("ABORTED: [FlightSQL] commit conflict (Conflict; ExecuteUpdate)",
                                             status_code=adbc_driver_manager.AdbcStatusCode.IO)
    assert isinstance(map_error(e), tidelake.ConflictError)
    # ADBC has no status for RESOURCE_EXHAUSTED (it says INTERNAL); the gRPC code in the suffix wins.
    e = adbc_driver_manager.InternalError(
        "INTERNAL: [FlightSQL] statement exceeded the query timeout of 3s (ResourceExhausted; DoGet: endpoint 0: [])",
        status_code=adbc_driver_manager.AdbcStatusCode.INTERNAL)
    m = map_error(e)
    assert isinstance(m, tidelake.errors.ResourceExhaustedError) and str(m) == "statement exceeded the query timeout of 3s"
    # Not a transport error: left alone.
    e = TypeError("bad argument")
    assert map_error(e) is e


# ---------------------------------------------------------------- SQL


def test_sql_into_arrow_pandas_and_polars(tl, db):
    t = f"{db}.items"
    tl.execute(f"CREATE TABLE {t} (id BIGINT, name STRING, price DOUBLE, qty INT, day DATE, at TIMESTAMP, "
               "ok BOOLEAN, amount DECIMAL(10, 2))")
    assert tl.execute(f"INSERT INTO {t} VALUES "
                      "(1, 'apple', 1.5, 3, DATE '2024-01-02', TIMESTAMP '2024-01-02 03:04:05', true, 12.34), "
                      "(2, 'pear', 2.25, NULL, DATE '2024-02-03', TIMESTAMP '2024-02-03 04:05:06.789', false, 0.5), "
                      "(3, NULL, NULL, 7, NULL, NULL, NULL, NULL)") == 3
    query = f"SELECT * FROM {t} ORDER BY id"
    arrow = tl.sql(query)
    pandas = tl.sql(query, output="pandas")
    polars = tl.sql(query, output="polars")
    assert isinstance(arrow, pa.Table) and isinstance(pandas, pd.DataFrame) and isinstance(polars, pl.DataFrame)
    expected = [
        {"id": 1, "name": "apple", "price": 1.5, "qty": 3, "day": datetime.date(2024, 1, 2),
         "at": datetime.datetime(2024, 1, 2, 3, 4, 5), "ok": True, "amount": decimal.Decimal("12.34")},
        {"id": 2, "name": "pear", "price": 2.25, "qty": None, "day": datetime.date(2024, 2, 3),
         "at": datetime.datetime(2024, 2, 3, 4, 5, 6, 789000), "ok": False, "amount": decimal.Decimal("0.50")},
        {"id": 3, "name": None, "price": None, "qty": 7, "day": None, "at": None, "ok": None, "amount": None},
    ]
    assert arrow.to_pylist() == expected
    assert arrow.schema.field("qty").type == pa.int32() and arrow.schema.field("amount").type == pa.decimal128(10, 2)
    assert polars.to_dicts() == expected
    assert polars.schema["qty"] == pl.Int32 and polars.schema["name"] == pl.String
    assert list(pandas.columns) == arrow.column_names and len(pandas) == 3
    assert pandas["id"].tolist() == [1, 2, 3]
    assert pandas["name"].tolist() == ["apple", "pear", None]
    assert pandas["price"].tolist()[:2] == [1.5, 2.25] and pd.isna(pandas["price"][2])
    assert pandas["at"][1] == pd.Timestamp("2024-02-03 04:05:06.789") and pd.isna(pandas["at"][2])
    assert pandas["amount"].tolist()[:2] == [decimal.Decimal("12.34"), decimal.Decimal("0.50")]
    # Parameters, and the three outputs of an aggregate.
    assert rows(tl, f"SELECT id, name FROM {t} WHERE price > $1 AND qty IS NULL", (2.0,)) == [{"id": 2, "name": "pear"}]
    agg = f"SELECT count(*) AS n, sum(qty) AS q FROM {t}"
    assert tl.sql(agg).to_pylist() == [{"n": 3, "q": 10}]
    assert tl.sql(agg, output="pandas").to_dict("records") == [{"n": 3, "q": 10}]
    assert tl.sql(agg, output="polars").rows() == [(3, 10)]
    with pytest.raises(ValueError, match="output must be one of arrow, pandas, polars"):
        tl.sql("SELECT 1", output="numpy")


def test_execute_returns_rows_written(tl, db):
    t = f"{db}.kv"
    assert tl.execute(f"CREATE TABLE {t} (id BIGINT NOT NULL, v STRING, PRIMARY KEY (id)) WITH ('bucket' = '1')") == 0
    assert tl.execute(f"INSERT INTO {t} VALUES (1, 'a'), (2, 'b'), (3, 'c')") == 3
    assert tl.execute(f"UPDATE {t} SET v = $1 WHERE id >= $2", ("z", 2)) == 2
    assert tl.execute(f"DELETE FROM {t} WHERE id = 1") == 1
    assert tl.execute(f"SELECT * FROM {t}") == -1
    assert rows(tl, f"SELECT * FROM {t} ORDER BY id") == [{"id": 2, "v": "z"}, {"id": 3, "v": "z"}]
    # The ADBC connection is there for what the client does not wrap, in the same session.
    assert tl.connection.adbc_get_table_schema("kv", db_schema_filter=db).names == ["id", "v"]
    assert tl.table_schema(t).names == ["id", "v"]


def test_plain_adbc_connect_still_works(uri, db):
    conn = tidelake.connect(uri, user=USER, password=PASSWORD)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT 41 + 1 AS x")
            assert cur.fetchall() == [(42,)]
    finally:
        conn.close()


# ---------------------------------------------------------------- ingest


def test_ingest_create_append_replace(tl, db, warehouse):
    t = f"{db}.orders"
    first = pd.DataFrame({"id": [1, 2, 3], "item": ["apple", "pear", "plum"], "qty": [3, 1, 7],
                          "dt": ["2024-01-01", "2024-01-01", "2024-01-02"]}, index=[10, 11, 12])
    assert tl.ingest(t, first, mode="create", primary_key=["id", "dt"], partition_keys="dt",
                     options={"bucket": 2, "changelog-producer": "input"}) == 3
    schema = schema_file(warehouse, t)
    assert schema["primaryKeys"] == ["id", "dt"] and schema["partitionKeys"] == ["dt"]
    assert schema["options"]["bucket"] == "2" and schema["options"]["changelog-producer"] == "input"
    assert [f["name"] for f in schema["fields"]] == ["id", "item", "qty", "dt"]  # no pandas index column
    assert tl.primary_key(t) == ["id", "dt"]
    assert rows(tl, f"SELECT id, item, qty, dt FROM {t} ORDER BY id") == [
        {"id": 1, "item": "apple", "qty": 3, "dt": "2024-01-01"}, {"id": 2, "item": "pear", "qty": 1, "dt": "2024-01-01"},
        {"id": 3, "item": "plum", "qty": 7, "dt": "2024-01-02"}]

    # create on an existing table: AlreadyExists, nothing written
    with pytest.raises(tidelake.AlreadyExistsError, match=f"table '{t}' already exists") as ei:
        tl.ingest(t, first, mode="create")
    assert isinstance(ei.value, pa.ArrowException)
    assert count(tl, t) == 3 and len(snapshot_ids(tl, t)) == 1

    # append from polars and from a stream of batches: each call is one snapshot
    assert tl.ingest(t, pl.DataFrame({"id": [4], "item": ["fig"], "qty": [2], "dt": ["2024-01-02"]})) == 1
    schema = pa.schema([("id", pa.int64()), ("item", pa.string()), ("qty", pa.int32()), ("dt", pa.string())])
    batches = [pa.record_batch([pa.array([i], pa.int64()), pa.array([f"x{i}"]), pa.array([i], pa.int32()),
                                pa.array(["2024-01-03"])], schema=schema) for i in range(5, 9)]
    assert tl.ingest(t, pa.RecordBatchReader.from_batches(schema, iter(batches)), mode="append") == 4
    assert count(tl, t) == 8 and len(snapshot_ids(tl, t)) == 3

    # create_append: created when missing, appended to afterwards
    e = f"{db}.events"
    assert tl.ingest(e, {"id": [1, 2], "kind": ["a", "b"]}, mode="create_append") == 2
    assert tl.ingest(e, [{"id": 3, "kind": "c"}], mode="create_append") == 1
    assert tl.primary_key(e) == []
    assert rows(tl, f"SELECT * FROM {e} ORDER BY id") == [{"id": 1, "kind": "a"}, {"id": 2, "kind": "b"},
                                                          {"id": 3, "kind": "c"}]

    # replace: the rows of the call are all that is left
    assert tl.ingest(e, pa.table({"id": [9], "kind": ["z"]}), mode="replace") == 1
    assert rows(tl, f"SELECT * FROM {e}") == [{"id": 9, "kind": "z"}]

    # an empty frame writes nothing and fails nothing
    before = snapshot_ids(tl, e)
    assert tl.ingest(e, pa.table({"id": pa.array([], pa.int64()), "kind": pa.array([], pa.string())})) == 0
    assert rows(tl, f"SELECT * FROM {e}") == [{"id": 9, "kind": "z"}]
    assert snapshot_ids(tl, e) == before


def test_ingest_casts_to_the_table_types(tl, db):
    t = f"{db}.typed"
    tl.execute(f"CREATE TABLE {t} (id INT, small SMALLINT, price FLOAT, at TIMESTAMP)")
    frame = pd.DataFrame({"id": [1, 2], "small": [7, 8], "price": [1.5, 2.5],
                          "at": [pd.Timestamp("2024-01-01 00:00:01"), pd.Timestamp("2024-01-01 00:00:02.5")]})
    assert frame["id"].dtype == "int64" and frame["at"].dtype == "datetime64[ns]"
    assert tl.ingest(t, frame) == 2
    got = tl.sql(f"SELECT * FROM {t} ORDER BY id")
    assert got.schema.types == [pa.int32(), pa.int16(), pa.float32(), pa.timestamp("us")]
    assert got.to_pylist() == [
        {"id": 1, "small": 7, "price": 1.5, "at": datetime.datetime(2024, 1, 1, 0, 0, 1)},
        {"id": 2, "small": 8, "price": 2.5, "at": datetime.datetime(2024, 1, 1, 0, 0, 2, 500000)}]
    # A value that does not fit is refused by the client, before anything is sent.
    with pytest.raises(tidelake.InvalidArgumentError, match="column 'id': cannot convert int64 to the table's int32"):
        tl.ingest(t, pa.table({"id": pa.array([2**40], pa.int64())}))
    # Without the cast the server decides, and it only widens.
    with pytest.raises(tidelake.InvalidArgumentError, match="column 'id': has type Int64, the table expects Int32"):
        tl.ingest(t, pa.table({"id": pa.array([3], pa.int64())}), cast=False)
    assert tl.ingest(t, pa.table({"id": pa.array([3], pa.int16())}), cast=False) == 1
    assert count(tl, t) == 3


def test_failing_source_commits_nothing(tl, db):
    """pyarrow cannot cancel a DoPut and ending it commits: the client must make the server refuse the
    upload when the data source raises halfway."""
    t = f"{db}.stream"
    tl.execute(f"CREATE TABLE {t} (id BIGINT)")
    schema = pa.schema([("id", pa.int64())])

    def batches():
        for i in range(3):
            yield pa.record_batch([pa.array(range(i * 100, i * 100 + 100), pa.int64())], schema=schema)
        raise OSError("the source broke")

    with pytest.raises(OSError, match="the source broke"):
        tl.ingest(t, pa.RecordBatchReader.from_batches(schema, batches()))
    assert count(tl, t) == 0 and snapshot_ids(tl, t) == []
    # The client (and its session) keep working.
    assert tl.ingest(t, pa.table({"id": pa.array([1, 2], pa.int64())})) == 2
    assert count(tl, t) == 2


# ---------------------------------------------------------------- upsert, delete, row kinds


def test_upsert_then_delete_matches_a_model(tl, db):
    t = f"{db}.stock"
    tl.execute(f"CREATE TABLE {t} (sku STRING NOT NULL, shop INT NOT NULL, qty INT, note STRING, "
               "PRIMARY KEY (sku, shop)) PARTITIONED BY (shop) WITH ('bucket' = '2')")
    model = {}

    def check():
        got = {(r["sku"], r["shop"]): (r["qty"], r["note"]) for r in rows(tl, f"SELECT * FROM {t}")}
        assert got == model

    first = pd.DataFrame({"sku": ["a", "b", "c", "d"], "shop": [1, 1, 2, 2], "qty": [1, 2, 3, 4],
                          "note": ["x", None, "y", "z"]})
    assert tl.upsert(t, first) == 4
    model.update({("a", 1): (1, "x"), ("b", 1): (2, None), ("c", 2): (3, "y"), ("d", 2): (4, "z")})
    check()
    # Same keys replace their rows (deduplicate merge engine); a new key is inserted.
    assert tl.upsert(t, pl.DataFrame({"sku": ["b", "c", "e"], "shop": [1, 2, 1], "qty": [20, 30, 50],
                                      "note": ["B", None, "E"]})) == 3
    model.update({("b", 1): (20, "B"), ("c", 2): (30, None), ("e", 1): (50, "E")})
    check()
    # Deletes by composite key (tuples in key order), by a frame of keys, and of a key that is not there.
    assert tl.delete(t, [("a", 1), ("zzz", 9)]) == 2
    del model[("a", 1)]
    check()
    assert tl.delete(t, pd.DataFrame({"sku": ["c"], "shop": [2]})) == 1
    del model[("c", 2)]
    check()
    assert tl.upsert(t, [{"sku": "a", "shop": 1, "qty": 100, "note": "back"}]) == 1
    model[("a", 1)] = (100, "back")
    check()
    with pytest.raises(ValueError, match=r"each key must have 2 value\(s\): \(sku, shop\)"):
        tl.delete(t, ["a"])
    with pytest.raises(tidelake.InvalidArgumentError, match=r"has primary key \(sku, shop\), not \(sku\)"):
        tl.upsert(t, first, primary_key="sku")
    check()


def test_upsert_refuses_append_tables_and_creates_missing_ones(tl, db, warehouse):
    a = f"{db}.log"
    tl.execute(f"CREATE TABLE {a} (id BIGINT, v STRING)")
    tl.execute(f"INSERT INTO {a} VALUES (1, 'a')")
    for kw in ({}, {"primary_key": "id"}):
        with pytest.raises(tidelake.InvalidArgumentError, match="has no primary key, so rows cannot be upserted"):
            tl.upsert(a, pa.table({"id": [1], "v": ["b"]}), **kw)
    assert rows(tl, f"SELECT * FROM {a}") == [{"id": 1, "v": "a"}]
    # Retractions are the server's to refuse on an append table.
    with pytest.raises(tidelake.InvalidArgumentError, match="is an append table; it cannot take -U/-D rows"):
        tl.delete(a, [{"id": 1}])
    assert rows(tl, f"SELECT * FROM {a}") == [{"id": 1, "v": "a"}]

    m = f"{db}.fresh"
    with pytest.raises(tidelake.NotFoundError, match="does not exist; pass primary_key= to create it"):
        tl.upsert(m, pa.table({"id": [1], "v": ["a"]}))
    assert tl.upsert(m, pa.table({"id": [1, 2, 1], "v": ["a", "b", "c"]}), primary_key="id",
                     options={"bucket": "1"}) == 3
    assert schema_file(warehouse, m)["primaryKeys"] == ["id"]
    assert rows(tl, f"SELECT * FROM {m} ORDER BY id") == [{"id": 1, "v": "c"}, {"id": 2, "v": "b"}]
    # Without a bucket count a primary-key table has dynamic buckets, as in Paimon.
    d = f"{db}.nobucket"
    assert tl.upsert(d, pa.table({"id": [1, 2], "v": ["a", "b"]}), primary_key="id") == 2
    assert tl.upsert(d, pa.table({"id": [2, 3], "v": ["B", "c"]})) == 2
    assert schema_file(warehouse, d)["options"].get("bucket", "-1") == "-1"
    assert rows(tl, f"SELECT * FROM {d} ORDER BY id") == [
        {"id": 1, "v": "a"}, {"id": 2, "v": "B"}, {"id": 3, "v": "c"}]


def test_apply_changes_with_row_kinds(tl, db):
    t = f"{db}.acct"
    tl.execute(f"CREATE TABLE {t} (id BIGINT NOT NULL, owner STRING, balance BIGINT, PRIMARY KEY (id)) "
               "WITH ('bucket' = '1')")
    tl.ingest(t, pa.table({"id": [1, 2, 3], "owner": ["ann", "bob", "cy"], "balance": [10, 20, 30]}))
    changes = pa.table({"op": ["-U", "+U", "-D", "+I", "+I"], "id": [1, 1, 2, 4, 5],
                        "owner": ["ann", "ann", "bob", "dee", "eve"], "balance": [10, 15, 20, 40, 50]})
    assert tl.apply_changes(t, changes, row_kind_column="op") == 5
    assert rows(tl, f"SELECT * FROM {t} ORDER BY id") == [
        {"id": 1, "owner": "ann", "balance": 15}, {"id": 3, "owner": "cy", "balance": 30},
        {"id": 4, "owner": "dee", "balance": 40}, {"id": 5, "owner": "eve", "balance": 50}]
    # The row-kind column is not stored.
    assert tl.table_schema(t).names == ["id", "owner", "balance"]


def test_apply_a_changelog_to_another_table(tl, db):
    """Table A's changelog (a bounded subscription from snapshot 1) applied to table B leaves B equal to A,
    streamed whole (one commit) or batch by batch, and also from the SQL changelog table."""
    ddl = ("CREATE TABLE {} (id BIGINT NOT NULL, name STRING, score INT, PRIMARY KEY (id)) "
           "WITH ('bucket' = '2', 'changelog-producer' = 'input')")
    a, b, c, d = (f"{db}.{n}" for n in ("a", "b", "c", "d"))
    for t in (a, b, c, d):
        tl.execute(ddl.format(t))
    tl.ingest(a, pa.table({"id": [1, 2, 3, 4], "name": ["ann", "bob", "cy", "dee"], "score": [1, 2, 3, 4]}))
    tl.upsert(a, pd.DataFrame({"id": [2, 5], "name": ["bob", "eve"], "score": [20, 50]}))
    tl.execute(f"UPDATE {a} SET score = score + 100 WHERE id IN (1, 5)")
    tl.delete(a, [3])
    tl.apply_changes(a, pa.table({"_row_kind": ["-U", "+U", "+I"], "id": [4, 4, 6], "name": ["dee", "DEE", "fay"],
                                  "score": [4, 44, 6]}))
    tl.execute(f"DELETE FROM {a} WHERE id = 6")
    last = snapshot_ids(tl, a)[-1]
    assert last >= 6  # six writes, and maybe a compaction
    expected = rows(tl, f"SELECT * FROM {a} ORDER BY id")
    assert [r["id"] for r in expected] == [1, 2, 4, 5]

    with tl.subscribe(a, start="from-snapshot", snapshot_id=1, end_snapshot_id=last) as sub:
        assert sub.schema.names == ["_row_kind", "id", "name", "score"]
        written = tl.apply_changes(b, sub)
    kinds = rows(tl, f'SELECT _row_kind, count(*) AS n FROM {db}."a$changelog" GROUP BY _row_kind')
    assert written == sum(r["n"] for r in kinds) and {r["_row_kind"] for r in kinds} == {"+I", "-U", "+U", "-D"}
    assert rows(tl, f"SELECT * FROM {b} ORDER BY id") == expected
    assert len(snapshot_ids(tl, b)) == 1

    with tl.subscribe(a, start="from-snapshot", snapshot_id=1, end_snapshot_id=last) as sub:
        for batch in sub:
            tl.apply_changes(c, batch)
    assert rows(tl, f"SELECT * FROM {c} ORDER BY id") == expected

    log = tl.sql(f'SELECT * FROM {db}."a$changelog" ORDER BY _snapshot_id').drop_columns(["_snapshot_id"])
    assert tl.apply_changes(d, log) == written
    assert rows(tl, f"SELECT * FROM {d} ORDER BY id") == expected


# ---------------------------------------------------------------- errors


def test_errors_name_the_problem_and_change_nothing(tl, db, uri):
    t = f"{db}.kv"
    tl.execute(f"CREATE TABLE {t} (id BIGINT NOT NULL, v STRING, PRIMARY KEY (id)) WITH ('bucket' = '1')")
    tl.ingest(t, pa.table({"id": [1, 2], "v": ["a", "b"]}))
    before = (rows(tl, f"SELECT * FROM {t} ORDER BY id"), snapshot_ids(tl, t))

    # Unknown tables: NotFound through ADBC (SQL) and through Flight (ingest), with the server's message.
    with pytest.raises(tidelake.NotFoundError) as ei:
        tl.sql(f"SELECT * FROM {db}.nothere")
    assert str(ei.value) == f"table '{db}.nothere' does not exist"
    assert isinstance(ei.value, adbc_driver_manager.ProgrammingError) and ei.value.code == "NOT_FOUND"
    with pytest.raises(tidelake.NotFoundError) as ei:
        tl.ingest(f"{db}.nothere", pa.table({"id": [1]}))
    assert str(ei.value) == f"table '{db}.nothere' does not exist"
    assert isinstance(ei.value, pa.ArrowKeyError)
    assert "gRPC client debug context" in str(ei.value.original)
    with pytest.raises(tidelake.NotFoundError, match="database 'no_such_db' does not exist"):
        tl.ingest("no_such_db.t", pa.table({"id": [1]}), mode="create")

    # A bad row kind fails the whole call, whatever the other rows are.
    bad = pa.table({"_row_kind": ["+I", "+U", "*X"], "id": [7, 1, 8], "v": ["g", "A", "h"]})
    with pytest.raises(tidelake.InvalidArgumentError,
                       match=r"row 2 has row kind '\*X' in column '_row_kind'; expected \+I, -U, \+U or -D"):
        tl.apply_changes(t, bad)
    with pytest.raises(tidelake.InvalidArgumentError, match="row-kind column '_row_kind' is missing from the input"):
        tl.apply_changes(t, pa.table({"id": [9], "v": ["i"]}))
    # Duplicate create, through SQL and through ingest.
    with pytest.raises(tidelake.AlreadyExistsError, match=f"table '{t}' already exists"):
        tl.execute(f"CREATE TABLE {t} (id BIGINT)")
    with pytest.raises(tidelake.AlreadyExistsError, match=f"table '{t}' already exists"):
        tl.ingest(t, pa.table({"id": [5], "v": ["e"]}), mode="create")
    # Columns the table does not have; NULLs in the key.
    with pytest.raises(tidelake.InvalidArgumentError, match="has no column 'nope'"):
        tl.ingest(t, pa.table({"id": [5], "nope": ["e"]}))
    with pytest.raises(tidelake.InvalidArgumentError, match="primary key column 'id' has 1 null value"):
        tl.upsert(t, pa.table({"id": pa.array([None, 6], pa.int64()), "v": ["x", "y"]}))
    with pytest.raises(tidelake.InvalidArgumentError, match="SQL syntax error"):
        tl.sql("SELEC 1")
    assert (rows(tl, f"SELECT * FROM {t} ORDER BY id"), snapshot_ids(tl, t)) == before

    with pytest.raises(tidelake.UnauthenticatedError, match="^invalid user name or password$") as ei:
        tidelake.Client(uri, user=USER, password="wrong")
    assert isinstance(ei.value, flight.FlightUnauthenticatedError)
    with pytest.raises(tidelake.UnavailableError, match="failed to connect") as ei:
        tidelake.Client(f"grpc://127.0.0.1:{free_port()}", user=USER, password=PASSWORD)
    assert isinstance(ei.value, flight.FlightUnavailableError)
    with pytest.raises(ValueError, match="unknown ingest mode 'merge'"):
        tl.ingest(t, pa.table({"id": [1]}), mode="merge")
    with pytest.raises(TypeError, match="cannot write int"):
        tl.ingest(t, 42)


def test_failed_create_leaves_no_table(tl, db):
    bad = pa.table({"_row_kind": ["+I", "bad"], "id": [1, 2]})
    with pytest.raises(tidelake.InvalidArgumentError, match="row 1 has row kind 'bad'"):
        tl.ingest(f"{db}.half", bad, mode="create", row_kind_column="_row_kind", primary_key="id",
                  options={"bucket": 1})
    with pytest.raises(tidelake.NotFoundError):
        tl.table_schema(f"{db}.half")


def test_failed_replace_keeps_the_old_rows(tl, db):
    t = f"{db}.rep"
    tl.execute(f"CREATE TABLE {t} (id BIGINT, v STRING)")
    tl.execute(f"INSERT INTO {t} VALUES (1, 'keep me')")
    with pytest.raises(tidelake.InvalidArgumentError, match="row 1 has row kind 'bad'"):
        tl.ingest(t, pa.table({"k": ["+I", "bad"], "id": ["x", "y"]}), mode="replace", row_kind_column="k")
    assert tl.table_schema(t).names == ["id", "v"]
    assert rows(tl, f"SELECT * FROM {t}") == [{"id": 1, "v": "keep me"}]
    # The staging table of the failed write is gone too.
    assert [r for r in rows(tl, f"SHOW TABLES") if "_tidelake_" in str(r)] == []


def test_replace_with_a_new_definition_recreates_the_table(tl, db):
    """A replace that names a primary key, partition keys or options the table lacks gets a table with
    that definition (staged, then renamed into place); one that names none keeps the table's."""
    t = f"{db}.redef"
    tl.execute(f"CREATE TABLE {t} (id BIGINT, v STRING)")
    tl.execute(f"INSERT INTO {t} VALUES (1, 'old')")
    data = pa.table({"id": pa.array([2, 2, 3], pa.int64()), "v": ["a", "b", "c"]})
    assert tl.ingest(t, data, mode="replace", primary_key="id", options={"bucket": 1}) == 3
    assert tl.primary_key(t) == ["id"]
    assert rows(tl, f"SELECT * FROM {t} ORDER BY id") == [{"id": 2, "v": "b"}, {"id": 3, "v": "c"}]
    # No definition named: an overwrite of the same table, which keeps its key and history.
    assert tl.ingest(t, pa.table({"id": pa.array([4, 4], pa.int64()), "v": ["x", "y"]}), mode="replace") == 2
    assert tl.primary_key(t) == ["id"]
    assert rows(tl, f"SELECT * FROM {t}") == [{"id": 4, "v": "y"}]
    assert len(rows(tl, f'SELECT * FROM {db}."redef$snapshots"')) == 2


def test_failed_replace_with_the_same_columns_keeps_the_old_rows(tl, db):
    t = f"{db}.rep"
    tl.execute(f"CREATE TABLE {t} (id BIGINT)")
    tl.execute(f"INSERT INTO {t} VALUES (1)")
    with pytest.raises(tidelake.InvalidArgumentError, match="row 1 has row kind 'bad'"):
        tl.ingest(t, pa.table({"k": ["+I", "bad"], "id": [5, 6]}), mode="replace", row_kind_column="k")
    assert rows(tl, f"SELECT * FROM {t}") == [{"id": 1}]


def test_logs_in_again_after_a_server_restart(server_factory):
    """Tokens live in the server's memory: after a restart the client gets a new one and repeats the call."""
    srv = server_factory()
    tl = tidelake.Client(srv.uri, user=USER, password=PASSWORD)
    try:
        tl.execute("CREATE DATABASE r")
        tl.ingest("r.t", pa.table({"id": [1, 2]}), mode="create")
        token = tl._header
        port, warehouse = srv.port, srv.warehouse
        assert srv.stop() == 0
        srv = server_factory(warehouse=warehouse, port=port)

        def retry_unavailable(fn):
            # The gRPC channel may still be in its reconnect backoff when the server is back.
            for _ in range(40):
                try:
                    return fn()
                except tidelake.UnavailableError:
                    time.sleep(0.25)
            return fn()

        assert retry_unavailable(lambda: tl.sql("SELECT count(*) AS n FROM r.t").to_pylist()) == [{"n": 2}]
        assert tl._header != token
        token = tl._header
        assert srv.stop() == 0
        srv = server_factory(warehouse=warehouse, port=port)
        assert retry_unavailable(lambda: tl.ingest("r.t", pa.table({"id": [3]}))) == 1
        assert tl._header != token
        assert tl.sql("SELECT id FROM r.t ORDER BY id").column("id").to_pylist() == [1, 2, 3]
    finally:
        tl.close()


# ---------------------------------------------------------------- subscribe and admin through the client


def test_subscribe_and_admin_use_the_client_credentials(tl, db):
    t = f"{db}.t"
    tl.execute(f"CREATE TABLE {t} (id BIGINT NOT NULL, v STRING, PRIMARY KEY (id)) "
               "WITH ('bucket' = '1', 'write-only' = 'true')")
    for i in range(3):
        tl.upsert(t, pa.table({"id": [i], "v": [f"v{i}"]}))
    with tl.subscribe(t, start="from-snapshot", snapshot_id=1, end_snapshot_id=3, output="pandas") as sub:
        frames = list(sub)
    got = pd.concat(frames)
    assert got["_row_kind"].tolist() == ["+I"] * 3 and got["id"].tolist() == [0, 1, 2]
    with pytest.raises(tidelake.NotFoundError, match=f"table '{db}.nothere' does not exist"):
        tl.subscribe(f"{db}.nothere")

    admin = tl.admin
    assert admin is tl.admin
    assert isinstance(admin, tidelake.admin.Admin)
    info = admin.table_info(t)
    assert info["latest_snapshot_id"] == 3 and info["total_rows"] == 3
    assert admin.compact(t, full=True)["files_before"] == 3
    assert admin.table_info(t)["buckets"][0]["files"] == 1
    with pytest.raises(tidelake.NotFoundError) as ei:
        admin.table_info(f"{db}.nothere")
    assert isinstance(ei.value, pa.ArrowKeyError)
    tl.close()
    with pytest.raises(ValueError, match="the client is closed"):
        tl.sql("SELECT 1")


# ---------------------------------------------------------------- the examples


def run_example(uri, *args, timeout=120):
    env = dict(os.environ, TIDELAKE_URI=uri, TIDELAKE_USER=USER, TIDELAKE_PASSWORD=PASSWORD)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "clients" / "python"), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, *map(str, args)], env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_every_example_has_a_test():
    # replicate_stream.py runs under kill -9 in tests/python/test_replicate_stream.py.
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == ["admin.py", "ingest.py", "query.py", "replicate.py",
                                                             "replicate_stream.py", "subscribe.py"]
    assert "replicate_stream.py" in (pathlib.Path(__file__).parent / "test_replicate_stream.py").read_text()


@pytest.mark.parametrize("name,expected", [
    ("query.py", ["inserted 3 rows", "updated 1 row", "arrow: 3 rows, schema ['id', 'item', 'qty', 'dt']",
                  "{'id': 2, 'item': 'pear', 'qty': 11, 'dt': '2024-01-01'}", "pandas:", "polars:",
                  "qty < 5: [{'id': 1, 'item': 'apple'}]"]),
    ("ingest.py", ["create: 3 rows", "append (pandas): 2 rows", "replace: 1 row", "upsert (creates): 3 rows",
                   "primary key: ['sku']", "delete: 2 keys", "apply_changes: 4 change rows",
                   "{'sku': 'b', 'qty': 22, 'price': 2.75}", "refused: table example_ingest.stock: row 1 has row kind 'oops'"]),
    ("admin.py", ["table_info: snapshot 3, 3 rows, primary key ['id']", "'files_before': 3, 'files_after': 1",
                  "create_tag: [{'name': 'after-two', 'snapshot_id': 2", "rollback: removed snapshots [4, 3]",
                  "rows now: [{'id': 1, 'balance': 100}, {'id': 2, 'balance': 200}]",
                  "expire_snapshots: removed snapshots [1, 2]", "alter_table: schema 1, columns "
                  "['id', 'owner', 'balance', 'note']", "refused: Cannot drop partition key or primary key: [id]"]),
    ("replicate.py", ["source has snapshots 1..4", "applied 9 change rows", "replica equals source: True"]),
])
def test_example_runs(uri, name, expected):
    # Twice: an example cleans up after an earlier run of itself.
    for _ in range(2):
        p = run_example(uri, EXAMPLES / name)
        assert p.returncode == 0, f"{name} exited {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
        for text in expected:
            assert text in p.stdout, f"{name}: {text!r} not in\n{p.stdout}"


def test_subscribe_example_prints_the_changes(uri, tl, db):
    t = f"{db}.feed"
    tl.execute(f"CREATE TABLE {t} (id BIGINT NOT NULL, v STRING, PRIMARY KEY (id)) WITH ('bucket' = '1')")
    tl.upsert(t, pa.table({"id": [1, 2], "v": ["a", "b"]}))
    tl.delete(t, [1])
    p = run_example(uri, EXAMPLES / "subscribe.py", t, "--start", "from-snapshot", "--snapshot-id", "1",
                    "--end-snapshot-id", "2")
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == ['snapshot 1 +I {"id": 1, "v": "a"}', 'snapshot 1 +I {"id": 2, "v": "b"}',
                                     'snapshot 2 -D {"id": 1, "v": null}']
    assert "# last completed snapshot: 2" in p.stderr
