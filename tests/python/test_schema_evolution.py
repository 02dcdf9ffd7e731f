"""Schema evolution end to end: ALTER TABLE through the server and SchemaChanges through pypaimon, each side
reading what the other evolved and wrote.

Every check compares three things: the server's `SELECT *`, pypaimon's batch read of the same table (column
names, Arrow types and nullability, rows), and a small Python model of what the table must hold. The model
catches errors both readers would share, e.g. a column dropped and added again under the same name must not
bring its old values back (columns are matched by field id, never by name).
"""
import datetime
import decimal
import struct

import adbc_driver_manager
import pyarrow as pa
import pytest
from adbc_driver_manager import AdbcStatusCode

ADBC_ERROR = adbc_driver_manager.Error


# ---------------------------------------------------------------- helpers


def run(conn, query):
    with conn.cursor() as cur:
        cur.execute(query)
        return cur.fetch_arrow_table()


def _key(row):
    return tuple((v is None, v if v is not None else 0) for v in row)


def sorted_rows(table):
    return sorted((tuple(r.values()) for r in table.to_pylist()), key=_key)


def scalar(conn, query):
    t = run(conn, query)
    assert t.num_rows == 1 and t.num_columns == 1, t
    return t.column(0)[0].as_py()


def f32(x):
    """The value a FLOAT column holds for the literal `x` (and, widened to DOUBLE, still holds)."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def lit(v):
    if v is None:
        return "NULL"
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'"
    return repr(v)


def insert(conn, t, *records):
    """INSERT INTO t (cols) VALUES ...; all records name the same columns."""
    cols = list(records[0])
    values = ", ".join("(" + ", ".join(lit(r[c]) for c in cols) + ")" for r in records)
    run(conn, f"INSERT INTO {t} ({', '.join(cols)}) VALUES {values}")


def sys_table(t, kind):
    db, name = t.split(".")
    return f'{db}."{name}${kind}"'


def schema_count(conn, t):
    return scalar(conn, f"SELECT count(*) FROM {sys_table(t, 'schemas')}")


def catalog(warehouse):
    from pypaimon import CatalogFactory

    return CatalogFactory.create({"warehouse": "file://" + str(warehouse)})


def paimon_table(warehouse, name):
    return catalog(warehouse).get_table(name)


def paimon_arrow(warehouse, name, predicate=None):
    """pypaimon's batch read of the whole table (optionally filtered) as one Arrow table."""
    from pypaimon.schema.data_types import PyarrowFieldParser

    table = paimon_table(warehouse, name)
    rb = table.new_read_builder()
    if predicate is not None:
        rb = rb.with_filter(predicate(rb.new_predicate_builder()))
    t = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    if t is None:
        t = PyarrowFieldParser.from_paimon_schema(table.fields).empty_table()
    return t


def describe(schema):
    return [(f.name, f.type, f.nullable) for f in schema]


def assert_both_read(conn, warehouse, t, model=None):
    """The server's SELECT * and pypaimon's read agree (names, types, nullability, rows) and equal `model`."""
    served = run(conn, f"SELECT * FROM {t}")
    read = paimon_arrow(warehouse, t)
    assert served.column_names == read.column_names, (served.schema, read.schema)
    assert describe(served.schema) == describe(read.schema), (served.schema, read.schema)
    assert sorted_rows(served) == sorted_rows(read)
    if model is not None:
        assert served.column_names == model.cols
        assert sorted_rows(served) == model.rows()
    return served


class Model:
    """What the table must hold: its columns in order and its rows (keyed by the primary key, if any)."""

    def __init__(self, cols, key=None):
        self.cols = list(cols)
        self.key = key
        self.data = {} if key else []

    def _records(self):
        return self.data.values() if self.key else self.data

    def rows(self):
        return sorted((tuple(r.get(c) for c in self.cols) for r in self._records()), key=_key)

    def put(self, *records):
        for r in records:
            assert set(r) <= set(self.cols), r
            full = {c: r.get(c) for c in self.cols}
            if self.key:
                self.data[full[self.key]] = full
            else:
                self.data.append(full)

    def update(self, key, **values):
        self.data[key].update(values)

    def delete(self, key):
        del self.data[key]

    def add(self, col, first=False, after=None):
        if first:
            self.cols.insert(0, col)
        elif after:
            self.cols.insert(self.cols.index(after) + 1, col)
        else:
            self.cols.append(col)
        for r in self._records():
            r[col] = None

    def rename(self, old, new):
        self.cols[self.cols.index(old)] = new
        for r in self._records():
            r[new] = r.pop(old)
        if self.key == old:
            self.key = new

    def drop(self, col):
        self.cols.remove(col)
        for r in self._records():
            del r[col]


