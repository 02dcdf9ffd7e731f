"""End-to-end tests of `tidelake serve` with real clients: ADBC Flight SQL (DB-API), pyarrow.flight,
pandas, polars and pypaimon (which must read what the server wrote).

Every test works in its own database (fixture `db`) or on uniquely named tables, so tests are independent.
"""
import datetime
import decimal
import json
import threading
import time

import adbc_driver_manager
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.flight as flight
import pytest
from adbc_driver_manager import AdbcStatusCode

from conftest import CATALOG, PASSWORD, USER, adbc_connect

ADBC_ERROR = adbc_driver_manager.Error


# ---------------------------------------------------------------- helpers


def run(conn, query, params=None):
    """Executes one statement (prepared, as ADBC does) and returns the whole result as an Arrow table."""
    with conn.cursor() as cur:
        cur.execute(query, params)
        return cur.fetch_arrow_table()


def _key(row):
    return tuple((v is None, v if v is not None else 0) for v in row)


def rows(conn, query, params=None, sort=True):
    t = run(conn, query, params)
    out = [tuple(r.values()) for r in t.to_pylist()]
    return sorted(out, key=_key) if sort else out


def scalar(conn, query, params=None):
    t = run(conn, query, params)
    assert t.num_rows == 1 and t.num_columns == 1, t
    return t.column(0)[0].as_py()


def affected(cur):
    """Rows written by the INSERT/UPDATE/DELETE `cur` just executed.

    The server marks prepared DML `is_update`, so ADBC runs it as an update: no result set, and the count
    is the cursor's rowcount. A client that fetches instead gets one row with a BIGINT `count` column.
    """
    t = cur.fetch_arrow_table()
    if t.num_columns == 0:
        assert t.num_rows == 0
        return cur.rowcount
    assert t.column_names == ["count"], f"DML result schema {t.schema}"
    assert t.schema.field("count").type == pa.int64()
    assert t.num_rows == 1, t
    return t.column(0)[0].as_py()


def dml(conn, query, params=None):
    """Runs INSERT/UPDATE/DELETE and returns the number of rows written."""
    with conn.cursor() as cur:
        cur.execute(query, params)
        return affected(cur)


def assert_usable(conn):
    assert rows(conn, "SELECT 1 AS one") == [(1,)]


def expect_error(conn, query, params=None, codes=None):
    """The statement fails with an ADBC error (optionally with one of `codes`), and the connection still works."""
    with pytest.raises(ADBC_ERROR) as ei:
        run(conn, query, params)
    if codes is not None:
        assert ei.value.status_code in codes, f"{query!r}: status {ei.value.status_code!r}: {ei.value}"
    assert_usable(conn)
    return ei.value


def create_orders(conn, t, merge_engine=None, bucket=2):
    """The primary-key table of the brief: partitioned by dt, fixed buckets."""
    extra = f", 'merge-engine' = '{merge_engine}'" if merge_engine else ""
    run(conn, f"CREATE TABLE {t} (id BIGINT NOT NULL, item STRING, qty INT, dt STRING, PRIMARY KEY (id, dt)) "
              f"PARTITIONED BY (dt) WITH ('bucket' = '{bucket}'{extra})")


def create_events(conn, t):
    """An append table (no primary key, bucket -1)."""
    run(conn, f"CREATE TABLE {t} (id BIGINT, name STRING, v DOUBLE)")


def table_dir(warehouse, db, table):
    return warehouse / f"{db}.db" / table


def snapshot_millis(warehouse, db, table):
    """{snapshot id: commit time in epoch millis} from the snapshot files on disk."""
    d = table_dir(warehouse, db, table) / "snapshot"
    out = {}
    for f in d.glob("snapshot-*"):
        js = json.loads(f.read_text())
        out[js["id"]] = js["timeMillis"]
    return out


def utc_literal(millis):
    t = datetime.datetime(1970, 1, 1) + datetime.timedelta(milliseconds=millis)
    return t.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


def append_snapshot_ids(conn, t):
    return [r[0] for r in rows(conn, f'SELECT snapshot_id, commit_kind FROM {sys_table(t, "snapshots")} '
                                     "ORDER BY snapshot_id", sort=False) if r[1] == "APPEND"]


def sys_table(t, kind):
    db, name = t.split(".")
    return f'{db}."{name}${kind}"'


def objects(conn, **kw):
    return conn.adbc_get_objects(**kw).read_all().to_pylist()


def schemas_of(objs):
    return {s["db_schema_name"]: s for c in objs for s in (c["catalog_db_schemas"] or [])}


def tables_of(objs):
    return {t["table_name"]: t for s in schemas_of(objs).values() for t in (s["db_schema_tables"] or [])}


# Flight SQL commands for pyarrow.flight, encoded by hand (protobuf wire format, packed in google.protobuf.Any).

def _varint(n):
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | 0x80 if n else b)
        if not n:
            return bytes(out)


def _pb_bytes(field, data):
    return _varint(field << 3 | 2) + _varint(len(data)) + data


def flight_sql_command(message, body=b""):
    url = f"type.googleapis.com/arrow.flight.protocol.sql.{message}".encode()
    return _pb_bytes(1, url) + _pb_bytes(2, body)


def statement_query(sql):
    return flight.FlightDescriptor.for_command(flight_sql_command("CommandStatementQuery", _pb_bytes(1, sql.encode())))


def flight_query(client, options, sql):
    info = client.get_flight_info(statement_query(sql), options)
    parts = [client.do_get(ep.ticket, options).read_all() for ep in info.endpoints]
    return info, pa.concat_tables(parts) if parts else info.schema.empty_table()


# ---------------------------------------------------------------- auth


def test_handshake_returns_bearer_token_header(flight_client):
    key, value = flight_client.authenticate_basic_token(USER, PASSWORD)
    assert key.lower() == b"authorization"
    assert value.startswith(b"Bearer ") and len(value) > len(b"Bearer ") + 8


@pytest.mark.parametrize("user,password", [(USER, "wrong"), ("mallory", PASSWORD), (USER, ""), ("", "")])
def test_handshake_with_bad_credentials_is_unauthenticated(flight_client, user, password):
    with pytest.raises(flight.FlightUnauthenticatedError):
        flight_client.authenticate_basic_token(user, password)


def test_flight_sql_query_with_bearer_token(flight_client, flight_options):
    info, t = flight_query(flight_client, flight_options, "SELECT 1 AS one, 'x' AS s")
    assert t.to_pylist() == [{"one": 1, "s": "x"}]
    # The FlightInfo schema is the streamed schema, and no endpoint points somewhere a client can't reach.
    assert info.schema.equals(t.schema), (info.schema, t.schema)
    for ep in info.endpoints:
        for loc in ep.locations:
            assert loc.uri.startswith(b"arrow-flight-reuse-connection"), loc


def test_request_without_token_is_unauthenticated(flight_client):
    with pytest.raises(flight.FlightUnauthenticatedError):
        flight_client.get_flight_info(statement_query("SELECT 1"))


def test_request_with_forged_token_is_unauthenticated(flight_client, auth_header):
    token = auth_header[1]
    for bad in [b"Bearer not-a-token", b"Bearer " + token[7:-2] + (b"AA" if token[-2:] != b"AA" else b"BB"),
                b"Bearer ", b"Basic " + b"YWxpY2U6d3Jvbmc="]:  # alice:wrong
        opts = flight.FlightCallOptions(headers=[(b"authorization", bad)])
        with pytest.raises(flight.FlightUnauthenticatedError):
            flight_client.get_flight_info(statement_query("SELECT 1"), opts)


def test_flight_sql_dml_returns_a_count_row(flight_client, flight_options, uniq):
    """A raw Flight SQL client running DML as a statement query gets one row: `count` BIGINT."""
    name = uniq("raw")
    flight_query(flight_client, flight_options, f"CREATE TABLE default.{name} (id BIGINT, s STRING)")
    info, t = flight_query(flight_client, flight_options, f"INSERT INTO default.{name} VALUES (1, 'a'), (2, 'b')")
    assert t.to_pylist() == [{"count": 2}]
    assert t.schema.field("count").type == pa.int64()
    assert info.schema.equals(t.schema)
    _, t = flight_query(flight_client, flight_options, f"SELECT id, s FROM default.{name} ORDER BY id")
    assert t.to_pylist() == [{"id": 1, "s": "a"}, {"id": 2, "s": "b"}]


def test_ticket_alone_does_not_grant_access(flight_client, flight_options):
    info = flight_client.get_flight_info(statement_query("SELECT 42 AS x"), flight_options)
    with pytest.raises(flight.FlightUnauthenticatedError):
        flight_client.do_get(info.endpoints[0].ticket).read_all()
    # With the token the same ticket is served.
    assert flight_client.do_get(info.endpoints[0].ticket, flight_options).read_all().to_pylist() == [{"x": 42}]


def test_flight_get_schema(flight_client, flight_options):
    schema = flight_client.get_schema(statement_query("SELECT CAST(1 AS INT) AS a, 'b' AS b"), flight_options).schema
    assert schema.names == ["a", "b"]
    assert schema.field("a").type == pa.int32()
    assert schema.field("b").type == pa.string()


def test_adbc_wrong_password_is_unauthenticated(uri):
    with pytest.raises(ADBC_ERROR) as ei:
        c = adbc_connect(uri, USER, "wrong")
        try:
            run(c, "SELECT 1")
        finally:
            c.close()
    assert ei.value.status_code == AdbcStatusCode.UNAUTHENTICATED or "unauthenticated" in str(ei.value).lower()


