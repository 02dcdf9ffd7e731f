"""Tenants (issue 14): each principal sees exactly one catalog, its tenant's, and no name, listing,
ticket, subscription or path reaches another tenant's files (reliability.md §4.5, Tenant and Storage
abuse). Every refusal leaves both tenants' warehouses unchanged and the server answering.

One server, tenants `acme` and `beta` under `<warehouse>/tenants/`; alice (admin) and mallory (reader)
belong to acme, bob (admin) to beta. beta holds `default.secrets` with the row 'beta-secret-4242'.
"""
import os

import pyarrow as pa
import pyarrow.flight as flight
import pytest

import tidelake
from tidelake import errors
from tidelake.protocol import encode_ticket

from test_flight_sql import _pb_bytes, flight_sql_command
from test_hostile import code_of, files

SECRET = "beta-secret-4242"

CONFIG = """
[[tenants]]
name = "acme"
[[tenants]]
name = "beta"
[[users]]
name = "alice"
password_hash = '{pw}'
tenant = "acme"
role = "admin"
[[users]]
name = "mallory"
password_hash = '{pw}'
tenant = "acme"
role = "reader"
[[users]]
name = "bob"
password_hash = '{pw}'
tenant = "beta"
role = "admin"
"""


@pytest.fixture(scope="module")
def tenants(tmp_path_factory):
    """(server, alice's client, bob's client)."""
    from conftest import start_configured, stop_cleanly

    srv = start_configured(tmp_path_factory.mktemp("tenants"), CONFIG, "tenant server")
    alice = tidelake.Client(srv.uri, user="alice", password="pw")
    bob = tidelake.Client(srv.uri, user="bob", password="pw")
    alice.execute("CREATE TABLE default.orders (id BIGINT NOT NULL, item STRING, PRIMARY KEY (id)) WITH ('bucket' = '1')")
    alice.execute("INSERT INTO default.orders VALUES (1, 'apple')")
    bob.execute("CREATE TABLE default.secrets (id BIGINT NOT NULL, s STRING, PRIMARY KEY (id)) WITH ('bucket' = '1')")
    bob.execute(f"INSERT INTO default.secrets VALUES (1, '{SECRET}')")
    try:
        yield srv, alice, bob
    finally:
        alice.close()
        bob.close()
        stop_cleanly(srv)


def roots(srv):
    return srv.warehouse / "tenants" / "acme", srv.warehouse / "tenants" / "beta"


def refused(srv, fn, codes):
    """`fn()` fails with one of `codes`, without a word of beta's data, changing nothing on disk; the
    server still answers bob."""
    before = files(srv.warehouse)
    with pytest.raises(Exception) as ei:
        fn()
    assert code_of(ei.value) in codes, f"{code_of(ei.value)}: {str(ei.value)[:400]}"
    assert SECRET not in str(ei.value)
    # No absolute path of the server (the names the client sent may be echoed).
    assert str(srv.warehouse) not in str(ei.value)
    assert files(srv.warehouse) == before
    with tidelake.Client(srv.uri, user="bob", password="pw") as bob:
        assert bob.sql("SELECT 1 AS one").to_pylist() == [{"one": 1}]
    return ei.value


def test_each_tenant_is_a_paimon_warehouse_of_its_own(tenants):
    srv, alice, bob = tenants
    acme, beta = roots(srv)
    assert (acme / "default.db" / "orders" / "snapshot").is_dir()
    assert (beta / "default.db" / "secrets" / "snapshot").is_dir()
    assert not (acme / "default.db" / "secrets").exists()
    assert alice.sql("SELECT item FROM default.orders").to_pylist() == [{"item": "apple"}]
    assert bob.sql("SELECT s FROM default.secrets").to_pylist() == [{"s": SECRET}]
    # The catalog is the tenant's name.
    assert alice.sql("SELECT item FROM acme.default.orders").num_rows == 1
    assert bob.sql("SELECT s FROM beta.default.secrets").num_rows == 1


@pytest.mark.parametrize("sql", [
    "SELECT * FROM beta.default.secrets",
    "SELECT * FROM default.secrets",
    "SELECT * FROM tidelake.default.secrets",
    "INSERT INTO beta.default.secrets VALUES (2, 'x')",
    "DROP TABLE beta.default.secrets",
    "SHOW TABLES IN beta.default",
    "DESCRIBE beta.default.secrets",
    "SELECT * FROM beta.default.\"secrets$files\"",
])
def test_another_tenants_names_do_not_resolve(tenants, sql):
    srv, alice, _ = tenants
    refused(srv, lambda: alice.sql(sql), {"NOT_FOUND", "INVALID_ARGUMENT"})