def expect_refused(conn, sql, message):
    """The statement fails with InvalidArgument naming `message`, and the connection still works."""
    with pytest.raises(ADBC_ERROR) as ei:
        run(conn, sql)
    assert ei.value.status_code == AdbcStatusCode.INVALID_ARGUMENT, f"{sql}: {ei.value.status_code!r} {ei.value}"
    assert isinstance(ei.value, (adbc_driver_manager.ProgrammingError, adbc_driver_manager.OperationalError))
    assert message in str(ei.value), f"{sql}: {ei.value}"
    assert scalar(conn, "SELECT 1") == 1


def schema_files(warehouse, db, table):
    return sorted(p.name for p in (warehouse / f"{db}.db" / table / "schema").glob("schema-*"))


# ---------------------------------------------------------------- 1. tidelake evolves, pypaimon reads


@pytest.mark.parametrize("kind", ["primary_key", "append"])
def test_sql_alter_steps_read_by_pypaimon(conn, db, warehouse, kind):
    pk = kind == "primary_key"
    t = f"{db}.t"
    with_pk = ", PRIMARY KEY (id)" if pk else ""
    options = "'bucket' = '2'" if pk else "'bucket' = '-1'"
    run(conn, f"CREATE TABLE {t} (id INT NOT NULL, name STRING, qty INT, price FLOAT, note STRING NOT NULL{with_pk}) "
              f"WITH ({options})")
    m = Model(["id", "name", "qty", "price", "note"], key="id" if pk else None)
    schemas = 1

    def step(alter_sql, model_change=None):
        nonlocal schemas
        run(conn, f"ALTER TABLE {t} {alter_sql}")
        if model_change is not None:
            model_change()
        schemas += 1
        assert schema_count(conn, t) == schemas, alter_sql
        assert paimon_table(warehouse, t).table_schema.id == schemas - 1, alter_sql
        # The old rows, unchanged, read through the new schema.
        assert_both_read(conn, warehouse, t, m)

    def write(*records):
        insert(conn, t, *records)
        m.put(*records)

    write(*[{"id": i, "name": f"n{i}", "qty": i * 10, "price": 0.1 * i, "note": f"note{i}"} for i in range(1, 5)])
    for r in m._records():
        r["price"] = f32(r["price"])
    assert_both_read(conn, warehouse, t, m)

    # ADD COLUMN, last.
    step("ADD COLUMN tag STRING", lambda: m.add("tag"))
    write({"id": 5, "name": "n5", "qty": 50, "tag": "t5", "note": "note5"})
    if pk:
        run(conn, f"UPDATE {t} SET tag = 'one' WHERE id = 1")
        m.update(1, tag="one")
    assert_both_read(conn, warehouse, t, m)
    assert sorted_rows(run(conn, f"SELECT id FROM {t} WHERE tag IS NULL")) == \
        sorted((r["id"],) for r in m._records() if r["tag"] is None)

    # ADD COLUMN ... FIRST.
    step("ADD COLUMN rnk INT FIRST", lambda: m.add("rnk", first=True))
    write({"rnk": 6, "id": 6, "name": "n6", "note": "note6"})
    assert_both_read(conn, warehouse, t, m)

    # ADD COLUMN ... COMMENT ... AFTER.
    step("ADD COLUMN score DOUBLE COMMENT 'the score' AFTER name", lambda: m.add("score", after="name"))
    write({"id": 7, "name": "n7", "score": 7.5, "note": "note7"})
    if pk:
        run(conn, f"UPDATE {t} SET score = 2.25 WHERE id = 2")
        m.update(2, score=2.25)
    assert_both_read(conn, warehouse, t, m)
    score = next(f for f in paimon_table(warehouse, t).fields if f.name == "score")
    assert score.description == "the score"

    # RENAME COLUMN.
    step("RENAME COLUMN name TO title", lambda: m.rename("name", "title"))
    write({"id": 8, "title": "n8", "note": "note8"})
    if pk:
        run(conn, f"UPDATE {t} SET title = 'renamed' WHERE id = 3")
        m.update(3, title="renamed")
    assert_both_read(conn, warehouse, t, m)
    # Filters on the renamed column reach old files too (their statistics are under the old name).
    assert sorted_rows(run(conn, f"SELECT id FROM {t} WHERE title = 'n1'")) == [(1,)]

    # DROP COLUMN, then ADD COLUMN of the same name: a new field id, so the old values stay gone.
    step("DROP COLUMN tag", lambda: m.drop("tag"))
    write({"id": 9, "title": "n9", "note": "note9"})
    assert_both_read(conn, warehouse, t, m)
    step("ADD COLUMN tag STRING", lambda: m.add("tag"))
    write({"id": 10, "title": "n10", "tag": "t10", "note": "note10"})
    assert_both_read(conn, warehouse, t, m)
    assert sorted_rows(run(conn, f"SELECT id, tag FROM {t} WHERE tag IS NOT NULL")) == [(10, "t10")]

    # Widening INT -> BIGINT.
    step("ALTER COLUMN qty SET DATA TYPE BIGINT")
    write({"id": 11, "title": "n11", "qty": 2**40, "note": "note11"})
    if pk:
        run(conn, f"UPDATE {t} SET qty = {2**35} WHERE id = 4")
        m.update(4, qty=2**35)
    served = assert_both_read(conn, warehouse, t, m)
    assert served.schema.field("qty").type == pa.int64()
    assert sorted_rows(run(conn, f"SELECT id FROM {t} WHERE qty > 15 AND qty < 35")) == [(2,), (3,)]
    # Literals beyond INT against files whose statistics are INT: no wrap-around, no wrong pruning.
    assert sorted_rows(run(conn, f"SELECT id FROM {t} WHERE qty = {2**32 + 10}")) == []
    assert sorted_rows(run(conn, f"SELECT id FROM {t} WHERE qty < 3000000000 AND qty <= 20")) == [(1,), (2,)]

    # Widening FLOAT -> DOUBLE: the old FLOAT values keep their float32 value.
    step("ALTER COLUMN price TYPE DOUBLE")
    write({"id": 12, "title": "n12", "price": 0.1, "note": "note12"})
    served = assert_both_read(conn, warehouse, t, m)
    assert served.schema.field("price").type == pa.float64()

    # DROP NOT NULL.
    step("ALTER COLUMN note DROP NOT NULL")
    write({"id": 13, "title": "n13", "note": None})
    served = assert_both_read(conn, warehouse, t, m)
    assert served.schema.field("note").nullable

    # RENAME of the primary key (allowed, as in Paimon): upserts still merge with the rows written before.
    key = "id"
    if pk:
        step("RENAME COLUMN id TO pk", lambda: m.rename("id", "pk"))
        key = "pk"
        assert paimon_table(warehouse, t).primary_keys == ["pk"]
        write({"pk": 1, "title": "upserted", "note": "again"})  # replaces the row of schema 0
        write({"pk": 14, "title": "n14", "note": "note14"})
        run(conn, f"UPDATE {t} SET qty = 44 WHERE pk = 5")
        m.update(5, qty=44)
        run(conn, f"DELETE FROM {t} WHERE pk = 6")
        m.delete(6)
        assert_both_read(conn, warehouse, t, m)
        assert scalar(conn, f"SELECT count(*) FROM {t}") == len(m.data)
    else:
        step("RENAME COLUMN qty TO amount", lambda: m.rename("qty", "amount"))
        write({"id": 14, "title": "n14", "amount": 140})
        assert_both_read(conn, warehouse, t, m)

    # Options: Flink's SET and RESET, and SET TBLPROPERTIES; each one schema version.
    step("SET ('snapshot.num-retained.max' = '50')")
    step("SET TBLPROPERTIES ('tidelake.test.owner' = 'evolution')")
    opts = paimon_table(warehouse, t).table_schema.options
    assert opts["snapshot.num-retained.max"] == "50" and opts["tidelake.test.owner"] == "evolution"
    served_opts = {r["key"]: r["value"] for r in run(conn, f"SELECT * FROM {sys_table(t, 'options')}").to_pylist()}
    assert served_opts["snapshot.num-retained.max"] == "50"
    step("RESET ('tidelake.test.owner')")
    assert "tidelake.test.owner" not in paimon_table(warehouse, t).table_schema.options
    assert paimon_table(warehouse, t).table_schema.options["bucket"] == ("2" if pk else "-1")
    write({key: 15, "title": "n15", "note": "note15"})
    assert_both_read(conn, warehouse, t, m)
    assert len(schema_files(warehouse, db, "t")) == schemas