def test_adbc_without_credentials_is_unauthenticated(uri):
    with pytest.raises(ADBC_ERROR) as ei:
        c = adbc_connect(uri, None, None)
        try:
            run(c, "SELECT 1")
        finally:
            c.close()
    assert ei.value.status_code == AdbcStatusCode.UNAUTHENTICATED or "unauthenticated" in str(ei.value).lower()


def test_adbc_with_bearer_token_from_handshake(connect, auth_header):
    c = connect(user=None, password=None, **{"adbc.flight.sql.authorization_header": auth_header[1].decode()})
    assert rows(c, "SELECT 40 + 2 AS x") == [(42,)]


def test_several_connections_at_once(connect):
    conns = [connect() for _ in range(4)]
    results = [None] * len(conns)

    def work(i):
        results[i] = rows(conns[i], f"SELECT {i} AS i, count(*) AS n FROM (VALUES (1), (2), (3)) AS v(x) "
                                    f"WHERE x <= {i % 3 + 1}")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(conns))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [[(i, i % 3 + 1)] for i in range(len(conns))]


# ---------------------------------------------------------------- metadata


def test_get_info_names_tidelake(conn):
    info = conn.adbc_get_info()
    assert "tidelake" in str(info.get("vendor_name", "")).lower(), info
    assert info.get("vendor_version"), info
    assert info.get("driver_name"), info


def test_table_types(conn):
    assert "TABLE" in conn.adbc_get_table_types()


def test_get_objects_catalogs(conn):
    cats = [c["catalog_name"] for c in objects(conn, depth="catalogs")]
    assert CATALOG in cats


def test_get_objects_db_schemas(conn, db):
    names = set(schemas_of(objects(conn, depth="db_schemas", catalog_filter=CATALOG)))
    assert {"default", db} <= names
    assert set(schemas_of(objects(conn, depth="db_schemas", db_schema_filter=db))) == {db}
    assert set(schemas_of(objects(conn, depth="db_schemas", db_schema_filter=db[:-3] + "%"))) == {db}


def test_get_objects_tables_and_columns(conn, db):
    create_orders(conn, f"{db}.orders")
    create_events(conn, f"{db}.events")
    tables = tables_of(objects(conn, depth="all", catalog_filter=CATALOG, db_schema_filter=db))
    assert set(tables) == {"orders", "events"}
    assert {t["table_type"] for t in tables.values()} == {"TABLE"}
    cols = [(c["column_name"], c["ordinal_position"]) for c in tables["orders"]["table_columns"]]
    assert cols == [("id", 1), ("item", 2), ("qty", 3), ("dt", 4)]
    assert [c["column_name"] for c in tables["events"]["table_columns"]] == ["id", "name", "v"]
    # Table name filter, and the tables depth (no columns needed).
    only = tables_of(objects(conn, depth="tables", db_schema_filter=db, table_name_filter="ord%"))
    assert set(only) == {"orders"}
    assert set(tables_of(objects(conn, depth="tables", db_schema_filter=db, table_types_filter=["TABLE"]))) == \
        {"orders", "events"}


def test_get_table_schema(conn, db):
    create_orders(conn, f"{db}.orders")
    schema = conn.adbc_get_table_schema("orders", catalog_filter=CATALOG, db_schema_filter=db)
    assert schema.names == ["id", "item", "qty", "dt"]
    assert schema.types == [pa.int64(), pa.string(), pa.int32(), pa.string()]
    assert schema.field("id").nullable is False
    assert schema.field("item").nullable is True


def test_get_table_schema_of_unknown_table_fails(conn, db):
    with pytest.raises(ADBC_ERROR):
        conn.adbc_get_table_schema("nope", db_schema_filter=db)


def test_current_db_schema_session_option(connect, db):
    conn, other = connect(), connect()
    assert conn.adbc_current_catalog == CATALOG
    assert conn.adbc_current_db_schema == "default"
    conn.adbc_current_db_schema = db
    assert conn.adbc_current_db_schema == db
    # Unqualified names now resolve in `db`, for DDL, DML, queries and SHOW TABLES.
    create_events(conn, "events")
    dml(conn, "INSERT INTO events VALUES (1, 'a', 1.0)")
    assert rows(conn, "SELECT id FROM events") == [(1,)]
    assert rows(conn, f"SELECT id FROM {db}.events") == [(1,)]
    show = run(conn, "SHOW TABLES")
    assert "events" in {v for col in show.columns for v in col.to_pylist()}
    # The option belongs to that connection only.
    assert other.adbc_current_db_schema == "default"
    expect_error(other, "SELECT id FROM events")
    with pytest.raises(ADBC_ERROR):
        conn.adbc_current_db_schema = "no_such_database_x"
    assert conn.adbc_current_db_schema == db


def test_get_primary_keys(flight_client, flight_options, conn, db):
    create_orders(conn, f"{db}.orders")
    create_events(conn, f"{db}.events")

    def keys(table):
        cmd = flight_sql_command("CommandGetPrimaryKeys", _pb_bytes(2, db.encode()) + _pb_bytes(3, table.encode()))
        info = flight_client.get_flight_info(flight.FlightDescriptor.for_command(cmd), flight_options)
        t = pa.concat_tables([flight_client.do_get(ep.ticket, flight_options).read_all() for ep in info.endpoints])
        assert t.column_names == ["catalog_name", "db_schema_name", "table_name", "column_name", "key_name",
                                  "key_sequence"]
        return sorted((r["table_name"], r["column_name"], r["key_sequence"]) for r in t.to_pylist())

    assert keys("orders") == [("orders", "dt", 2), ("orders", "id", 1)]
    assert keys("events") == []


def test_execute_schema_does_not_run_the_query(conn, db):
    t = f"{db}.events"
    create_events(conn, t)
    with conn.cursor() as cur:
        schema = cur.adbc_execute_schema(f"SELECT id, v * 2 AS v2, name FROM {t}")
    assert schema.names == ["id", "v2", "name"]
    assert schema.types == [pa.int64(), pa.float64(), pa.string()]
    try:  # a DML statement's schema may be refused; it must not be executed
        with conn.cursor() as cur:
            cur.adbc_execute_schema(f"INSERT INTO {t} VALUES (1, 'a', 1.0)")
    except ADBC_ERROR:
        pass
    assert scalar(conn, f"SELECT count(*) FROM {t}") == 0


def test_result_schema_keeps_table_types_and_nullability(conn, db):
    t = f"{db}.orders"
    create_orders(conn, t)
    dml(conn, f"INSERT INTO {t} VALUES (1, 'apple', 3, '2024-01-01')")
    result = run(conn, f"SELECT * FROM {t}")
    assert result.schema.names == ["id", "item", "qty", "dt"]
    assert result.schema.types == [pa.int64(), pa.string(), pa.int32(), pa.string()]
    assert result.schema.field("id").nullable is False
    assert result.to_pylist() == [{"id": 1, "item": "apple", "qty": 3, "dt": "2024-01-01"}]


# ---------------------------------------------------------------- DDL


def test_top_n_reads_late_and_answers_as_pyarrow_sorts(conn, db):
    """ORDER BY … LIMIT through ADBC over an append table of three commits (files): the scan reads the
    sort column of every row, then the other columns of the winners (EXPLAIN ANALYZE counts them)."""
    run(conn, f"CREATE TABLE {db}.scores (id BIGINT NOT NULL, name STRING, score DOUBLE)")
    parts = []
    with conn.cursor() as cur:
        for start in (0, 4000, 8000):
            ids = list(range(start, start + 4000))
            part = pa.table({"id": pa.array(ids, pa.int64()), "name": [f"p{i}" for i in ids],
                             "score": pa.array([None if i % 97 == 0 else (i * 7919) % 10007 / 3.0 for i in ids],
                                               pa.float64())})
            cur.adbc_ingest("scores", part, mode="append", db_schema_name=db)
            parts.append(part)
    everything = pa.concat_tables(parts)
    for order, n in ((("score", "descending"), 7), (("score", "ascending"), 12)):
        want = everything.filter(pc.is_valid(everything["score"])).sort_by([order, ("id", "ascending")])
        want = want.slice(0, n).to_pylist()
        direction = "DESC" if order[1] == "descending" else "ASC"
        sql = f"SELECT id, name, score FROM {db}.scores ORDER BY score {direction} NULLS LAST, id LIMIT {n}"
        with conn.cursor() as cur:
            cur.execute(sql)
            got = cur.fetch_arrow_table().to_pylist()
            assert got == want, sql
            cur.execute(f"EXPLAIN ANALYZE {sql}")
            plan = "\n".join(str(v) for v in cur.fetch_arrow_table().column(1).to_pylist())
        assert "top_n_rows=" in plan, plan


def test_create_and_drop_database(conn, uniq):
    name = uniq("shop")
    run(conn, f"CREATE DATABASE {name}")
    assert name in schemas_of(objects(conn, depth="db_schemas"))
    expect_error(conn, f"CREATE DATABASE {name}")
    run(conn, f"CREATE DATABASE IF NOT EXISTS {name}")
    run(conn, f"DROP DATABASE {name}")
    assert name not in schemas_of(objects(conn, depth="db_schemas"))
    expect_error(conn, f"DROP DATABASE {name}")