@pytest.mark.parametrize("name", [
    '"../beta/default".secrets',
    '"..".secrets',
    '"../../tenants/beta/default".secrets',
    '"%2e%2e/beta/default".secrets',
    '"/etc".passwd',
    'default."../../beta/default.db/secrets"',
    'default."a\\0b"',
    'default."."',
])
def test_path_traversal_in_names_reaches_nothing(tenants, name):
    srv, alice, _ = tenants
    for sql in [f"SELECT * FROM {name}", f"INSERT INTO {name} VALUES (1, 'x')", f"DROP TABLE {name}"]:
        refused(srv, lambda: alice.sql(sql), {"NOT_FOUND", "INVALID_ARGUMENT"})


def test_listings_show_only_the_own_tenant(tenants):
    srv, alice, _ = tenants
    assert alice.sql("SHOW DATABASES").column("database").to_pylist() == ["default"]
    shown = alice.sql("SHOW TABLES").to_pylist()
    assert [r["table_name"] for r in shown] == ["orders"], shown
    files_rows = alice.sql('SELECT file_path FROM default."orders$files"').column("file_path").to_pylist()
    assert files_rows and all(p.startswith("default.db/orders/") for p in files_rows), files_rows


def _flight(srv, user):
    c = flight.FlightClient(srv.uri)
    header = c.authenticate_basic_token(user, "pw")
    return c, flight.FlightCallOptions(headers=[header], timeout=60)


def _metadata(c, opts, message, body=b""):
    desc = flight.FlightDescriptor.for_command(flight_sql_command(message, body))
    info = c.get_flight_info(desc, opts)
    parts = [c.do_get(ep.ticket, opts).read_all() for ep in info.endpoints]
    return pa.concat_tables(parts).to_pylist() if parts else []


def test_flight_sql_metadata_lists_only_the_own_catalog(tenants):
    srv, _, _ = tenants
    c, opts = _flight(srv, "alice")
    assert _metadata(c, opts, "CommandGetCatalogs") == [{"catalog_name": "acme"}]
    schemas = _metadata(c, opts, "CommandGetDbSchemas")
    assert {s["catalog_name"] for s in schemas} == {"acme"}
    assert _metadata(c, opts, "CommandGetDbSchemas", _pb_bytes(1, b"beta")) == []
    tables = _metadata(c, opts, "CommandGetTables")
    assert [(t["catalog_name"], t["table_name"]) for t in tables] == [("acme", "orders")]
    assert _metadata(c, opts, "CommandGetTables", _pb_bytes(1, b"beta")) == []
    with pytest.raises(Exception) as ei:
        _metadata(c, opts, "CommandGetPrimaryKeys", _pb_bytes(1, b"beta") + _pb_bytes(3, b"secrets"))
    assert "unknown catalog 'beta'" in str(ei.value)


def test_adbc_sees_only_the_own_catalog(tenants):
    srv, _, _ = tenants
    import adbc_driver_flightsql.dbapi as flightsql

    with flightsql.connect(srv.uri, db_kwargs={"username": "alice", "password": "pw"}, autocommit=True) as conn:
        objects = conn.adbc_get_objects().read_all().to_pylist()
        assert [o["catalog_name"] for o in objects] == ["acme"]
        tables = [t["table_name"] for o in objects for s in o["catalog_db_schemas"] for t in s["db_schema_tables"]]
        assert tables == ["orders"]
        with pytest.raises(Exception):
            conn.adbc_connection.set_options(**{"adbc.connection.catalog": "beta"})
        with conn.cursor() as cur:
            cur.execute("SELECT count(*) AS n FROM default.orders")
            assert cur.fetchall() == [(1,)]


def test_session_options_cannot_switch_to_another_catalog(tenants):
    """SetSessionOptions catalog=beta is answered with INVALID_VALUE for 'catalog'; the session's
    catalog stays acme."""
    from test_tokens import _fields

    srv, _, _ = tenants
    c, opts = _flight(srv, "alice")

    def set_option(name, value):
        entry = _pb_bytes(1, name.encode()) + _pb_bytes(2, _pb_bytes(1, value.encode()))
        results = list(c.do_action(flight.Action("SetSessionOptions", _pb_bytes(1, entry)), opts))
        return _fields(results[0].body.to_pybytes())

    errors_by_name = _fields(set_option("catalog", "beta").get(1, b""))
    assert errors_by_name.get(1) == b"catalog", errors_by_name
    assert set_option("catalog", "acme") == {}
    results = list(c.do_action(flight.Action("GetSessionOptions", b""), opts))
    assert b"acme" in results[0].body.to_pybytes() and b"beta" not in results[0].body.to_pybytes()