def test_other_widenings_read_alike(conn, db, warehouse):
    """The remaining lossless conversions: old files are cast on read the same way by both readers."""
    t = f"{db}.w"
    run(conn, f"CREATE TABLE {t} (id INT NOT NULL, a INT, b DECIMAL(5,2), ts TIMESTAMP(3), dd DATE, s VARCHAR(5), "
              "ti TINYINT, PRIMARY KEY (id)) WITH ('bucket' = '2')")
    run(conn, f"INSERT INTO {t} VALUES (1, 7, 123.45, TIMESTAMP '2024-01-02 03:04:05.678', DATE '2024-03-04', 'abc', "
              "-5), (2, NULL, NULL, NULL, NULL, NULL, NULL)")
    for change in ["ALTER COLUMN a TYPE STRING", "ALTER COLUMN b TYPE DECIMAL(10,4)",
                   "ALTER COLUMN ts TYPE TIMESTAMP(6)", "ALTER COLUMN dd TYPE TIMESTAMP(3)",
                   "ALTER COLUMN s TYPE VARCHAR(50)", "ALTER COLUMN ti TYPE DOUBLE"]:
        run(conn, f"ALTER TABLE {t} {change}")
    served = assert_both_read(conn, warehouse, t)
    assert served.schema.types[1:] == [pa.string(), pa.decimal128(10, 4), pa.timestamp("us"), pa.timestamp("ms"),
                                       pa.string(), pa.float64()]
    assert sorted_rows(served)[0] == (1, "7", decimal.Decimal("123.4500"),
                                      datetime.datetime(2024, 1, 2, 3, 4, 5, 678000), datetime.datetime(2024, 3, 4),
                                      "abc", -5.0)
    assert sorted_rows(run(conn, f"SELECT id FROM {t} WHERE a = '7' AND b > 123.449 AND ti < -4.5")) == [(1,)]