def test_drop_non_empty_database_needs_cascade(conn, uniq, warehouse):
    name = uniq("shop")
    run(conn, f"CREATE DATABASE {name}")
    create_events(conn, f"{name}.events")
    dml(conn, f"INSERT INTO {name}.events VALUES (1, 'a', 1.0)")
    expect_error(conn, f"DROP DATABASE {name}")
    assert rows(conn, f"SELECT id FROM {name}.events") == [(1,)]
    run(conn, f"DROP DATABASE {name} CASCADE")
    assert name not in schemas_of(objects(conn, depth="db_schemas"))
    assert not (warehouse / f"{name}.db").exists()
    expect_error(conn, f"SELECT * FROM {name}.events")


def test_create_primary_key_table_writes_paimon_schema(conn, db, warehouse):
    create_orders(conn, f"{db}.orders", merge_engine="partial-update")
    schema0 = json.loads((table_dir(warehouse, db, "orders") / "schema" / "schema-0").read_text())
    assert schema0["primaryKeys"] == ["id", "dt"]
    assert schema0["partitionKeys"] == ["dt"]
    assert schema0["options"]["bucket"] == "2"
    assert schema0["options"]["merge-engine"] == "partial-update"
    fields = {f["name"]: f["type"] for f in schema0["fields"]}
    assert list(fields) == ["id", "item", "qty", "dt"]
    assert fields["id"] == "BIGINT NOT NULL"
    assert fields["item"] == "STRING"
    assert fields["qty"] == "INT"
    assert fields["dt"] in ("STRING NOT NULL", "STRING")  # Paimon makes primary-key columns NOT NULL


def test_create_append_table_defaults(conn, db, warehouse):
    create_events(conn, f"{db}.events")
    schema0 = json.loads((table_dir(warehouse, db, "events") / "schema" / "schema-0").read_text())
    assert schema0["primaryKeys"] == []
    assert schema0["partitionKeys"] == []
    assert schema0["options"].get("bucket", "-1") == "-1"
    assert [(f["name"], f["type"]) for f in schema0["fields"]] == [("id", "BIGINT"), ("name", "STRING"),
                                                                    ("v", "DOUBLE")]


def test_create_existing_table(conn, db):
    t = f"{db}.events"
    create_events(conn, t)
    dml(conn, f"INSERT INTO {t} VALUES (1, 'a', 1.0)")
    expect_error(conn, f"CREATE TABLE {t} (x INT)")
    run(conn, f"CREATE TABLE IF NOT EXISTS {t} (x INT)")
    # Neither touched the existing table.
    assert conn.adbc_get_table_schema("events", db_schema_filter=db).names == ["id", "name", "v"]
    assert rows(conn, f"SELECT * FROM {t}") == [(1, "a", 1.0)]


def test_create_table_in_unknown_database_fails(conn, uniq):
    expect_error(conn, f"CREATE TABLE {uniq('nodb')}.t (x INT)")


def test_drop_table(conn, db, warehouse):
    t = f"{db}.events"
    create_events(conn, t)
    dml(conn, f"INSERT INTO {t} VALUES (1, 'a', 1.0)")
    run(conn, f"DROP TABLE {t}")
    assert "events" not in tables_of(objects(conn, depth="tables", db_schema_filter=db))
    assert not table_dir(warehouse, db, "events").exists()
    expect_error(conn, f"SELECT * FROM {t}")
    expect_error(conn, f"DROP TABLE {t}")
    run(conn, f"DROP TABLE IF EXISTS {t}")
    # The name can be reused, and the new table starts empty.
    create_events(conn, t)
    assert scalar(conn, f"SELECT count(*) FROM {t}") == 0


def test_show_tables_lists_the_current_database(conn, uniq):
    name = uniq("showme")
    create_events(conn, f"default.{name}")
    t = run(conn, "SHOW TABLES")
    values = {v for col in t.columns for v in col.to_pylist()}
    assert name in values, t
    if "table_name" in t.column_names:
        assert name in t.column("table_name").to_pylist()
    run(conn, f"DROP TABLE default.{name}")
    t = run(conn, "SHOW TABLES")
    assert name not in {v for col in t.columns for v in col.to_pylist()}


def test_describe_table(conn, db):
    create_orders(conn, f"{db}.orders")
    t = run(conn, f"DESCRIBE {db}.orders")
    assert t.num_rows == 4
    assert t.column(0).to_pylist() == ["id", "item", "qty", "dt"]
    text = " ".join(str(v) for v in t.column(1).to_pylist()).lower()
    assert "int64" in text or "bigint" in text


ALL_TYPES_DDL = ("(b BOOLEAN, i8 TINYINT, i16 SMALLINT, i32 INT, i64 BIGINT, f32 FLOAT, f64 DOUBLE, "
                 "amount DECIMAL(10, 2), s STRING, vs VARCHAR, bin BYTES, d DATE, ts TIMESTAMP(3), ts6 TIMESTAMP(6))")
ALL_TYPES_ARROW = pa.schema([
    ("b", pa.bool_()), ("i8", pa.int8()), ("i16", pa.int16()), ("i32", pa.int32()), ("i64", pa.int64()),
    ("f32", pa.float32()), ("f64", pa.float64()), ("amount", pa.decimal128(10, 2)), ("s", pa.string()),
    ("vs", pa.string()), ("bin", pa.binary()), ("d", pa.date32()), ("ts", pa.timestamp("ms")),
    ("ts6", pa.timestamp("us")),
])
ALL_TYPES_ROW = (True, 1, 2, 3, 4, 1.5, 2.25, decimal.Decimal("123.45"), "héllo", "v", b"\xde\xad\xbe\xef",
                 datetime.date(2024, 2, 29), datetime.datetime(2024, 2, 29, 12, 34, 56, 789000),
                 datetime.datetime(2024, 2, 29, 12, 34, 56, 789012))


def test_all_types_roundtrip_through_sql(conn, db, warehouse):
    t = f"{db}.types"
    run(conn, f"CREATE TABLE {t} {ALL_TYPES_DDL}")
    schema = conn.adbc_get_table_schema("types", db_schema_filter=db)
    assert schema.names == ALL_TYPES_ARROW.names
    assert schema.types == ALL_TYPES_ARROW.types
    paimon_types = [f["type"] for f in json.loads(
        (table_dir(warehouse, db, "types") / "schema" / "schema-0").read_text())["fields"]]
    assert paimon_types[:8] == ["BOOLEAN", "TINYINT", "SMALLINT", "INT", "BIGINT", "FLOAT", "DOUBLE",
                                "DECIMAL(10, 2)"]
    assert paimon_types[11:] == ["DATE", "TIMESTAMP(3)", "TIMESTAMP(6)"]
    n = dml(conn, f"INSERT INTO {t} VALUES (true, 1, 2, 3, 4, 1.5, 2.25, 123.45, 'héllo', 'v', X'DEADBEEF', "
                  "DATE '2024-02-29', TIMESTAMP '2024-02-29 12:34:56.789', TIMESTAMP '2024-02-29 12:34:56.789012'), "
                  "(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)")
    assert n == 2
    result = run(conn, f"SELECT * FROM {t} ORDER BY i64 NULLS LAST")
    assert result.schema.types == ALL_TYPES_ARROW.types
    assert [tuple(r.values()) for r in result.to_pylist()] == [ALL_TYPES_ROW, (None,) * 14]
    # Filters on typed columns are evaluated by the server.
    assert rows(conn, f"SELECT s FROM {t} WHERE d = DATE '2024-02-29' AND amount > 100 "
                      "AND ts < TIMESTAMP '2024-03-01 00:00:00' AND bin = X'DEADBEEF'") == [("héllo",)]


# ---------------------------------------------------------------- ingest (DoPut CommandStatementIngest)


def people(n, start=0):
    ids = list(range(start, start + n))
    return pa.table({"id": pa.array(ids, pa.int64()), "name": [f"p{i}" for i in ids],
                     "score": pa.array([i * 0.5 for i in ids], pa.float64())})


def table_rows(t):
    return sorted((tuple(r.values()) for r in t.to_pylist()), key=_key)


def test_ingest_create(conn, db):
    data = people(100)
    with conn.cursor() as cur:
        n = cur.adbc_ingest("people", data, mode="create", db_schema_name=db)
    assert n == 100
    assert conn.adbc_get_table_schema("people", db_schema_filter=db).names == ["id", "name", "score"]
    assert rows(conn, f"SELECT * FROM {db}.people") == table_rows(data)
    # create on an existing table fails and leaves it alone
    with pytest.raises(ADBC_ERROR) as ei:
        with conn.cursor() as cur:
            cur.adbc_ingest("people", people(5, 1000), mode="create", db_schema_name=db)
    assert ei.value.status_code == AdbcStatusCode.ALREADY_EXISTS, ei.value
    assert scalar(conn, f"SELECT count(*) FROM {db}.people") == 100


def test_ingest_append(conn, db):
    with pytest.raises(ADBC_ERROR) as ei:
        with conn.cursor() as cur:
            cur.adbc_ingest("people", people(5), mode="append", db_schema_name=db)
    assert ei.value.status_code == AdbcStatusCode.NOT_FOUND, ei.value
    assert "people" not in tables_of(objects(conn, depth="tables", db_schema_filter=db))
    run(conn, f"CREATE TABLE {db}.people (id BIGINT, name STRING, score DOUBLE)")
    with conn.cursor() as cur:
        assert cur.adbc_ingest("people", people(30), mode="append", db_schema_name=db) == 30
        assert cur.adbc_ingest("people", people(20, 30), mode="append", db_schema_name=db) == 20
    assert rows(conn, f"SELECT * FROM {db}.people") == table_rows(people(50))


