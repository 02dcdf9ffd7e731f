"""The SQL surface a reader reaches (issue 14; reliability.md §4.5 "SQL surface"): statements that would
read or write outside the warehouse, change the engine's settings, or sneak DDL past the role check are
refused with a precise status, change nothing on disk, and leave the server answering (through
test_hostile's `attack`, as mallory, a reader).
"""
import os

import pyarrow.flight as flight
import pytest

from test_flight_sql import _pb_bytes, flight_sql_command
from test_hostile import attack, code_of, files, shared  # noqa: F401  (the module's server)

DENIED = {"PERMISSION_DENIED"}
REFUSED = {"PERMISSION_DENIED", "INVALID_ARGUMENT", "UNIMPLEMENTED", "NOT_FOUND"}


@pytest.mark.parametrize("location", ["/etc/passwd", "file:///etc/passwd", "s3://other-bucket/", "../beta",
                                      "warehouse/../../x"])
def test_external_tables_are_refused_wherever_they_point(shared, location):
    attack(shared, f"CREATE EXTERNAL TABLE x STORED AS CSV LOCATION '{location}'", REFUSED)


@pytest.mark.parametrize("sql", [
    "COPY (SELECT 1) TO '/tmp/tidelake-copy-x'",
    "COPY default.t TO '/tmp/tidelake-copy-y' STORED AS CSV",
    "SET datafusion.execution.batch_size = 1",
    "SET datafusion.catalog.information_schema = true",
    "SELECT * FROM '/etc/passwd'",
    "SELECT * FROM 'file:///etc/passwd'",
    "PREPARE p AS DROP TABLE default.t",
    "PREPARE p(BIGINT) AS INSERT INTO default.t VALUES ($1, 'x')",
    "EXECUTE p",
    "SELECT 1; DROP TABLE default.t",
    "SELECT 1; SELECT 2",
    "CREATE VIEW v AS SELECT * FROM default.t",
])
def test_statements_that_leave_the_sandbox_are_refused(shared, sql):
    attack(shared, sql, REFUSED)
    assert not os.path.exists("/tmp/tidelake-copy-x") and not os.path.exists("/tmp/tidelake-copy-y")


@pytest.mark.parametrize("sql", [
    "INSERT INTO default.t VALUES (9, 'z')",
    "DELETE FROM default.t WHERE id = 1",
    "UPDATE default.t SET v = 'q' WHERE id = 1",
    "DROP TABLE default.t",
    "ALTER TABLE default.t ADD COLUMN c INT",
    "CREATE TABLE default.u (a INT)",
    "CALL sys.compact('default.t')",
])
def test_a_reader_cannot_change_anything(shared, sql):
    attack(shared, sql, DENIED)


def test_a_substrait_plan_is_unimplemented(shared):
    srv, _ = shared
    before = files(srv.warehouse)
    c = flight.FlightClient(srv.uri)
    opts = flight.FlightCallOptions(headers=[c.authenticate_basic_token("mallory", "pw")], timeout=30)
    # CommandStatementSubstraitPlan { plan = SubstraitPlan { plan = <bytes of a read of /etc/passwd> } }
    plan = _pb_bytes(1, _pb_bytes(1, b"\x0a\x0b/etc/passwd"))
    desc = flight.FlightDescriptor.for_command(flight_sql_command("CommandStatementSubstraitPlan", plan))
    with pytest.raises(Exception) as ei:
        c.get_flight_info(desc, opts)
    assert code_of(ei.value) == "UNIMPLEMENTED", str(ei.value)
    c.close()
    assert files(srv.warehouse) == before