# ---------------------------------------------------------------- 2. pypaimon evolves, tidelake reads


def paimon_write(warehouse, name, records):
    """Writes `records` (dicts over all columns) with pypaimon in one commit."""
    from pypaimon.schema.data_types import PyarrowFieldParser

    table = paimon_table(warehouse, name)
    schema = PyarrowFieldParser.from_paimon_schema(table.fields)
    data = pa.Table.from_pylist([{c: r.get(c) for c in schema.names} for r in records], schema=schema)
    wb = table.new_batch_write_builder()
    w, c = wb.new_write(), wb.new_commit()
    try:
        w.write_arrow(data)
        c.commit(w.prepare_commit())
    finally:
        w.close()
        c.close()


def test_pypaimon_alters_and_writes_server_reads(conn, db, warehouse):
    from pypaimon import Schema
    from pypaimon.schema.data_types import AtomicType
    from pypaimon.schema.schema_change import Move, SchemaChange

    t = f"{db}.p"
    cat = catalog(warehouse)
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string()), ("v", pa.int32()),
                        ("w", pa.string())])
    cat.create_table(t, Schema.from_pyarrow_schema(schema, primary_keys=["id"], options={"bucket": "2"}), False)
    m = Model(["id", "name", "v", "w"], key="id")

    def write(*records):
        paimon_write(warehouse, t, records)
        m.put(*records)

    def alter(change):
        catalog(warehouse).alter_table(t, [change])

    write(*[{"id": i, "name": f"n{i}", "v": i, "w": f"w{i}"} for i in range(1, 5)])
    assert_both_read(conn, warehouse, t, m)

    alter(SchemaChange.add_column("extra", AtomicType("STRING"), "a comment"))
    m.add("extra")
    assert_both_read(conn, warehouse, t, m)
    write({"id": 5, "name": "n5", "v": 5, "w": "w5", "extra": "e5"}, {"id": 1, "name": "n1", "v": 100, "extra": "e1"})
    assert_both_read(conn, warehouse, t, m)

    alter(SchemaChange.add_column("x0", AtomicType("INT"), None, Move.first("x0")))
    m.add("x0", first=True)
    write({"x0": 6, "id": 6, "name": "n6"})
    assert_both_read(conn, warehouse, t, m)

    alter(SchemaChange.rename_column("v", "v2"))
    m.rename("v", "v2")
    write({"id": 7, "v2": 7})
    assert_both_read(conn, warehouse, t, m)

    alter(SchemaChange.drop_column("w"))
    m.drop("w")
    write({"id": 8, "name": "n8"})
    assert_both_read(conn, warehouse, t, m)

    alter(SchemaChange.update_column_type("v2", AtomicType("BIGINT")))
    write({"id": 9, "v2": 2**40})
    served = assert_both_read(conn, warehouse, t, m)
    assert served.schema.field("v2").type == pa.int64()
    assert schema_count(conn, t) == 6
    assert sorted_rows(run(conn, f"SELECT id FROM {t} WHERE v2 > 6")) == [(1,), (7,), (9,)]

    # Now the server writes under the schema pypaimon made, and pypaimon reads that.
    insert(conn, t, {"x0": 10, "id": 10, "name": "server", "v2": 2**41, "extra": "s"})
    m.put({"x0": 10, "id": 10, "name": "server", "v2": 2**41, "extra": "s"})
    run(conn, f"UPDATE {t} SET extra = 'updated', v2 = v2 + 1 WHERE id IN (2, 5)")
    m.update(2, extra="updated", v2=3)
    m.update(5, extra="updated", v2=6)
    run(conn, f"DELETE FROM {t} WHERE id = 3")
    m.delete(3)
    assert_both_read(conn, warehouse, t, m)
    # And pypaimon once more, on top of the server's files.
    write({"x0": 11, "id": 11, "name": "last", "v2": 11})
    assert_both_read(conn, warehouse, t, m)