def test_ingest_replace(conn, db):
    with conn.cursor() as cur:
        assert cur.adbc_ingest("people", people(10), mode="replace", db_schema_name=db) == 10
        assert cur.adbc_ingest("people", people(3, 100), mode="replace", db_schema_name=db) == 3
    assert rows(conn, f"SELECT * FROM {db}.people") == table_rows(people(3, 100))
    # replace may change the schema: the table is dropped and created again
    other = pa.table({"k": pa.array(["x", "y"]), "n": pa.array([1, 2], pa.int32())})
    with conn.cursor() as cur:
        assert cur.adbc_ingest("people", other, mode="replace", db_schema_name=db) == 2
    assert conn.adbc_get_table_schema("people", db_schema_filter=db).names == ["k", "n"]
    assert rows(conn, f"SELECT * FROM {db}.people") == [("x", 1), ("y", 2)]


def test_ingest_create_append(conn, db):
    with conn.cursor() as cur:
        assert cur.adbc_ingest("people", people(4), mode="create_append", db_schema_name=db) == 4
        assert cur.adbc_ingest("people", people(6, 4), mode="create_append", db_schema_name=db) == 6
    assert rows(conn, f"SELECT * FROM {db}.people") == table_rows(people(10))


def test_ingest_stream_of_batches_is_one_commit(conn, db):
    batches = [people(1000, k * 1000).to_batches()[0] for k in range(10)]
    reader = pa.RecordBatchReader.from_batches(batches[0].schema, iter(batches))
    with conn.cursor() as cur:
        assert cur.adbc_ingest("people", reader, mode="create", db_schema_name=db) == 10_000
    assert rows(conn, f"SELECT count(*), sum(id), min(id), max(id) FROM {db}.people") == \
        [(10_000, sum(range(10_000)), 0, 9_999)]
    assert len(append_snapshot_ids(conn, f"{db}.people")) == 1


def test_ingest_into_primary_key_table_upserts(conn, db):
    t = f"{db}.kv"
    run(conn, f"CREATE TABLE {t} (id BIGINT NOT NULL, v STRING, PRIMARY KEY (id)) WITH ('bucket' = '1')")
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
    with conn.cursor() as cur:
        cur.adbc_ingest("kv", pa.table({"id": [1, 2], "v": ["a", "b"]}, schema=schema), mode="append",
                        db_schema_name=db)
        cur.adbc_ingest("kv", pa.table({"id": [2, 3], "v": ["B", "c"]}, schema=schema), mode="append",
                        db_schema_name=db)
    assert rows(conn, f"SELECT * FROM {t}") == [(1, "a"), (2, "B"), (3, "c")]


def test_ingest_with_wrong_schema_is_rejected(conn, db):
    t = f"{db}.people"
    run(conn, f"CREATE TABLE {t} (id BIGINT, name STRING, score DOUBLE)")
    bad = [
        pa.table({"id": ["not", "ints"], "name": ["a", "b"], "score": [1.0, 2.0]}),  # wrong type
        pa.table({"id": pa.array([1], pa.int64()), "nope": ["a"], "score": [1.0]}),  # unknown column
    ]
    for data in bad:
        with pytest.raises(ADBC_ERROR):
            with conn.cursor() as cur:
                cur.adbc_ingest("people", data, mode="append", db_schema_name=db)
    assert scalar(conn, f"SELECT count(*) FROM {t}") == 0
    assert append_snapshot_ids(conn, t) == []


# ---------------------------------------------------------------- DML


def test_insert_values_and_insert_select(conn, db):
    t = f"{db}.events"
    create_events(conn, t)
    assert dml(conn, f"INSERT INTO {t} VALUES (1, 'a', 1.5), (2, 'b', 2.5), (3, NULL, NULL)") == 3
    assert dml(conn, f"INSERT INTO {t} SELECT id + 10, upper(name), v * 2 FROM {t} WHERE id < 3") == 2
    assert rows(conn, f"SELECT * FROM {t}") == [(1, "a", 1.5), (2, "b", 2.5), (3, None, None),
                                                (11, "A", 3.0), (12, "B", 5.0)]
    assert dml(conn, f"INSERT INTO {t} SELECT * FROM {t} WHERE id > 100") == 0


def test_select_where_group_by_order_by_join_limit(conn, db):
    orders, customers = f"{db}.orders", f"{db}.customers"
    create_orders(conn, orders)
    run(conn, f"CREATE TABLE {customers} (id BIGINT NOT NULL, name STRING, PRIMARY KEY (id)) WITH ('bucket' = '1')")
    dml(conn, f"INSERT INTO {customers} VALUES (1, 'ann'), (2, 'bob'), (3, 'cid')")
    dml(conn, f"INSERT INTO {orders} VALUES (1, 'apple', 3, '2024-01-01'), (2, 'pear', 1, '2024-01-01'), "
              "(3, 'apple', 4, '2024-01-02'), (4, 'fig', 10, '2024-01-02'), (5, 'pear', 2, '2024-01-03')")
    assert rows(conn, f"SELECT item, sum(qty) AS total, count(*) AS n FROM {orders} WHERE qty > 1 "
                      "GROUP BY item ORDER BY total DESC", sort=False) == [("fig", 10, 1), ("apple", 7, 2),
                                                                            ("pear", 2, 1)]
    assert rows(conn, f"SELECT id FROM {orders} ORDER BY qty DESC LIMIT 2", sort=False) == [(4,), (3,)]
    assert rows(conn, f"SELECT c.name, o.item FROM {orders} o JOIN {customers} c ON o.id = c.id "
                      "WHERE o.dt = '2024-01-01' ORDER BY c.name", sort=False) == [("ann", "apple"), ("bob", "pear")]
    assert rows(conn, f"SELECT dt, count(*) FROM {orders} GROUP BY dt") == [("2024-01-01", 2), ("2024-01-02", 2),
                                                                            ("2024-01-03", 1)]


def test_insert_overwrite_whole_table(conn, db):
    t = f"{db}.events"
    create_events(conn, t)
    dml(conn, f"INSERT INTO {t} VALUES (1, 'a', 1.0), (2, 'b', 2.0)")
    assert dml(conn, f"INSERT OVERWRITE {t} VALUES (7, 'x', 7.0)") == 1
    assert rows(conn, f"SELECT * FROM {t}") == [(7, "x", 7.0)]
    assert dml(conn, f"INSERT OVERWRITE {t} SELECT id * 10, name, v FROM {t}") == 1
    assert rows(conn, f"SELECT * FROM {t}") == [(70, "x", 7.0)]
    kinds = [r[0] for r in rows(conn, f"SELECT commit_kind FROM {sys_table(t, 'snapshots')} "
                                      "ORDER BY snapshot_id", sort=False)]
    assert kinds[0] == "APPEND" and kinds.count("OVERWRITE") == 2


def test_insert_overwrite_partition(conn, db):
    t = f"{db}.orders"
    create_orders(conn, t)
    dml(conn, f"INSERT INTO {t} VALUES (1, 'apple', 3, '2024-01-01'), (2, 'pear', 1, '2024-01-01'), "
              "(3, 'fig', 4, '2024-01-02')")
    n = dml(conn, f"INSERT OVERWRITE {t} PARTITION (dt = '2024-01-01') "
                  "SELECT * FROM (VALUES (10, 'kiwi', 5), (11, 'lime', 6)) AS v(id, item, qty)")
    assert n == 2
    assert rows(conn, f"SELECT * FROM {t}") == [(3, "fig", 4, "2024-01-02"), (10, "kiwi", 5, "2024-01-01"),
                                                (11, "lime", 6, "2024-01-01")]
    # A partition that did not exist yet.
    dml(conn, f"INSERT OVERWRITE {t} PARTITION (dt = '2024-01-09') SELECT 20, 'plum', 1")
    assert rows(conn, f"SELECT id, dt FROM {t} WHERE dt = '2024-01-09'") == [(20, "2024-01-09")]
    assert scalar(conn, f"SELECT count(*) FROM {t}") == 4


def test_primary_key_table_keeps_the_latest_row_per_key(conn, db):
    t = f"{db}.orders"
    create_orders(conn, t)
    dml(conn, f"INSERT INTO {t} VALUES (1, 'apple', 1, '2024-01-01'), (2, 'pear', 2, '2024-01-01')")
    dml(conn, f"INSERT INTO {t} VALUES (1, 'APPLE', 10, '2024-01-01'), (1, 'other-day', 5, '2024-01-02')")
    assert rows(conn, f"SELECT * FROM {t}") == [(1, "APPLE", 10, "2024-01-01"), (1, "other-day", 5, "2024-01-02"),
                                                (2, "pear", 2, "2024-01-01")]


def test_partial_update_merge_engine(conn, db):
    t = f"{db}.orders"
    create_orders(conn, t, merge_engine="partial-update")
    dml(conn, f"INSERT INTO {t} VALUES (1, 'apple', NULL, '2024-01-01'), (2, NULL, 7, '2024-01-01')")
    dml(conn, f"INSERT INTO {t} VALUES (1, NULL, 3, '2024-01-01'), (2, 'pear', NULL, '2024-01-01')")
    assert rows(conn, f"SELECT * FROM {t}") == [(1, "apple", 3, "2024-01-01"), (2, "pear", 7, "2024-01-01")]


