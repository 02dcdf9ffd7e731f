"""tidelake as Paimon's REST catalog (issue 19): pypaimon's `RESTCatalog` (`metastore = rest`) creates
databases and tables, writes and commits through `[rest] listen`, with the tokens the Flight side mints;
what it commits is read through Flight SQL at once, and Flight's commits and its commits are ordered
into one contiguous line of snapshots. Bad input gets the status and the error body Paimon's clients
expect, and changes nothing.

One server, tenants `acme` and `beta`; alice (admin), wendy (writer) and mallory (reader) belong to acme,
bob (admin) to beta.
"""
import http.client
import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

import pyarrow as pa
import pyarrow.flight as flight
import pytest

import tidelake

from test_hostile import files

HS_ISSUER = "https://hs.example.test"
HS_SECRET = "an HS256 secret of well over thirty-two bytes"

CONFIG = """
[rest]
listen = "127.0.0.1:0"
[audit]
file = "audit.log"
[[auth.issuers]]
issuer = "https://hs.example.test"
audience = "tidelake"
algorithms = ["HS256"]
hs256_secret_env = "TIDELAKE_TEST_HS_SECRET"
tenant_claim = "tenant"
leeway_seconds = 0
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
name = "wendy"
password_hash = '{pw}'
tenant = "acme"
role = "writer"
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

# What a server with `[rest] listen` prints: the catalog's base URL.
REST_LINE = r"tidelake REST catalog on (http://\S+)"

PK_SCHEMA = pa.schema([pa.field("id", pa.int64(), False), pa.field("v", pa.string())])


@pytest.fixture(scope="module")
def rest(tmp_path_factory):
    """(server, REST base URL)."""
    from conftest import announced, start_configured, stop_cleanly

    tmp = tmp_path_factory.mktemp("rest")
    srv = start_configured(tmp, CONFIG, "rest server", env_extra={"TIDELAKE_TEST_HS_SECRET": HS_SECRET})
    srv.audit_log = tmp / "audit.log"
    try:
        yield srv, announced(srv, REST_LINE)
    finally:
        srv.extra_stdout.clear()
        stop_cleanly(srv)


def token(srv, user):
    """The bearer token the Flight handshake mints for `user`."""
    client = flight.FlightClient(srv.uri)
    _, value = client.authenticate_basic_token(user, "pw")
    client.close()
    return value.decode().split(" ", 1)[1]


def idp_token(exp_in, roles=("admin",), tenant="acme"):
    """An identity provider's HS256 JWT for `ann`, expiring `exp_in` seconds from now."""
    import jwt

    now = int(time.time())
    return jwt.encode({"iss": HS_ISSUER, "aud": "tidelake", "sub": "ann", "iat": now - 60,
                       "exp": now + exp_in, "roles": list(roles), "tenant": tenant},
                      HS_SECRET, algorithm="HS256")


def catalog(url, tok, warehouse="acme"):
    from pypaimon import CatalogFactory

    return CatalogFactory.create({"metastore": "rest", "uri": url, "warehouse": warehouse,
                                  "token.provider": "bear", "token": tok})