# ---------------------------------------------------------------- 3. refusals


REFUSED = [
    ("DROP COLUMN id", "Cannot drop partition key or primary key: [id]"),
    ("DROP COLUMN dt", "Cannot drop partition key or primary key: [dt]"),
    ("ALTER COLUMN id SET DATA TYPE BIGINT", "Cannot update primary key"),
    ("ALTER COLUMN dt TYPE VARCHAR(100)", "Cannot update partition column: [dt]"),
    ("RENAME COLUMN dt TO day", "Cannot rename partition column: [dt]"),
    ("ALTER COLUMN qty SET DATA TYPE INT",
     "Column type qty[BIGINT] cannot be converted to INT without losing information."),
    ("ALTER COLUMN price TYPE FLOAT", "cannot be converted to FLOAT without losing information."),
    ("ADD COLUMN x INT NOT NULL", "cannot specify NOT NULL"),
    ("ALTER COLUMN item SET NOT NULL", "Cannot update column type from nullable to non nullable"),
    ("ALTER COLUMN id DROP NOT NULL", "Cannot change nullability of primary key"),
    ("SET ('bucket' = '4')", "Change 'bucket' is not supported yet."),
    ("SET TBLPROPERTIES ('merge-engine' = 'partial-update')", "Change 'merge-engine' is not supported yet."),
    ("RESET ('bucket')", "Change 'bucket' is not supported yet."),
    ("ADD COLUMN item STRING", "already exists"),
    ("DROP COLUMN nope", "does not exist"),
    ("ADD COLUMN y INT AFTER nope", "Reference field name not found: nope"),
    ("RENAME COLUMN item TO qty", "already exists"),
    # One statement is one schema version: a refused change takes the valid ones before it down too.
    ("ADD COLUMN fine INT, DROP COLUMN id", "Cannot drop partition key or primary key: [id]"),
    ("ADD COLUMN fine INT, ALTER COLUMN qty TYPE SMALLINT", "cannot be converted to SMALLINT"),
]