def test_another_tenants_ticket_and_subscription_are_refused(tenants):
    srv, _, _ = tenants
    bob, bob_opts = _flight(srv, "bob")
    alice, alice_opts = _flight(srv, "alice")
    desc = flight.FlightDescriptor.for_command(
        flight_sql_command("CommandStatementQuery", _pb_bytes(1, b"SELECT s FROM default.secrets")))
    ticket = bob.get_flight_info(desc, bob_opts).endpoints[0].ticket
    err = refused(srv, lambda: alice.do_get(ticket, alice_opts).read_all(), {"PERMISSION_DENIED"})
    assert "belongs to another principal" in str(err)
    sub = encode_ticket("default.secrets", "from-snapshot", snapshot_id=1)
    refused(srv, lambda: alice.do_get(flight.Ticket(sub), alice_opts).read_all(), {"NOT_FOUND"})
    sub = encode_ticket("../beta/default.secrets", "from-snapshot", snapshot_id=1)
    refused(srv, lambda: alice.do_get(flight.Ticket(sub), alice_opts).read_all(), {"NOT_FOUND", "INVALID_ARGUMENT"})


def test_ingest_cannot_target_another_tenant(tenants):
    srv, _, _ = tenants
    import adbc_driver_flightsql.dbapi as flightsql

    data = pa.table({"id": pa.array([1], pa.int64())})
    for schema in ["../beta/default", "/etc", ".."]:
        def ingest():
            with flightsql.connect(srv.uri, db_kwargs={"username": "alice", "password": "pw"},
                                   autocommit=True) as conn:
                with conn.cursor() as cur:
                    cur.adbc_ingest("x", data, mode="create", db_schema_name=schema)
        refused(srv, ingest, {"INVALID_ARGUMENT", "NOT_FOUND"})


def test_a_symlink_to_another_tenants_table_is_not_followed(tenants):
    srv, alice, _ = tenants
    acme, beta = roots(srv)
    (acme / "default.db" / "leak").symlink_to(beta / "default.db" / "secrets", target_is_directory=True)
    (acme / "stolen.db").symlink_to(beta / "default.db", target_is_directory=True)
    try:
        refused(srv, lambda: alice.sql("SELECT * FROM default.leak"), {"NOT_FOUND"})
        refused(srv, lambda: alice.sql("SELECT * FROM stolen.secrets"), {"NOT_FOUND"})
        refused(srv, lambda: alice.sql("DROP TABLE default.leak"), {"NOT_FOUND"})
        assert [r["table_name"] for r in alice.sql("SHOW TABLES").to_pylist()] == ["orders"]
        assert "stolen" not in str(alice.sql("SHOW DATABASES").to_pylist())
        # Orphan removal in acme deletes nothing of beta's.
        before = files(beta)
        alice.sql("CALL sys.remove_orphan_files('default.orders', '0 ms', false)")
        assert files(beta) == before
    finally:
        os.unlink(acme / "default.db" / "leak")
        os.unlink(acme / "stolen.db")


def test_a_reader_of_one_tenant_cannot_write_it(tenants):
    srv, _, _ = tenants
    with tidelake.Client(srv.uri, user="mallory", password="pw") as mallory:
        assert mallory.sql("SELECT count(*) AS n FROM default.orders").to_pylist() == [{"n": 1}]
        for sql in ["INSERT INTO default.orders VALUES (9, 'x')", "DROP TABLE default.orders"]:
            with pytest.raises(errors.PermissionDeniedError):
                mallory.sql(sql)