def call(url, method, path, tok=None, body=None, raw=None):
    """(status, JSON body) of one request."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(url + path, data=data, method=method)
    if tok is not None:
        req.add_header("Authorization", f"Bearer {tok}")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


def over_the_limit(url, path, tok, length):
    """(status, JSON body) of a POST declaring `length` bytes with `Expect: 100-continue`, whose
    body is sent only if the server asks for it."""
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    try:
        conn.putrequest("POST", path)
        conn.putheader("Authorization", f"Bearer {tok}")
        conn.putheader("Content-Length", str(length))
        conn.putheader("Expect", "100-continue")
        conn.endheaders()
        r = conn.getresponse()
        return r.status, json.loads(r.read() or b"null")
    finally:
        conn.close()


def write(table, rows):
    wb = table.new_batch_write_builder()
    w = wb.new_write()
    c = wb.new_commit()
    w.write_arrow(pa.Table.from_pylist(rows, schema=PK_SCHEMA))
    c.commit(w.prepare_commit())
    w.close()
    c.close()


def read(table):
    rb = table.new_read_builder()
    got = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    return sorted((r["id"], r["v"]) for r in got.to_pylist())


def snapshot_ids(srv, tenant, table):
    db, t = table.split(".")
    d = srv.warehouse / "tenants" / tenant / f"{db}.db" / t / "snapshot"
    return sorted(int(p.name.split("-")[1]) for p in d.glob("snapshot-*"))


def test_pypaimon_creates_writes_and_reads_and_flight_sees_it(rest):
    from pypaimon import Schema

    srv, url = rest
    cat = catalog(url, token(srv, "alice"))
    cat.create_database("rdb", False)
    assert "rdb" in cat.list_databases()
    cat.create_table("rdb.events", Schema.from_pyarrow_schema(PK_SCHEMA, primary_keys=["id"],
                                                               options={"bucket": "2"}), False)
    assert cat.list_tables("rdb") == ["events"]
    table = cat.get_table("rdb.events")
    write(table, [{"id": i, "v": f"a{i}"} for i in range(10)])
    write(table, [{"id": i, "v": f"b{i}"} for i in range(5, 15)])
    want = sorted([(i, f"a{i}") for i in range(5)] + [(i, f"b{i}") for i in range(5, 15)])
    assert read(cat.get_table("rdb.events")) == want
    assert snapshot_ids(srv, "acme", "rdb.events") == [1, 2]

    # Flight SQL reads the client's commits at once, and writes after them.
    with tidelake.Client(srv.uri, user="alice", password="pw") as c:
        got = sorted((r["id"], r["v"]) for r in c.sql("SELECT id, v FROM rdb.events").to_pylist())
        assert got == want
        c.execute("INSERT INTO rdb.events VALUES (100, 'flight')")
    assert read(cat.get_table("rdb.events")) == sorted(want + [(100, "flight")])

    # An append table too, and the paged listing with a pattern.
    cat.create_table("rdb.log", Schema.from_pyarrow_schema(PK_SCHEMA), False)
    write(cat.get_table("rdb.log"), [{"id": 1, "v": "x"}, {"id": 1, "v": "y"}])
    assert read(cat.get_table("rdb.log")) == [(1, "x"), (1, "y")]
    tok = token(srv, "alice")
    status, body = call(url, "GET", "/v1/acme/databases/rdb/tables?maxResults=1", tok)
    assert status == 200 and body == {"tables": ["events"], "nextPageToken": "events"}
    status, body = call(url, "GET", "/v1/acme/databases/rdb/tables?maxResults=1&pageToken=events", tok)
    assert status == 200 and body == {"tables": ["log"], "nextPageToken": None}
    status, body = call(url, "GET", "/v1/acme/databases/rdb/tables?tableNamePattern=ev%25", tok)
    assert body["tables"] == ["events"]

    # The table's audit fields: made with its first schema, changed by its latest commit.
    status, got = call(url, "GET", "/v1/acme/databases/rdb/tables/events", tok)
    assert status == 200 and got["isExternal"] is False and got["schemaId"] == 0, got
    stats = call(url, "GET", "/v1/acme/databases/rdb/tables/events/snapshot", tok)[1]["snapshot"]
    latest = stats["snapshot"]
    # The live files of the latest snapshot: 2 buckets, 3 commits (REST, REST, Flight), no compaction yet.
    with tidelake.Client(srv.uri, user="alice", password="pw") as c:
        files = c.sql("SELECT file_size_in_bytes FROM rdb.events$files").column(0).to_pylist()
    assert (stats["fileCount"], stats["fileSizeInBytes"]) == (len(files), sum(files)), stats
    assert stats["recordCount"] == latest["totalRecordCount"]
    assert 0 < got["createdAt"] < got["updatedAt"] == latest["timeMillis"], (got, latest)
    assert got["owner"] is None and got["createdBy"] is None


def test_rest_and_flight_commits_interleave_without_loss(rest):
    from pypaimon import Schema

    srv, url = rest
    cat = catalog(url, token(srv, "alice"))
    cat.create_table("default.mixed", Schema.from_pyarrow_schema(PK_SCHEMA, primary_keys=["id"],
                                                                options={"bucket": "1"}), False)
    errors = []

    def rest_writer():
        try:
            wcat = catalog(url, token(srv, "wendy"))
            for i in range(8):
                write(wcat.get_table("default.mixed"), [{"id": 1000 + i, "v": "rest"}])
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    t = threading.Thread(target=rest_writer)
    t.start()
    with tidelake.Client(srv.uri, user="alice", password="pw") as c:
        for i in range(8):
            c.execute(f"INSERT INTO default.mixed VALUES ({i}, 'flight')")
    t.join(timeout=300)
    assert not errors, errors
    ids = snapshot_ids(srv, "acme", "default.mixed")
    # One line of snapshots: contiguous, each commit once (compactions of Flight's writes between).
    assert ids == list(range(1, ids[-1] + 1)), ids
    d = srv.warehouse / "tenants" / "acme" / "default.db" / "mixed" / "snapshot"
    kinds = [json.loads((d / f"snapshot-{i}").read_text())["commitKind"] for i in ids]
    assert kinds.count("APPEND") == 16, kinds
    with tidelake.Client(srv.uri, user="alice", password="pw") as c:
        got = sorted((r["id"], r["v"]) for r in c.sql("SELECT id, v FROM default.mixed").to_pylist())
    assert got == sorted([(i, "flight") for i in range(8)] + [(1000 + i, "rest") for i in range(8)])


def test_bad_input_gets_paimons_status_and_changes_nothing(rest):
    from pypaimon import Schema

    srv, url = rest
    alice, mallory, wendy, bob = (token(srv, u) for u in ("alice", "mallory", "wendy", "bob"))
    cat = catalog(url, alice)
    cat.create_table("default.guarded", Schema.from_pyarrow_schema(PK_SCHEMA, primary_keys=["id"],
                                                                  options={"bucket": "1"}), False)
    write(cat.get_table("default.guarded"), [{"id": 1, "v": "one"}])
    before = files(srv.warehouse)

    def refused(method, path, tok, status, body=None, raw=None, resource=None):
        got, err = call(url, method, path, tok, body=body, raw=raw)
        assert got == status, (method, path, got, err)
        assert err["code"] == status and err["message"], err
        if resource:
            assert err["resourceType"] == resource, err
        assert str(srv.warehouse) not in err["message"]
        assert files(srv.warehouse) == before

    # No token, a forged one, an expired one: 401, /v1/config included.
    refused("GET", "/v1/config?warehouse=acme", None, 401)
    refused("GET", "/v1/acme/databases", "not-a-token", 401)
    refused("GET", "/v1/config?warehouse=acme", idp_token(-30), 401)
    refused("GET", "/v1/acme/databases", idp_token(-30), 401)
    # The identity provider's valid token works, as its tenant and role say.
    assert read(catalog(url, idp_token(300, roles=("reader",))).get_table("default.guarded")) == [(1, "one")]
    refused("POST", "/v1/acme/databases", idp_token(300, roles=("reader",)), 403, body={"name": "y"})
    refused("GET", "/v1/acme/databases", idp_token(300, tenant="beta"), 403)
    # Another tenant's catalog 403, an unknown one 404.
    refused("GET", "/v1/beta/databases", alice, 403)
    refused("GET", "/v1/config?warehouse=beta", alice, 403)
    refused("GET", "/v1/nobody/databases", alice, 404)
    # Unknown table and database: 404 naming the resource.
    refused("GET", "/v1/acme/databases/default/tables/nope", alice, 404, resource="TABLE")
    refused("GET", "/v1/acme/databases/nodb/tables", alice, 404, resource="DATABASE")
    # Roles: a reader cannot create or commit, a writer cannot create a table.
    refused("POST", "/v1/acme/databases", mallory, 403, body={"name": "x", "options": None})
    refused("POST", "/v1/acme/databases/default/tables/guarded/commit", mallory, 403, body={})
    refused("DELETE", "/v1/acme/databases/default/tables/guarded", wendy, 403)
    # Malformed bodies: 400.
    refused("POST", "/v1/acme/databases/default/tables", alice, 400, raw=b"{not json")
    refused("POST", "/v1/acme/databases/default/tables", alice, 400,
            body={"identifier": {"database": "default", "object": "bad"},
                  "schema": {"fields": [{"id": 0, "name": "a", "type": "NO SUCH TYPE"}]}})
    # A body declared over the limit: 413 before the body is read. The client waits for
    # `100 Continue` and so never sends it (sending it races the server's close: a reset can
    # drop the 413 before the client reads it).
    got, err = over_the_limit(url, "/v1/acme/databases", alice, 5 << 20)
    assert got == 413 and err["code"] == 413 and "over" in err["message"], (got, err)
    assert files(srv.warehouse) == before
    # A snapshot that names no files, or skips an id: 400.
    status, latest = call(url, "GET", "/v1/acme/databases/default/tables/guarded/snapshot", alice)
    assert status == 200
    snap = dict(latest["snapshot"]["snapshot"])
    base = snap["uuid"]
    bad = dict(snap, id=snap["id"] + 1, uuid="u-bad", deltaManifestList="manifest-list-missing")
    refused("POST", "/v1/acme/databases/default/tables/guarded/commit", wendy, 400,
            body={"tableId": None, "baseSnapshotUuid": base, "snapshot": bad})
    refused("POST", "/v1/acme/databases/default/tables/guarded/commit", wendy, 400,
            body={"baseSnapshotUuid": base, "snapshot": dict(snap, id=snap["id"] + 5, uuid="u-skip")})
    # A stale base: 200 {"success": false}, nothing stored.
    stale = dict(snap, id=snap["id"] + 1, uuid="u-stale")
    got, body = call(url, "POST", "/v1/acme/databases/default/tables/guarded/commit", wendy,
                     body={"baseSnapshotUuid": "not-the-latest", "snapshot": stale})
    assert (got, body) == (200, {"success": False})
    assert files(srv.warehouse) == before
    # bob reads his own catalog, not alice's tables.
    status, body = call(url, "GET", "/v1/config?warehouse=beta", bob)
    assert status == 200 and body["overrides"]["prefix"] == "beta"
    status, body = call(url, "GET", "/v1/beta/databases/default/tables", bob)
    assert status == 200 and "guarded" not in body["tables"]
    # The server still serves, and the table still reads as before.
    assert read(catalog(url, alice).get_table("default.guarded")) == [(1, "one")]


def test_alter_tags_rollback_and_a_subscription_over_rest_commits(rest):
    from pypaimon import Schema
    from pypaimon.schema.data_types import AtomicType
    from pypaimon.schema.schema_change import SchemaChange
    from pypaimon.table.instant import Instant

    srv, url = rest
    cat = catalog(url, token(srv, "alice"))
    cat.create_table("default.evolving", Schema.from_pyarrow_schema(PK_SCHEMA, primary_keys=["id"],
                                                                   options={"bucket": "1"}), False)
    write(cat.get_table("default.evolving"), [{"id": 1, "v": "one"}])
    write(cat.get_table("default.evolving"), [{"id": 2, "v": "two"}])

    # A subscription from the first snapshot sees both REST commits, in order.
    sub = tidelake.subscribe(srv.uri, "default.evolving", user="alice", password="pw",
                             start="from-snapshot", snapshot_id=1, end_snapshot_id=2)
    changes = [(k, i) for b in sub for k, i in zip(b.column(0).to_pylist(), b.column(1).to_pylist())]
    assert changes == [("+I", 1), ("+I", 2)], changes

    # Tags: create at snapshot 1, list, get, and the client's own tag calls.
    cat.create_tag("default.evolving", "v1", snapshot_id=1)
    tok = token(srv, "alice")
    status, body = call(url, "GET", "/v1/acme/databases/default/tables/evolving/tags", tok)
    assert (status, body) == (200, {"tags": ["v1"], "nextPageToken": None})
    assert cat.get_tag("default.evolving", "v1").snapshot.id == 1
    status, body = call(url, "POST", "/v1/acme/databases/default/tables/evolving/tags", tok,
                        body={"tagName": "v1", "snapshotId": 2, "timeRetained": None})
    assert status == 409 and body["resourceType"] == "TAG", body
    status, body = call(url, "POST", "/v1/acme/databases/default/tables/evolving/tags", tok,
                        body={"tagName": "v9", "snapshotId": 99, "timeRetained": None})
    assert status == 404 and body["resourceType"] == "SNAPSHOT", body

    # Alter: add a column; pypaimon and Flight read the new schema.
    cat.alter_table("default.evolving", [SchemaChange.add_column("note", AtomicType("STRING")),
                                         SchemaChange.set_option("snapshot.num-retained.min", "5")], False)
    table = cat.get_table("default.evolving")
    assert [f.name for f in table.table_schema.fields] == ["id", "v", "note"]
    status, body = call(url, "POST", "/v1/acme/databases/default/tables/evolving", tok,
                        body={"changes": [{"action": "dropColumn", "fieldNames": ["id"]}]})
    assert status == 400, body  # a primary-key column
    status, body = call(url, "POST", "/v1/acme/databases/default/tables/evolving", tok,
                        body={"changes": [{"action": "noSuchChange"}]})
    assert status == 400, body
    with tidelake.Client(srv.uri, user="alice", password="pw") as c:
        rows = c.sql("SELECT id, v, note FROM default.evolving").to_pylist()
        assert sorted((r["id"], r["v"], r["note"]) for r in rows) == [(1, "one", None), (2, "two", None)]

    # Rollback to the tag: the table reads as at snapshot 1; a stale fromSnapshot is refused.
    status, body = call(url, "POST", "/v1/acme/databases/default/tables/evolving/rollback", tok,
                        body={"instant": {"type": "snapshot", "snapshotId": 1}, "fromSnapshot": 7})
    assert status == 409, body
    cat.rollback_to("default.evolving", Instant.tag("v1"))
    assert read(cat.get_table("default.evolving")) == [(1, "one")]
    with tidelake.Client(srv.uri, user="alice", password="pw") as c:
        assert [r["id"] for r in c.sql("SELECT id FROM default.evolving").to_pylist()] == [1]
    cat.delete_tag("default.evolving", "v1")
    status, body = call(url, "GET", "/v1/acme/databases/default/tables/evolving/tags/v1", tok)
    assert status == 404 and body["resourceType"] == "TAG", body


def test_database_options_and_branches(rest):
    from pypaimon import Schema

    srv, url = rest
    tok = token(srv, "alice")
    cat = catalog(url, tok)
    cat.create_database("opts", False, {"team": "a", "tier": "gold"})

    def options():
        status, body = call(url, "GET", "/v1/acme/databases/opts", tok)
        assert status == 200 and body["name"] == "opts", body
        return body["options"]

    assert options() == {"team": "a", "tier": "gold"}
    assert cat.get_database("opts").options["tier"] == "gold"
    status, body = call(url, "POST", "/v1/acme/databases/opts", tok,
                        body={"removals": ["tier", "nope"], "updates": {"sla": "24h"}})
    assert status == 200 and body == {"removed": ["tier"], "updated": ["sla"], "missing": ["nope"]}, body
    assert options() == {"team": "a", "sla": "24h"}
    refused_status, _ = call(url, "POST", "/v1/acme/databases/opts", token(srv, "wendy"),
                             body={"removals": [], "updates": {"x": "y"}})
    assert refused_status == 403
    assert options() == {"team": "a", "sla": "24h"}

    # Branches: create from a tag, write the branch through REST commits, fast-forward main.
    cat.create_table("opts.b", Schema.from_pyarrow_schema(PK_SCHEMA, primary_keys=["id"],
                                                          options={"bucket": "1"}), False)
    write(cat.get_table("opts.b"), [{"id": 1, "v": "main"}])
    cat.create_tag("opts.b", "t1", snapshot_id=1)
    status, _ = call(url, "POST", "/v1/acme/databases/opts/tables/b/branches", tok,
                     body={"branch": "dev", "fromTag": "t1"})
    assert status == 200
    status, body = call(url, "POST", "/v1/acme/databases/opts/tables/b/branches", tok,
                        body={"branch": "dev", "fromTag": None})
    assert status == 409 and body["resourceType"] == "BRANCH", body
    status, body = call(url, "POST", "/v1/acme/databases/opts/tables/b/branches", tok,
                        body={"branch": "x", "fromTag": "nope"})
    assert status == 404 and body["resourceType"] == "TAG", body
    assert call(url, "GET", "/v1/acme/databases/opts/tables/b/branches", tok) == (200, {"branches": ["dev"]})
    write(cat.get_table("opts.b$branch_dev"), [{"id": 2, "v": "dev"}])
    assert read(cat.get_table("opts.b$branch_dev")) == [(1, "main"), (2, "dev")]
    assert read(cat.get_table("opts.b")) == [(1, "main")]
    status, _ = call(url, "POST", "/v1/acme/databases/opts/tables/b/branches/dev/forward", tok, body={})
    assert status == 200
    with tidelake.Client(srv.uri, user="alice", password="pw") as c:
        got = sorted((r["id"], r["v"]) for r in c.sql("SELECT id, v FROM opts.b").to_pylist())
    assert got == [(1, "main"), (2, "dev")]
    status, _ = call(url, "DELETE", "/v1/acme/databases/opts/tables/b/branches/dev", tok)
    assert status == 200
    assert call(url, "GET", "/v1/acme/databases/opts/tables/b/branches", tok) == (200, {"branches": []})


def test_every_rest_call_gets_an_audit_line_without_its_token(rest):
    srv, url = rest
    tok = token(srv, "wendy")
    call(url, "GET", "/v1/acme/databases/default/tables", tok)
    call(url, "POST", "/v1/acme/databases", tok, body={"name": "nope"})
    call(url, "GET", "/v1/acme/databases", "forged-token-text")
    want = [("REST GET tables", "default", "wendy", "OK"), ("REST POST databases", None, "wendy", "Forbidden"),
            ("REST GET", None, None, "Unauthorized")]
    deadline = time.monotonic() + 10
    while True:
        text = srv.audit_log.read_text() if srv.audit_log.exists() else ""
        lines = [json.loads(line) for line in text.splitlines()]
        got = [(r["method"], r["object"], r["subject"], r["status"]) for r in lines[-3:]]
        if got == want or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert got == want, lines[-5:]
    assert lines[-3]["tenant"] == "acme" and lines[-3]["peer"].startswith("127.0.0.1:")
    assert "token" in lines[-1]["auth"]
    assert tok not in text and "forged-token-text" not in text