def test_refused_alters_change_nothing(conn, db, warehouse):
    t = f"{db}.r"
    run(conn, "CREATE TABLE " + t + " (id INT NOT NULL, dt STRING NOT NULL, item STRING, qty BIGINT, price DOUBLE, "
              "PRIMARY KEY (id, dt)) PARTITIONED BY (dt) WITH ('bucket' = '2')")
    insert(conn, t, {"id": 1, "dt": "2024-01-01", "item": "a", "qty": 1, "price": 1.5},
           {"id": 2, "dt": "2024-01-02", "item": "b", "qty": 2, "price": 2.5})
    run(conn, f"ALTER TABLE {t} ADD COLUMN later STRING")  # so there is more than schema 0
    before = assert_both_read(conn, warehouse, t)
    files = schema_files(warehouse, db, "r")
    assert schema_count(conn, t) == 2 and len(files) == 2
    failures = []
    for change, message in REFUSED:
        try:
            expect_refused(conn, f"ALTER TABLE {t} {change}", message)
        except AssertionError as e:
            failures.append(f"ALTER TABLE {t} {change}: {e}")
        assert schema_count(conn, t) == 2, change
        assert schema_files(warehouse, db, "r") == files, change
    assert not failures, "\n".join(failures)
    after = assert_both_read(conn, warehouse, t)
    assert after.equals(before) or (after.schema.equals(before.schema) and sorted_rows(after) == sorted_rows(before))
    # Refusals through pypaimon's catalog leave the table alone as well, and the server still reads it.
    from pypaimon.schema.schema_change import SchemaChange

    with pytest.raises(Exception):
        catalog(warehouse).alter_table(t, [SchemaChange.drop_column("id")])
    assert schema_count(conn, t) == 2
    # The table still takes writes.
    insert(conn, t, {"id": 3, "dt": "2024-01-01", "item": "c", "qty": 3, "price": 3.5, "later": "x"})
    assert scalar(conn, f"SELECT count(*) FROM {t}") == 3
    assert_both_read(conn, warehouse, t)


# ---------------------------------------------------------------- 4. partitioned table


def test_partitioned_table_add_column_and_new_partition(conn, db, warehouse):
    t = f"{db}.orders"
    run(conn, f"CREATE TABLE {t} (id BIGINT NOT NULL, item STRING, dt STRING NOT NULL, PRIMARY KEY (id, dt)) "
              "PARTITIONED BY (dt) WITH ('bucket' = '2')")
    m = Model(["id", "item", "dt"])  # the key is (id, dt): kept as an append list, rewritten by hand below

    records = [{"id": i, "item": f"i{i}", "dt": d} for i, d in [(1, "2024-01-01"), (2, "2024-01-01"),
                                                                  (3, "2024-01-02"), (4, "2024-01-02")]]
    insert(conn, t, *records)
    m.put(*records)
    assert_both_read(conn, warehouse, t, m)

    run(conn, f"ALTER TABLE {t} ADD COLUMN qty INT AFTER item")
    m.add("qty", after="item")
    assert_both_read(conn, warehouse, t, m)

    new = [{"id": 5, "item": "i5", "qty": 50, "dt": "2024-01-03"},
           {"id": 1, "item": "i1b", "qty": 10, "dt": "2024-01-03"}]
    insert(conn, t, *new)
    m.put(*new)
    # An old partition's row gets a value in the new column.
    run(conn, f"UPDATE {t} SET qty = 30 WHERE id = 3 AND dt = '2024-01-02'")
    next(r for r in m.data if r["id"] == 3)["qty"] = 30
    assert_both_read(conn, warehouse, t, m)

    def both(where, predicate, expect):
        assert sorted_rows(run(conn, f"SELECT * FROM {t} WHERE {where}")) == expect, where
        assert sorted_rows(paimon_arrow(warehouse, t, predicate)) == expect, where

    old_partition = sorted((r["id"], r["item"], r["qty"], r["dt"]) for r in m.data if r["dt"] == "2024-01-01")
    both("dt = '2024-01-01'", lambda pb: pb.equal("dt", "2024-01-01"), old_partition)
    both("dt = '2024-01-03'", lambda pb: pb.equal("dt", "2024-01-03"),
         [(1, "i1b", 10, "2024-01-03"), (5, "i5", 50, "2024-01-03")])
    assert sorted_rows(run(conn, f"SELECT id, dt FROM {t} WHERE qty IS NULL")) == \
        [(1, "2024-01-01"), (2, "2024-01-01"), (4, "2024-01-02")]
    assert sorted_rows(run(conn, f"SELECT id, dt FROM {t} WHERE qty >= 30")) == \
        [(3, "2024-01-02"), (5, "2024-01-03")]
    files = run(conn, f"SELECT schema_id FROM {sys_table(t, 'files')}").column("schema_id").to_pylist()
    assert set(files) == {0, 1}, files