def test_update_primary_key_table(conn, db):
    t = f"{db}.orders"
    create_orders(conn, t)
    dml(conn, f"INSERT INTO {t} VALUES (1, 'apple', 1, '2024-01-01'), (2, 'pear', 2, '2024-01-01'), "
              "(3, 'fig', 3, '2024-01-02'), (4, 'kiwi', 4, '2024-01-02')")
    assert dml(conn, f"UPDATE {t} SET qty = qty + 10 WHERE id <= 2") == 2
    assert dml(conn, f"UPDATE {t} SET item = 'FIG', qty = 0 WHERE id = 3") == 1
    assert dml(conn, f"UPDATE {t} SET qty = 99 WHERE id = 12345") == 0
    assert rows(conn, f"SELECT * FROM {t}") == [(1, "apple", 11, "2024-01-01"), (2, "pear", 12, "2024-01-01"),
                                                (3, "FIG", 0, "2024-01-02"), (4, "kiwi", 4, "2024-01-02")]


def test_delete_from_primary_key_table(conn, db):
    t = f"{db}.orders"
    create_orders(conn, t)
    dml(conn, f"INSERT INTO {t} VALUES (1, 'apple', 1, '2024-01-01'), (2, 'pear', 2, '2024-01-01'), "
              "(3, 'fig', 3, '2024-01-02'), (4, 'kiwi', 4, '2024-01-02')")
    assert dml(conn, f"DELETE FROM {t} WHERE qty < 3") == 2
    assert rows(conn, f"SELECT id FROM {t}") == [(3,), (4,)]
    assert dml(conn, f"DELETE FROM {t} WHERE item = 'nothing'") == 0
    # A deleted key can be inserted again.
    dml(conn, f"INSERT INTO {t} VALUES (1, 'again', 7, '2024-01-01')")
    assert rows(conn, f"SELECT id, item FROM {t}") == [(1, "again"), (3, "fig"), (4, "kiwi")]
    assert dml(conn, f"DELETE FROM {t}") == 3
    assert scalar(conn, f"SELECT count(*) FROM {t}") == 0


def test_update_and_delete_on_append_table_fail(conn, db):
    t = f"{db}.events"
    create_events(conn, t)
    dml(conn, f"INSERT INTO {t} VALUES (1, 'a', 1.0), (2, 'b', 2.0)")
    expect_error(conn, f"UPDATE {t} SET v = 0 WHERE id = 1")
    expect_error(conn, f"DELETE FROM {t} WHERE id = 1")
    assert rows(conn, f"SELECT * FROM {t}") == [(1, "a", 1.0), (2, "b", 2.0)]


def test_statement_update_rpc(conn, db):
    """DoPut CommandStatementUpdate: ADBC's execute_update on a statement that was not prepared."""
    t = f"{db}.events"
    create_events(conn, t)
    stmt = adbc_driver_manager.AdbcStatement(conn.adbc_connection)
    try:
        stmt.set_sql_query(f"INSERT INTO {t} VALUES (1, 'a', 1.0), (2, 'b', 2.0)")
        assert stmt.execute_update() == 2
    finally:
        stmt.close()
    assert rows(conn, f"SELECT id FROM {t}") == [(1,), (2,)]


def test_concurrent_inserts_from_several_connections(connect, db):
    t = f"{db}.events"
    setup = connect()
    create_events(setup, t)
    conns = [connect() for _ in range(4)]
    errors = []

    def work(i):
        try:
            for k in range(5):
                dml(conns[i], f"INSERT INTO {t} VALUES ({i * 100 + k}, 'w{i}', {k})")
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(conns))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    assert rows(setup, f"SELECT id FROM {t}") == sorted((i * 100 + k,) for i in range(4) for k in range(5))
    assert len(append_snapshot_ids(setup, t)) == 20


# ---------------------------------------------------------------- prepared statements with parameters


def test_prepared_query_with_parameters(conn, db):
    t = f"{db}.events"
    create_events(conn, t)
    dml(conn, f"INSERT INTO {t} VALUES (1, 'a', 1.0), (2, 'b', 2.0), (3, 'a', 3.0), (4, 'c', 4.0)")
    with conn.cursor() as cur:
        cur.execute(f"SELECT id, name FROM {t} WHERE id = $1", (2,))
        assert cur.fetchall() == [(2, "b")]
        # The same prepared statement with other parameters.
        cur.execute(f"SELECT id, name FROM {t} WHERE id = $1", (4,))
        assert cur.fetchall() == [(4, "c")]
        cur.execute(f"SELECT id FROM {t} WHERE name = $1 AND v > $2 ORDER BY id", ("a", 0.5))
        assert cur.fetchall() == [(1,), (3,)]
        cur.execute(f"SELECT id FROM {t} WHERE name = $1 AND v > $2 ORDER BY id", ("a", 2.0))
        assert cur.fetchall() == [(3,)]


def test_prepared_statement_parameter_schema(conn, db):
    t = f"{db}.events"
    create_events(conn, t)
    with conn.cursor() as cur:
        params = cur.adbc_prepare(f"SELECT id FROM {t} WHERE id = $1 AND name = $2")
    assert params is not None
    assert params.types == [pa.int64(), pa.string()]


def test_prepared_insert_with_parameters(conn, db):
    t = f"{db}.events"
    create_events(conn, t)
    with conn.cursor() as cur:
        cur.execute(f"INSERT INTO {t} VALUES ($1, $2, $3)", (10, "ten", 10.5))
        assert affected(cur) == 1
        cur.execute(f"INSERT INTO {t} VALUES ($1, $2, $3)", (11, None, 11.5))
        assert affected(cur) == 1
    assert rows(conn, f"SELECT * FROM {t}") == [(10, "ten", 10.5), (11, None, 11.5)]


def test_executemany_insert(conn, db):
    t = f"{db}.events"
    create_events(conn, t)
    params = [(i, f"n{i}", i * 1.5) for i in range(20)]
    with conn.cursor() as cur:
        cur.executemany(f"INSERT INTO {t} VALUES ($1, $2, $3)", params)
        assert cur.rowcount == 20
    assert rows(conn, f"SELECT * FROM {t}") == params


def test_executemany_with_arrow_parameters(conn, db):
    t = f"{db}.events"
    create_events(conn, t)
    data = people(300)  # today every parameter row is its own commit (~40 ms each), so keep this small
    with conn.cursor() as cur:
        cur.executemany(f"INSERT INTO {t} VALUES ($1, $2, $3)", data)
        assert cur.rowcount == 300
    assert rows(conn, f"SELECT count(*), sum(id), sum(v) FROM {t}") == [(300, sum(range(300)), sum(range(300)) * 0.5)]


def test_prepared_update_and_delete_with_parameters(conn, db):
    t = f"{db}.orders"
    create_orders(conn, t)
    dml(conn, f"INSERT INTO {t} VALUES (1, 'apple', 1, '2024-01-01'), (2, 'pear', 2, '2024-01-01')")
    with conn.cursor() as cur:
        cur.execute(f"UPDATE {t} SET qty = $1 WHERE id = $2", (50, 1))
        assert affected(cur) == 1
        cur.execute(f"DELETE FROM {t} WHERE item = $1", ("pear",))
        assert affected(cur) == 1
    assert rows(conn, f"SELECT id, qty FROM {t}") == [(1, 50)]


# ---------------------------------------------------------------- streaming a million rows

MILLION = 1_000_000


def test_stream_one_million_ingested_rows(conn, db):
    def batches():
        for k in range(10):
            ids = pa.array(range(k * 100_000, (k + 1) * 100_000), pa.int64())
            yield pa.record_batch([ids, pc.multiply(pc.cast(pc.bit_wise_and(ids, 1023), pa.float64()), 0.5),
                                   pc.cast(ids, pa.string())], names=["id", "v", "s"])

    schema = next(batches()).schema
    with conn.cursor() as cur:
        n = cur.adbc_ingest("big", pa.RecordBatchReader.from_batches(schema, batches()), mode="create",
                            db_schema_name=db)
    assert n == MILLION
    expected_v = sum((i & 1023) * 0.5 for i in range(MILLION))

    with conn.cursor() as cur:
        cur.execute(f"SELECT * FROM {db}.big")
        reader = cur.fetch_record_batch()
        count = n_batches = id_sum = 0
        v_sum = 0.0
        for batch in reader:
            n_batches += 1
            count += batch.num_rows
            id_sum += pc.sum(batch.column("id")).as_py() or 0
            v_sum += pc.sum(batch.column("v")).as_py() or 0.0
            if n_batches == 1:
                assert batch.schema.names == ["id", "v", "s"]
                assert batch.column("s")[0].as_py() == str(batch.column("id")[0].as_py())
    assert count == MILLION
    assert id_sum == MILLION * (MILLION - 1) // 2
    assert v_sum == pytest.approx(expected_v)
    assert n_batches > 1, "a million rows arrived as one batch: the result is not streamed"
    assert rows(conn, f"SELECT count(*), count(DISTINCT id), min(id), max(id) FROM {db}.big") == \
        [(MILLION, MILLION, 0, MILLION - 1)]


def test_messages_larger_than_grpc_default_limit(conn, db):
    """An 11 MiB ingest batch and a 20 MiB result both get through (tonic's default limit is 4 MiB)."""
    n = 100_000
    big = pa.table({"id": pa.array(range(n), pa.int64()), "s": ["x" * 100 + str(i) for i in range(n)]})
    batch = big.combine_chunks().to_batches()[0]
    assert batch.nbytes > 8 * 1024 * 1024
    with conn.cursor() as cur:
        assert cur.adbc_ingest("wide", batch, mode="create", db_schema_name=db) == n
    t = run(conn, f"SELECT * FROM {db}.wide")
    assert t.num_rows == n
    assert sorted(t.column("s").to_pylist()) == sorted(big.column("s").to_pylist())
    t = run(conn, f"SELECT id, repeat('y', 1000000) AS s FROM {db}.wide WHERE id < 20")
    assert t.num_rows == 20
    assert {len(v) for v in t.column("s").to_pylist()} == {1_000_000}