def test_branches_take_the_principal(tenants):
    """A reader lists a table's branches and reads them but cannot create, write, fast-forward or
    delete one; another tenant does not see the table's branches at all."""
    from tidelake.admin import Admin

    srv, alice, _ = tenants
    with Admin(srv.uri, user="alice", password="pw") as admin:
        admin.create_branch("default.orders", "rbac")
    with Admin(srv.uri, user="mallory", password="pw") as admin:
        assert [b["name"] for b in admin.list_branches("default.orders")] == ["rbac"]
        for change in [lambda: admin.create_branch("default.orders", "m"),
                       lambda: admin.fast_forward("default.orders", "rbac"),
                       lambda: admin.delete_branch("default.orders", "rbac")]:
            with pytest.raises(Exception, match="(?i)permission|denied|admin"):
                change()
    with tidelake.Client(srv.uri, user="mallory", password="pw") as mallory:
        assert mallory.sql("SELECT count(*) AS n FROM default.orders$branch_rbac").to_pylist() == [{"n": 0}]
        for sql in ["INSERT INTO default.orders$branch_rbac VALUES (9, 'x')",
                    "CALL sys.create_branch('default.orders', 'm2')",
                    "CALL sys.delete_branch('default.orders', 'rbac')"]:
            with pytest.raises(errors.PermissionDeniedError):
                mallory.sql(sql)
    with Admin(srv.uri, user="bob", password="pw") as admin:
        with pytest.raises(Exception, match="does not exist"):
            admin.list_branches("default.orders")
    with tidelake.Client(srv.uri, user="bob", password="pw") as bob:
        with pytest.raises(errors.NotFoundError):
            bob.sql("SELECT * FROM default.orders$branch_rbac")
    with Admin(srv.uri, user="alice", password="pw") as admin:
        assert admin.delete_branch("default.orders", "rbac") == []


def test_tenant_configuration_errors_stop_the_server(tmp_path):
    from conftest import ServerStartError, hash_password, start_server

    pw = hash_password("pw")
    cases = [
        (f'[[users]]\nname = "a"\npassword_hash = \'{pw}\'\ntenant = "acme"\n', "no [[tenants]] are configured"),
        (f'[[tenants]]\nname = "acme"\n[[users]]\nname = "a"\npassword_hash = \'{pw}\'\n', "needs a tenant"),
        (f'[[tenants]]\nname = "acme"\n[[users]]\nname = "a"\npassword_hash = \'{pw}\'\ntenant = "zeta"\n',
         "tenant 'zeta', which is not configured"),
        ('[[tenants]]\nname = "../x"\n', "invalid tenant name"),
        ('[[tenants]]\nname = "a"\nwarehouse = "w"\n[[tenants]]\nname = "b"\nwarehouse = "w/b"\n', "overlap"),
    ]
    for text, expected in cases:
        cfg = tmp_path / "tidelake.toml"
        cfg.write_text(text)
        with pytest.raises(ServerStartError, match=".") as e:
            srv = start_server(tmp_path / "warehouse", config=cfg, label="misconfigured server")
            srv.stop()
            pytest.fail(f"started with {text!r}")
        assert expected in str(e.value), str(e.value)[-2000:]


def test_another_tenants_operations_are_invisible_and_uncancellable(tenants):
    """While alice's compaction runs, bob's list_operations does not show it and bob's cancel of its id
    is NOT_FOUND (the same answer as for an id nobody has); alice's own cancel then ends it."""
    import threading

    from tidelake.admin import Admin

    srv, alice, _ = tenants
    alice.execute("CREATE TABLE default.big (id BIGINT NOT NULL, v STRING, PRIMARY KEY (id)) "
                  "WITH ('bucket' = '32', 'write-only' = 'true')")
    for c in range(3):
        alice.execute(f"INSERT INTO default.big SELECT value, concat('v', CAST(value AS VARCHAR), '-{c}') "
                      f"FROM generate_series({c * 300000}, {c * 300000 + 599999})")
    compacting, reports, outcome = threading.Event(), [], {}

    def on_progress(p):
        reports.append(p)
        if p.phase == "compacting buckets":
            compacting.set()

    with Admin(srv.uri, user="alice", password="pw") as a, Admin(srv.uri, user="bob", password="pw") as b:
        def run():
            try:
                outcome["result"] = a.compact("default.big", full=True, progress=on_progress)
            except Exception as e:  # handed to the test thread
                outcome["error"] = e

        worker = threading.Thread(target=run)
        worker.start()
        try:
            assert compacting.wait(120), (reports, outcome)
            op_id = reports[0].operation_id
            with Admin(srv.uri, user="alice", password="pw") as own:
                assert op_id in [o.operation_id for o in own.list_operations()]
                assert b.list_operations() == []
                with pytest.raises(tidelake.NotFoundError):
                    b.cancel(op_id)
                # Still running after bob's attempts (so they saw it running), and alice may cancel it.
                cancelled = own.cancel(op_id)
                assert cancelled.operation_id == op_id and cancelled.cancelling
        finally:
            worker.join(120)
    assert isinstance(outcome.get("error"), tidelake.CancelledError), outcome