# ---------------------------------------------------------------- 5. RENAME TO


def test_rename_table(conn, db, warehouse):
    from pypaimon.catalog.catalog_exception import TableNotExistException

    t = f"{db}.before"
    run(conn, f"CREATE TABLE {t} (id INT NOT NULL, name STRING, PRIMARY KEY (id)) WITH ('bucket' = '2')")
    m = Model(["id", "name"], key="id")
    insert(conn, t, {"id": 1, "name": "a"}, {"id": 2, "name": "b"})
    m.put({"id": 1, "name": "a"}, {"id": 2, "name": "b"})
    run(conn, f"ALTER TABLE {t} ADD COLUMN extra STRING")
    m.add("extra")
    insert(conn, t, {"id": 3, "name": "c", "extra": "x"})
    m.put({"id": 3, "name": "c", "extra": "x"})
    run(conn, f"CREATE TABLE {db}.other (id INT)")

    # Onto an existing table: refused, both tables untouched.
    with pytest.raises(ADBC_ERROR):
        run(conn, f"ALTER TABLE {t} RENAME TO other")
    assert_both_read(conn, warehouse, t, m)
    assert scalar(conn, f"SELECT count(*) FROM {db}.other") == 0

    run(conn, f"ALTER TABLE {t} RENAME TO after")  # unqualified: same database
    t2 = f"{db}.after"
    assert_both_read(conn, warehouse, t2, m)
    assert schema_count(conn, t2) == 2
    assert not (warehouse / f"{db}.db" / "before").exists()
    with pytest.raises(ADBC_ERROR) as ei:
        run(conn, f"SELECT * FROM {t}")
    assert ei.value.status_code == AdbcStatusCode.NOT_FOUND, ei.value
    with pytest.raises(TableNotExistException):
        paimon_table(warehouse, t)

    # The renamed table evolves and takes writes as before.
    run(conn, f"ALTER TABLE {t2} RENAME COLUMN name TO label")
    m.rename("name", "label")
    insert(conn, t2, {"id": 1, "label": "A", "extra": "y"})
    m.put({"id": 1, "label": "A", "extra": "y"})
    assert_both_read(conn, warehouse, t2, m)

    # Qualified target, and a name freed by a rename can be used again.
    run(conn, f"ALTER TABLE {t2} RENAME TO {db}.final")
    t3 = f"{db}.final"
    assert_both_read(conn, warehouse, t3, m)
    with pytest.raises(TableNotExistException):
        paimon_table(warehouse, t2)
    run(conn, f"CREATE TABLE {t} (z INT)")
    assert scalar(conn, f"SELECT count(*) FROM {t}") == 0
    assert paimon_table(warehouse, t).field_names == ["z"]


# ---------------------------------------------------------------- time travel across schema versions


def test_time_travel_reads_with_the_snapshot_schema(conn, db, warehouse):
    t = f"{db}.tt"
    run(conn, f"CREATE TABLE {t} (id INT NOT NULL, v INT, gone STRING, PRIMARY KEY (id)) WITH ('bucket' = '2')")
    run(conn, f"INSERT INTO {t} VALUES (1, 10, 'g1')")
    run(conn, f"ALTER TABLE {t} DROP COLUMN gone")
    run(conn, f"ALTER TABLE {t} RENAME COLUMN v TO v2")
    run(conn, f"INSERT INTO {t} VALUES (2, 20)")
    table = paimon_table(warehouse, t).copy({"scan.snapshot-id": "1"})
    rb = table.new_read_builder()
    read = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    assert read.to_pylist() == [{"id": 1, "v": 10, "gone": "g1"}]  # pypaimon: the snapshot's schema
    assert run(conn, f"SELECT * FROM {t} VERSION AS OF 1").to_pylist() == read.to_pylist()