DIGITS = "(VALUES (0), (1), (2), (3), (4), (5), (6), (7), (8), (9))"


@pytest.mark.parametrize("query, lo", [
    ("SELECT * FROM generate_series(1, 1000000)", 1),
    ("SELECT value FROM range(1000000)", 0),
    ("SELECT a.d * 100000 + b.d * 10000 + c.d * 1000 + d.d * 100 + e.d * 10 + f.d AS value "
     f"FROM {DIGITS} a(d) CROSS JOIN {DIGITS} b(d) CROSS JOIN {DIGITS} c(d) CROSS JOIN {DIGITS} d(d) "
     f"CROSS JOIN {DIGITS} e(d) CROSS JOIN {DIGITS} f(d)", 0),
], ids=["generate_series", "range", "cross_join"])
def test_stream_one_million_generated_rows(conn, query, lo):
    with conn.cursor() as cur:
        cur.execute(query)
        t = cur.fetch_arrow_table()
    assert t.num_rows == MILLION
    values = t.column("value")
    assert pc.sum(values).as_py() == sum(range(lo, lo + MILLION))
    assert pc.min(values).as_py() == lo and pc.max(values).as_py() == lo + MILLION - 1


# ---------------------------------------------------------------- time travel


def _three_commits(conn, t, pause=0.0):
    create_events(conn, t)
    dml(conn, f"INSERT INTO {t} VALUES (1, 'a', 1.0)")
    time.sleep(pause)
    dml(conn, f"INSERT INTO {t} VALUES (2, 'b', 2.0), (3, 'c', 3.0)")
    time.sleep(pause)
    dml(conn, f"INSERT INTO {t} VALUES (4, 'd', 4.0)")
    return [[(1,)], [(1,), (2,), (3,)], [(1,), (2,), (3,), (4,)]]


def test_time_travel_by_snapshot_id(conn, db):
    t = f"{db}.events"
    expected = _three_commits(conn, t)
    snaps = append_snapshot_ids(conn, t)
    assert len(snaps) == 3
    for sid, exp in zip(snaps, expected):
        assert rows(conn, f"SELECT id FROM {t} FOR SYSTEM_TIME AS OF {sid}") == exp
    assert rows(conn, f"SELECT id FROM {t} VERSION AS OF {snaps[1]}") == expected[1]
    assert rows(conn, f"SELECT id FROM {t}") == expected[2]
    # Time travel composes with filters and aggregates.
    assert rows(conn, f"SELECT count(*), sum(v) FROM {t} FOR SYSTEM_TIME AS OF {snaps[1]} WHERE id > 1") == [(2, 5.0)]


def test_time_travel_by_timestamp(conn, db, warehouse):
    t = f"{db}.events"
    expected = _three_commits(conn, t, pause=0.3)
    snaps = append_snapshot_ids(conn, t)
    millis = snapshot_millis(warehouse, db, "events")
    t1, t2, t3 = (millis[s] for s in snaps)
    assert t1 < t2 < t3
    assert rows(conn, f"SELECT id FROM {t} FOR SYSTEM_TIME AS OF TIMESTAMP '{utc_literal(t1)}'") == expected[0]
    assert rows(conn, f"SELECT id FROM {t} FOR SYSTEM_TIME AS OF TIMESTAMP '{utc_literal(t2)}'") == expected[1]
    assert rows(conn, f"SELECT id FROM {t} FOR SYSTEM_TIME AS OF TIMESTAMP '{utc_literal((t2 + t3) // 2)}'") == \
        expected[1]
    assert rows(conn, f"SELECT id FROM {t} FOR SYSTEM_TIME AS OF TIMESTAMP '2200-01-01 00:00:00'") == expected[2]


def test_time_travel_by_tag(conn, db):
    t = f"{db}.events"
    expected = _three_commits(conn, t)
    snaps = append_snapshot_ids(conn, t)
    run(conn, f"CALL sys.create_tag('{t}', 'first', {snaps[0]})")
    run(conn, f"CALL sys.create_tag('{t}', 'second', {snaps[1]})")
    assert rows(conn, f"SELECT id FROM {t} FOR SYSTEM_TIME AS OF 'first'") == expected[0]
    assert rows(conn, f"SELECT id FROM {t} FOR SYSTEM_TIME AS OF 'second'") == expected[1]
    tags = run(conn, f"SELECT * FROM {sys_table(t, 'tags')}")
    assert sorted(zip(tags.column("tag_name").to_pylist(), tags.column("snapshot_id").to_pylist())) == \
        [("first", snaps[0]), ("second", snaps[1])]
    expect_error(conn, f"SELECT id FROM {t} FOR SYSTEM_TIME AS OF 'no-such-tag'")


def test_time_travel_to_missing_snapshot_fails(conn, db):
    t = f"{db}.events"
    _three_commits(conn, t)
    expect_error(conn, f"SELECT id FROM {t} FOR SYSTEM_TIME AS OF 999")


def test_time_travel_sees_rows_before_update_and_delete(conn, db):
    t = f"{db}.orders"
    create_orders(conn, t)
    dml(conn, f"INSERT INTO {t} VALUES (1, 'apple', 1, '2024-01-01'), (2, 'pear', 2, '2024-01-01')")
    before = max(r[0] for r in rows(conn, f"SELECT snapshot_id FROM {sys_table(t, 'snapshots')}"))
    dml(conn, f"UPDATE {t} SET qty = 100 WHERE id = 1")
    dml(conn, f"DELETE FROM {t} WHERE id = 2")
    assert rows(conn, f"SELECT id, qty FROM {t}") == [(1, 100)]
    assert rows(conn, f"SELECT id, qty FROM {t} FOR SYSTEM_TIME AS OF {before}") == [(1, 1), (2, 2)]


# ---------------------------------------------------------------- system tables

SNAPSHOT_COLUMNS = ["snapshot_id", "schema_id", "commit_user", "commit_identifier", "commit_kind", "commit_time",
                    "total_record_count", "delta_record_count", "changelog_record_count", "watermark"]


def test_snapshots_system_table(conn, db):
    t = f"{db}.events"
    create_events(conn, t)
    assert run(conn, f"SELECT * FROM {sys_table(t, 'snapshots')}").num_rows == 0
    dml(conn, f"INSERT INTO {t} VALUES (1, 'a', 1.0), (2, 'b', 2.0)")
    dml(conn, f"INSERT INTO {t} VALUES (3, 'c', 3.0), (4, 'd', 4.0), (5, 'e', 5.0)")
    snaps = run(conn, f"SELECT * FROM {sys_table(t, 'snapshots')} ORDER BY snapshot_id")
    missing = [c for c in SNAPSHOT_COLUMNS if c not in snaps.column_names]
    assert not missing, snaps.column_names
    assert [c for c in snaps.column_names if c in SNAPSHOT_COLUMNS] == SNAPSHOT_COLUMNS  # Paimon's order
    snaps = snaps.filter(pc.equal(snaps.column("commit_kind"), "APPEND"))
    assert snaps.column("snapshot_id").to_pylist() == [1, 2]
    assert snaps.column("schema_id").to_pylist() == [0, 0]
    assert snaps.column("total_record_count").to_pylist() == [2, 5]
    assert snaps.column("delta_record_count").to_pylist() == [2, 3]
    assert all(u for u in snaps.column("commit_user").to_pylist())
    times = snaps.column("commit_time").to_pylist()
    assert times[0] <= times[1]
    # Unquoted, the `$` is part of the identifier too.
    assert rows(conn, f"SELECT snapshot_id FROM {t}$snapshots WHERE commit_kind = 'APPEND'") == [(1,), (2,)]


def test_schemas_system_table(conn, db):
    t = f"{db}.orders"
    create_orders(conn, t)
    s = run(conn, f"SELECT * FROM {sys_table(t, 'schemas')}")
    for c in ["schema_id", "fields", "partition_keys", "primary_keys", "options", "comment", "update_time"]:
        assert c in s.column_names, s.column_names
    assert s.num_rows == 1
    row = s.to_pylist()[0]
    assert row["schema_id"] == 0
    assert all(name in str(row["fields"]) for name in ["id", "item", "qty", "dt"])
    assert "dt" in str(row["partition_keys"]) and "id" not in str(row["partition_keys"])
    assert "id" in str(row["primary_keys"]) and "dt" in str(row["primary_keys"])
    assert "bucket" in str(row["options"])


def test_options_system_table(conn, db):
    t = f"{db}.orders"
    create_orders(conn, t, merge_engine="partial-update")
    o = run(conn, f"SELECT * FROM {sys_table(t, 'options')}")
    assert o.column_names[:2] == ["key", "value"]
    opts = dict(zip(o.column("key").to_pylist(), o.column("value").to_pylist()))
    assert opts["bucket"] == "2"
    assert opts["merge-engine"] == "partial-update"


def test_files_system_table(conn, db, warehouse):
    t = f"{db}.orders"
    create_orders(conn, t)
    dml(conn, f"INSERT INTO {t} VALUES (1, 'apple', 1, '2024-01-01'), (2, 'pear', 2, '2024-01-01'), "
              "(3, 'fig', 3, '2024-01-02')")
    f = run(conn, f"SELECT * FROM {sys_table(t, 'files')}")
    for c in ["partition", "bucket", "file_path", "file_format", "schema_id", "level", "record_count",
              "file_size_in_bytes", "min_key", "max_key"]:
        assert c in f.column_names, f.column_names
    assert f.num_rows >= 2  # two partitions, so at least two files
    assert sum(f.column("record_count").to_pylist()) == 3
    assert set(f.column("file_format").to_pylist()) == {"parquet"}
    assert set(f.column("bucket").to_pylist()) <= {0, 1}
    assert set(f.column("schema_id").to_pylist()) == {0}
    partitions = " ".join(str(p) for p in f.column("partition").to_pylist())
    assert "2024-01-01" in partitions and "2024-01-02" in partitions
    on_disk = {p.name: p.stat().st_size for p in table_dir(warehouse, db, "orders").rglob("data-*")}
    for path, size in zip(f.column("file_path").to_pylist(), f.column("file_size_in_bytes").to_pylist()):
        name = path.rstrip("/").rsplit("/", 1)[-1]
        assert name in on_disk, (path, sorted(on_disk))
        assert on_disk[name] == size, path


def test_manifests_system_table(conn, db, warehouse):
    t = f"{db}.events"
    create_events(conn, t)
    dml(conn, f"INSERT INTO {t} VALUES (1, 'a', 1.0)")
    dml(conn, f"INSERT INTO {t} VALUES (2, 'b', 2.0)")
    m = run(conn, f"SELECT * FROM {sys_table(t, 'manifests')}")
    for c in ["file_name", "file_size", "num_added_files", "num_deleted_files", "schema_id"]:
        assert c in m.column_names, m.column_names
    assert m.num_rows >= 1
    assert sum(m.column("num_added_files").to_pylist()) - sum(m.column("num_deleted_files").to_pylist()) >= 1
    manifest_dir = table_dir(warehouse, db, "events") / "manifest"
    for name, size in zip(m.column("file_name").to_pylist(), m.column("file_size").to_pylist()):
        assert (manifest_dir / name).stat().st_size == size, name


def test_tags_system_table_starts_empty(conn, db):
    t = f"{db}.events"
    create_events(conn, t)
    dml(conn, f"INSERT INTO {t} VALUES (1, 'a', 1.0)")
    tags = run(conn, f"SELECT * FROM {sys_table(t, 'tags')}")
    assert "tag_name" in tags.column_names and "snapshot_id" in tags.column_names
    assert tags.num_rows == 0


def test_audit_log_system_table(conn, db):
    t = f"{db}.events"
    create_events(conn, t)
    dml(conn, f"INSERT INTO {t} VALUES (1, 'a', 1.0), (2, 'b', 2.0)")
    a = run(conn, f"SELECT * FROM {sys_table(t, 'audit_log')}")
    assert a.column_names == ["rowkind", "id", "name", "v"]
    assert sorted((tuple(r.values()) for r in a.to_pylist()), key=_key) == [("+I", 1, "a", 1.0), ("+I", 2, "b", 2.0)]


def test_audit_log_of_primary_key_table(conn, db):
    t = f"{db}.orders"
    create_orders(conn, t)
    dml(conn, f"INSERT INTO {t} VALUES (1, 'apple', 1, '2024-01-01'), (2, 'pear', 2, '2024-01-01'), "
              "(3, 'fig', 3, '2024-01-01')")
    dml(conn, f"UPDATE {t} SET qty = 10 WHERE id = 1")
    dml(conn, f"DELETE FROM {t} WHERE id = 2")
    a = run(conn, f"SELECT * FROM {sys_table(t, 'audit_log')}")
    assert a.column_names == ["rowkind", "id", "item", "qty", "dt"]
    kinds = a.column("rowkind").to_pylist()
    assert set(kinds) <= {"+I", "-U", "+U", "-D"}
    live = sorted((r["id"], r["qty"]) for r in a.to_pylist() if r["rowkind"] in ("+I", "+U"))
    assert live == [(1, 10), (3, 3)]


def test_unknown_system_table_and_writes_to_system_tables_fail(conn, db):
    t = f"{db}.events"
    create_events(conn, t)
    expect_error(conn, f"SELECT * FROM {sys_table(t, 'nope')}")
    expect_error(conn, f"INSERT INTO {sys_table(t, 'options')} VALUES ('bucket', '5')")
    assert scalar(conn, f"SELECT count(*) FROM {sys_table(t, 'snapshots')}") == 0


# ---------------------------------------------------------------- pandas and polars


def _filled_events(conn, t):
    create_events(conn, t)
    dml(conn, f"INSERT INTO {t} VALUES (1, 'a', 1.5), (2, 'b', 2.5), (3, NULL, 3.5)")


def test_fetch_df(conn, db):
    import pandas as pd

    t = f"{db}.events"
    _filled_events(conn, t)
    with conn.cursor() as cur:
        cur.execute(f"SELECT * FROM {t} ORDER BY id")
        df = cur.fetch_df()
    expected = pd.DataFrame({"id": [1, 2, 3], "name": ["a", "b", None], "v": [1.5, 2.5, 3.5]})
    pd.testing.assert_frame_equal(df, expected, check_dtype=False)
    assert str(df["id"].dtype) == "int64" and str(df["v"].dtype) == "float64"


def test_pandas_read_sql(conn, db):
    import pandas as pd

    t = f"{db}.events"
    _filled_events(conn, t)
    df = pd.read_sql(f"SELECT id, v FROM {t} WHERE v > 2 ORDER BY id", conn)
    assert df.to_dict("list") == {"id": [2, 3], "v": [2.5, 3.5]}


def test_polars_read_database(conn, db):
    import polars as pl

    t = f"{db}.events"
    _filled_events(conn, t)
    df = pl.read_database(f"SELECT * FROM {t} ORDER BY id", connection=conn)
    assert df.columns == ["id", "name", "v"]
    assert df.schema["id"] == pl.Int64 and df.schema["name"] == pl.String
    assert df.rows() == [(1, "a", 1.5), (2, "b", 2.5), (3, None, 3.5)]
    with conn.cursor() as cur:
        cur.execute(f"SELECT sum(v) AS s FROM {t}")
        assert cur.fetch_polars().item() == 7.5


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize("query, code", [
    ("SELEC 1", AdbcStatusCode.INVALID_ARGUMENT),
    ("SELECT * FROM {db}.events WHERE", AdbcStatusCode.INVALID_ARGUMENT),
    ("SELECT no_such_column FROM {db}.events", AdbcStatusCode.INVALID_ARGUMENT),
    ("SELECT * FROM {db}.no_such_table", AdbcStatusCode.NOT_FOUND),
    ("SELECT * FROM no_such_database_x.events", AdbcStatusCode.NOT_FOUND),
    ("INSERT INTO {db}.no_such_table VALUES (1)", AdbcStatusCode.NOT_FOUND),
])
def test_bad_sql_fails_and_connection_survives(conn, db, query, code):
    create_events(conn, f"{db}.events")
    err = expect_error(conn, query.format(db=db))
    assert err.status_code == code, f"{query}: {err.status_code!r} {err}"


def test_bad_inserts_fail_without_writing(conn, db):
    t = f"{db}.orders"
    create_orders(conn, t)
    expect_error(conn, f"INSERT INTO {t} VALUES (1, 'a')")  # too few values
    expect_error(conn, f"INSERT INTO {t} VALUES (NULL, 'a', 1, '2024-01-01')")  # NULL primary key
    expect_error(conn, f"INSERT INTO {t} VALUES ('abc', 'a', 1, '2024-01-01')")  # not a number
    assert scalar(conn, f"SELECT count(*) FROM {t}") == 0
    assert append_snapshot_ids(conn, t) == []


def test_file_access_through_sql_is_refused(conn, db, tmp_path):
    target = tmp_path / "out.csv"
    expect_error(conn, "SELECT * FROM 'file:///etc/passwd'")
    expect_error(conn, "SELECT * FROM '/etc/passwd'")
    expect_error(conn, f"CREATE EXTERNAL TABLE {db}.ext (line STRING) STORED AS CSV LOCATION '/etc/passwd'")
    expect_error(conn, "CREATE EXTERNAL TABLE ext2 (line STRING) STORED AS CSV LOCATION '/etc/'")
    expect_error(conn, f"COPY (SELECT 1 AS x) TO '{target}'")
    expect_error(conn, f"COPY (SELECT 1 AS x) TO '{target}' STORED AS CSV")
    assert not target.exists()
    assert "ext" not in tables_of(objects(conn, depth="tables", db_schema_filter=db))


# ---------------------------------------------------------------- pypaimon reads what the server wrote


def paimon_table(warehouse, name):
    from pypaimon import CatalogFactory

    return CatalogFactory.create({"warehouse": "file://" + str(warehouse)}).get_table(name)


def paimon_read(warehouse, name, snapshot=None):
    table = paimon_table(warehouse, name)
    if snapshot is not None:
        table = table.copy({"scan.snapshot-id": str(snapshot)})
    rb = table.new_read_builder()
    t = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    return [] if t is None else sorted((tuple(r.values()) for r in t.to_pylist()), key=_key)


def test_pypaimon_reads_primary_key_table_after_update_and_delete(conn, db, warehouse):
    t = f"{db}.orders"
    create_orders(conn, t)
    dml(conn, f"INSERT INTO {t} VALUES (1, 'apple', 1, '2024-01-01'), (2, 'pear', 2, '2024-01-01'), "
              "(3, 'fig', 3, '2024-01-02'), (4, 'kiwi', 4, '2024-01-02'), (5, 'lime', 5, '2024-01-03')")
    first = rows(conn, f"SELECT * FROM {t}")
    dml(conn, f"INSERT INTO {t} VALUES (6, 'plum', 6, '2024-01-01'), (1, 'APPLE', 10, '2024-01-01')")
    dml(conn, f"UPDATE {t} SET qty = qty * 100 WHERE dt = '2024-01-02'")
    dml(conn, f"DELETE FROM {t} WHERE qty < 3 OR id = 5")
    via_sql = rows(conn, f"SELECT * FROM {t}")
    assert via_sql == [(1, "APPLE", 10, "2024-01-01"), (3, "fig", 300, "2024-01-02"), (4, "kiwi", 400, "2024-01-02"),
                       (6, "plum", 6, "2024-01-01")]
    assert paimon_read(warehouse, t) == via_sql
    first_snapshot = append_snapshot_ids(conn, t)[0]
    assert paimon_read(warehouse, t, snapshot=first_snapshot) == first


def test_the_first_create_table_has_dynamic_buckets(conn, db, warehouse):
    """A primary-key table created without a bucket count is Paimon's default, dynamic buckets:
    upserts, updates and deletes work through SQL, and pypaimon reads the same rows and writes into it."""
    t = f"{db}.newcomer"
    with conn.cursor() as cur:
        cur.execute(f"CREATE TABLE {t} (id BIGINT NOT NULL, v STRING, PRIMARY KEY (id))")
    dml(conn, f"INSERT INTO {t} VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    dml(conn, f"INSERT INTO {t} VALUES (2, 'B'), (4, 'd')")
    dml(conn, f"UPDATE {t} SET v = 'C' WHERE id = 3")
    dml(conn, f"DELETE FROM {t} WHERE id = 1")
    want = [(2, "B"), (3, "C"), (4, "d")]
    assert rows(conn, f"SELECT * FROM {t}") == want
    assert paimon_read(warehouse, t) == want
    assert (warehouse / f"{db}.db" / "newcomer" / "index").is_dir(), "HASH index files are written"
    table = paimon_table(warehouse, t)
    wb = table.new_batch_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("v", pa.string())])
    w.write_arrow(pa.table({"id": [4, 5], "v": ["py4", "py5"]}, schema=schema))
    c.commit(w.prepare_commit())
    w.close()
    c.close()
    assert rows(conn, f"SELECT * FROM {t}") == [(2, "B"), (3, "C"), (4, "py4"), (5, "py5")]


def test_cross_partition_keys_move_through_sql(conn, db, warehouse):
    """A primary key without the partition key (Paimon's cross-partition upserts): through ADBC, a
    row inserted into another partition, or updated to one, moves its key; pypaimon reads the same."""
    t = f"{db}.moving"
    run(conn, f"CREATE TABLE {t} (id BIGINT NOT NULL, v STRING, dt STRING NOT NULL, PRIMARY KEY (id)) "
              f"PARTITIONED BY (dt) WITH ('bucket' = '-1')")
    dml(conn, f"INSERT INTO {t} VALUES (1, 'a', 'x'), (2, 'b', 'x'), (3, 'c', 'x')")
    dml(conn, f"INSERT INTO {t} VALUES (2, 'B', 'y'), (4, 'd', 'y')")
    dml(conn, f"UPDATE {t} SET dt = 'z' WHERE id = 3")
    dml(conn, f"DELETE FROM {t} WHERE id = 1")
    want = [(2, "B", "y"), (3, "c", "z"), (4, "d", "y")]
    assert rows(conn, f"SELECT * FROM {t}") == want
    assert rows(conn, f"SELECT id FROM {t} WHERE dt = 'x'") == []
    assert paimon_read(warehouse, t) == want


def test_pypaimon_reads_all_types_ingested(conn, db, warehouse):
    data = pa.Table.from_pylist([dict(zip(ALL_TYPES_ARROW.names, ALL_TYPES_ROW)),
                                 dict(zip(ALL_TYPES_ARROW.names, (None,) * 14)),
                                 dict(zip(ALL_TYPES_ARROW.names,
                                          (False, -128, -32768, -2**31, -2**63, -0.25, 1e300, decimal.Decimal("-0.01"),
                                           "", "ü" * 100, b"", datetime.date(1970, 1, 1),
                                           datetime.datetime(1969, 12, 31, 23, 59, 59, 999000),
                                           datetime.datetime(2262, 4, 11, 0, 0, 0, 1))))],
                                schema=ALL_TYPES_ARROW)
    with conn.cursor() as cur:
        assert cur.adbc_ingest("types", data, mode="create", db_schema_name=db) == 3
    expected = sorted((tuple(r.values()) for r in data.to_pylist()), key=_key)
    assert rows(conn, f"SELECT * FROM {db}.types") == expected
    assert paimon_read(warehouse, f"{db}.types") == expected


def test_pypaimon_and_server_share_a_table(conn, db, warehouse):
    """A table pypaimon creates and writes is visible to the server, and the server's writes to pypaimon."""
    from pypaimon import CatalogFactory, Schema

    name = f"{db}.shared"
    cat = CatalogFactory.create({"warehouse": "file://" + str(warehouse)})
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("item", pa.string())])
    cat.create_table(name, Schema.from_pyarrow_schema(schema, primary_keys=["id"], options={"bucket": "1"}), False)
    table = cat.get_table(name)
    wb = table.new_batch_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    w.write_arrow(pa.table({"id": [1, 2], "item": ["from", "pypaimon"]}, schema=schema))
    c.commit(w.prepare_commit())
    w.close()
    c.close()
    assert rows(conn, f"SELECT * FROM {name}") == [(1, "from"), (2, "pypaimon")]
    dml(conn, f"INSERT INTO {name} VALUES (2, 'server'), (3, 'new')")
    assert paimon_read(warehouse, name) == [(1, "from"), (2, "server"), (3, "new")]


def test_sigterm_right_after_start_is_a_clean_shutdown(tmp_path):
    """The signal handlers are installed before the listening line: a SIGTERM sent the moment the
    port is known still ends the server with exit code 0 (not killed by the signal)."""
    import os
    import signal
    import subprocess

    from conftest import LISTEN_RE, _binary

    env = dict(os.environ, TIDELAKE_USER=USER, TIDELAKE_PASSWORD=PASSWORD)
    for _ in range(3):
        proc = subprocess.Popen(
            [str(_binary()), "serve", "--warehouse", str(tmp_path / "wh"), "--listen", "127.0.0.1:0"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
        line = proc.stdout.readline().decode().strip()
        assert LISTEN_RE.match(line), line
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
        proc.stdout.close()


def test_nested_types_through_sql_and_adbc(conn, db, warehouse):
    """ARRAY, MAP and ROW columns: created in SQL as Paimon and Flink spell them, ingested from
    pyarrow's own layout (list items named "item", map "entries"), inserted with SQL literals,
    read back as Arrow list/map/struct, and read by pypaimon."""
    t = f"{db}.nested"
    with conn.cursor() as cur:
        cur.execute(f"CREATE TABLE {t} (id BIGINT NOT NULL, tags ARRAY<STRING>, attrs MAP<STRING, BIGINT>, "
                    f"pt ROW<x DOUBLE, y DOUBLE>, PRIMARY KEY (id)) WITH ('bucket' = '1')")
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("tags", pa.list_(pa.string())),
                        ("attrs", pa.map_(pa.string(), pa.int64())),
                        ("pt", pa.struct([("x", pa.float64()), ("y", pa.float64())]))])
    data = pa.Table.from_pylist([
        {"id": 1, "tags": ["a", "b"], "attrs": [("n", 1)], "pt": {"x": 1.0, "y": 2.0}},
        {"id": 2, "tags": [], "attrs": None, "pt": None},
        {"id": 3, "tags": None, "attrs": [("p", 3), ("q", None)], "pt": {"x": None, "y": 0.5}},
    ], schema=schema)
    with conn.cursor() as cur:
        assert cur.adbc_ingest("nested", data, mode="append", db_schema_name=db) == 3
    dml(conn, f"INSERT INTO {t} VALUES (4, make_array('z'), map(['k'], [40]), named_struct('x', 4.0, 'y', 4.5))")
    result = run(conn, f"SELECT * FROM {t} ORDER BY id")
    assert pa.types.is_list(result.schema.field("tags").type)
    assert pa.types.is_map(result.schema.field("attrs").type)
    assert pa.types.is_struct(result.schema.field("pt").type)
    got = result.to_pylist(maps_as_pydicts="strict")
    assert got == [
        {"id": 1, "tags": ["a", "b"], "attrs": {"n": 1}, "pt": {"x": 1.0, "y": 2.0}},
        {"id": 2, "tags": [], "attrs": None, "pt": None},
        {"id": 3, "tags": None, "attrs": {"p": 3, "q": None}, "pt": {"x": None, "y": 0.5}},
        {"id": 4, "tags": ["z"], "attrs": {"k": 40}, "pt": {"x": 4.0, "y": 4.5}},
    ]
    assert rows(conn, f"SELECT id, tags[1], pt['y'] FROM {t} WHERE cardinality(tags) > 0") == [
        (1, "a", 2.0), (4, "z", 4.5)]
    table = paimon_table(warehouse, t)
    rb = table.new_read_builder()
    py = rb.new_read().to_arrow(rb.new_scan().plan().splits()).sort_by("id")
    assert py.to_pylist(maps_as_pydicts="strict") == got
    with conn.cursor() as cur:
        with pytest.raises(ADBC_ERROR) as e:
            cur.execute(f"CREATE TABLE {db}.bad_nested (k ARRAY<INT> NOT NULL, PRIMARY KEY (k)) WITH ('bucket' = '1')")
        assert "nested type" in str(e.value)
