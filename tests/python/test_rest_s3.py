"""The REST catalog on an `s3://` warehouse (issue 19): pypaimon brings no storage keys of its own. It asks
`GET …/token` for each table and gets temporary keys that STS (moto's) issued for that table's prefix
alone, read-only for a reader, never the server's own keys. With them it writes and reads the table,
and Flight SQL reads the same rows. The session policy tidelake sent and the session name are read back
from moto's record of the AssumeRole call. Without `[rest] data_token_role_arn` there is no data token,
and an unreachable STS is a 503 with Paimon's error body.
"""
import json
import time
import urllib.request

import pytest

import tidelake
from conftest import announced, hash_password, start_server, stop_cleanly
from test_rest_catalog import PK_SCHEMA, REST_LINE, call, catalog, read, token, write
from test_s3 import KEY, SECRET, _s3, _start_moto, aws_env, bucket, endpoint, keys  # noqa: F401 (fixtures)

ROLE = "arn:aws:iam::123456789012:role/tidelake-data"

CONFIG = """
[rest]
listen = "127.0.0.1:0"
data_token_role_arn = "{role}"
data_token_seconds = 7200
{extra}
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
def sts():
    """A moto of its own for STS: its record of AssumeRole calls is read back (moto's model dump
    fails once S3 objects of deleted buckets are around, as in the shared one)."""
    proc, url = _start_moto()
    yield url
    proc.kill()


def _serve(tmp, endpoint, warehouse, extra=""):
    cfg = tmp / "tidelake.toml"
    cfg.write_text(CONFIG.replace("{role}", ROLE).replace("{extra}", extra)
                   .replace("{pw}", hash_password("pw")))
    srv = start_server(warehouse, config=cfg, label="rest-s3", env_extra=aws_env(endpoint))
    return srv, announced(srv, REST_LINE)


def assumed_role(sts, access_key_id):
    """moto's record of the AssumeRole call that issued `access_key_id`."""
    data = json.loads(urllib.request.urlopen(sts + "/moto-api/data.json", timeout=10).read())
    for role in data.get("sts", {}).get("AssumedRole", []):
        if role["access_key_id"] == access_key_id:
            return role
    pytest.fail(f"moto has no assumed role for {access_key_id}")


def statements(policy, effect, action):
    return [s for s in policy["Statement"] if s["Effect"] == effect and action in s["Action"]]


def test_pypaimon_works_on_s3_with_the_tables_scoped_keys_only(tmp_path, endpoint, bucket, sts):
    srv, url = _serve(tmp_path, endpoint, f"s3://{bucket}/lake", extra=f'sts_endpoint = "{sts}"')
    try:
        admin, reader = token(srv, "alice"), token(srv, "mallory")
        status, cfg = call(url, "GET", "/v1/config?warehouse=acme", admin)
        assert status == 200 and cfg["overrides"]["data-token.enabled"] == "true", cfg

        # pypaimon's options name no storage keys: every file it touches goes through /token.
        cat = catalog(url, admin)
        cat.create_database("db", False)
        from pypaimon import Schema

        cat.create_table("db.t", Schema.from_pyarrow_schema(
            PK_SCHEMA, primary_keys=["id"], options={"bucket": "1"}), False)
        t = cat.get_table("db.t")
        write(t, [{"id": 1, "v": "a"}, {"id": 2, "v": "b"}])
        write(t, [{"id": 2, "v": "B"}, {"id": 3, "v": "c"}])
        assert read(cat.get_table("db.t")) == [(1, "a"), (2, "B"), (3, "c")]

        # The same rows through Flight SQL, from the same S3 objects.
        with tidelake.Client(srv.uri, user="alice", password="pw") as c:
            got = [(r["id"], r["v"]) for r in c.sql("SELECT id, v FROM db.t ORDER BY id").to_pylist()]
        assert got == [(1, "a"), (2, "B"), (3, "c")]
        assert any(k.startswith("lake/tenants/acme/db.db/t/bucket-0/") for k in keys(_s3(endpoint), bucket))

        # The keys: temporary, both clients' names, never the server's own.
        status, got = call(url, "GET", "/v1/acme/databases/db/tables/t/token", admin)
        assert status == 200, got
        tok = got["token"]
        assert tok["fs.s3.accessKeyId"] == tok["s3.access-key"] != KEY
        assert tok["fs.s3.accessKeySecret"] == tok["s3.secret-key"] != SECRET
        assert tok["fs.s3.securityToken"] == tok["s3.session.token"]
        assert tok["fs.s3.endpoint"] == tok["s3.endpoint"] == endpoint
        assert tok["fs.s3.path-style-access"] == "true"
        left = got["expiresAtMillis"] / 1000 - time.time()
        assert 7000 < left <= 7200, left
        assert SECRET not in json.dumps(got).replace(tok["fs.s3.accessKeySecret"], "")

        # What tidelake asked STS for: the admin's keys may write the table's files but not its metadata.
        role = assumed_role(sts, tok["fs.s3.accessKeyId"])
        assert role["role_arn"] == ROLE and role["session_name"] == "tidelake-acme-alice"
        policy = json.loads(role["policy"])
        prefix = f"arn:aws:s3:::{bucket}/lake/tenants/acme/db.db/t"
        assert statements(policy, "Allow", "s3:PutObject")[0]["Resource"] == [prefix + "/*"]
        denied = statements(policy, "Deny", "s3:PutObject")[0]["Resource"]
        assert prefix + "/snapshot/*" in denied and prefix + "/schema/*" in denied
        listing = statements(policy, "Allow", "s3:ListBucket")[0]
        assert listing["Condition"]["StringLike"]["s3:prefix"] == \
            ["lake/tenants/acme/db.db/t", "lake/tenants/acme/db.db/t/*"]

        # A second ask within the lifetime gets the same keys: pypaimon's asks and these two made one
        # STS call for alice (pypaimon reached moto at all only through the token's endpoint).
        assert call(url, "GET", "/v1/acme/databases/db/tables/t/token", admin)[1]["token"] == tok
        data = json.loads(urllib.request.urlopen(sts + "/moto-api/data.json", timeout=10).read())
        sessions = [r["session_name"] for r in data["sts"]["AssumedRole"]]
        assert sessions.count("tidelake-acme-alice") == 1, sessions

        # A reader's keys are read-only, and its session says who it is.
        status, got = call(url, "GET", "/v1/acme/databases/db/tables/t/token", reader)
        assert status == 200, got
        role = assumed_role(sts, got["token"]["fs.s3.accessKeyId"])
        assert role["session_name"] == "tidelake-acme-mallory"
        policy = json.loads(role["policy"])
        assert statements(policy, "Allow", "s3:PutObject") == []
        assert statements(policy, "Allow", "s3:GetObject")[0]["Resource"] == [prefix + "/*"]
        assert read(catalog(url, reader).get_table("db.t")) == [(1, "a"), (2, "B"), (3, "c")]

        # Bad input: no keys without a token, for an unknown table, or for another tenant's catalog.
        before = sorted(keys(_s3(endpoint), bucket))
        assert call(url, "GET", "/v1/acme/databases/db/tables/t/token")[0] == 401
        status, body = call(url, "GET", "/v1/acme/databases/db/tables/nope/token", admin)
        assert (status, body["resourceType"]) == (404, "TABLE"), body
        assert call(url, "GET", "/v1/beta/databases/db/tables/t/token", admin)[0] == 403
        assert call(url, "POST", "/v1/acme/databases/db/tables/t/token", reader, body={})[0] == 403
        assert sorted(keys(_s3(endpoint), bucket)) == before

        # The partitions endpoint answers an unpartitioned table with none.
        status, got = call(url, "GET", "/v1/acme/databases/db/tables/t/partitions", reader)
        assert (status, got["partitions"]) == (200, []), got
    finally:
        stop_cleanly(srv)


def test_an_unreachable_sts_is_503_and_a_local_warehouse_has_no_tokens(tmp_path, endpoint, bucket):
    (tmp_path / "a").mkdir()
    srv, url = _serve(tmp_path / "a", endpoint, f"s3://{bucket}/lake",
                      extra='sts_endpoint = "http://127.0.0.1:9"')
    try:
        admin = token(srv, "alice")
        cat = catalog(url, admin)
        cat.create_database("db", False)
        status, body = call(url, "GET", "/v1/acme/databases/db/tables/t/token", admin)
        assert status == 404, body
        from pypaimon import Schema

        # Creating the table needs no keys (the server writes its schema); writing data does.
        cat.create_table("db.t", Schema.from_pyarrow_schema(PK_SCHEMA, primary_keys=["id"]), False)
        status, body = call(url, "GET", "/v1/acme/databases/db/tables/t/token", admin)
        assert status == 503 and body["code"] == 503, body
        assert "STS AssumeRole" in body["message"] and "127.0.0.1:9" in body["message"], body
    finally:
        stop_cleanly(srv)

    # A local warehouse: /v1/config does not turn data tokens on, and /token says why there are none.
    (tmp_path / "b").mkdir()
    srv, url = _serve(tmp_path / "b", endpoint, tmp_path / "b" / "warehouse")
    try:
        admin = token(srv, "alice")
        status, cfg_body = call(url, "GET", "/v1/config?warehouse=acme", admin)
        assert status == 200 and "data-token.enabled" not in cfg_body["overrides"], cfg_body
        cat = catalog(url, admin)
        cat.create_database("db", False)
        from pypaimon import Schema

        cat.create_table("db.t", Schema.from_pyarrow_schema(PK_SCHEMA, primary_keys=["id"]), False)
        status, body = call(url, "GET", "/v1/acme/databases/db/tables/t/token", admin)
        assert status == 501 and "s3:// warehouses only" in body["message"], body
    finally:
        stop_cleanly(srv)


def test_partitions_are_listed_with_their_statistics(tmp_path, endpoint, bucket):
    srv, url = _serve(tmp_path, endpoint, f"s3://{bucket}/lake")
    try:
        admin = token(srv, "alice")
        with tidelake.Client(srv.uri, user="alice", password="pw") as c:
            c.execute("CREATE DATABASE db")
            c.execute("CREATE TABLE db.p (dt STRING NOT NULL, id BIGINT NOT NULL, v STRING, "
                      "PRIMARY KEY (dt, id)) PARTITIONED BY (dt) WITH ('bucket' = '2')")
            c.execute("INSERT INTO db.p VALUES ('2024-01-01', 1, 'a'), ('2024-01-01', 2, 'b'), "
                      "('2024-01-02', 3, 'c')")
            c.execute("INSERT INTO db.p VALUES ('2024-01-03', 4, 'd')")

        status, got = call(url, "GET", "/v1/acme/databases/db/tables/p/partitions", admin)
        assert status == 200, got
        parts = {p["spec"]["dt"]: p for p in got["partitions"]}
        assert sorted(parts) == ["2024-01-01", "2024-01-02", "2024-01-03"]
        assert parts["2024-01-01"]["recordCount"] == 2 and parts["2024-01-01"]["fileCount"] >= 1
        assert all(p["fileSizeInBytes"] > 0 and p["lastFileCreationTime"] > 0 for p in parts.values())

        # Paged and filtered as Paimon's clients ask.
        status, page1 = call(url, "GET", "/v1/acme/databases/db/tables/p/partitions?maxResults=2", admin)
        assert [p["spec"]["dt"] for p in page1["partitions"]] == ["2024-01-01", "2024-01-02"]
        status, page2 = call(url, "GET", "/v1/acme/databases/db/tables/p/partitions?maxResults=2&pageToken="
                             + urllib.request.quote(page1["nextPageToken"]), admin)
        assert [p["spec"]["dt"] for p in page2["partitions"]] == ["2024-01-03"]
        assert page2["nextPageToken"] is None
        status, some = call(url, "GET", "/v1/acme/databases/db/tables/p/partitions?partitionNamePattern="
                            + urllib.request.quote("dt=2024-01-0%"), admin)
        assert len(some["partitions"]) == 3
        status, one = call(url, "GET", "/v1/acme/databases/db/tables/p/partitions?partitionNamePattern="
                           + urllib.request.quote("dt=2024-01-02"), admin)
        assert [p["spec"] for p in one["partitions"]] == [{"dt": "2024-01-02"}]

        # pypaimon's own listing goes through the endpoint and agrees.
        listed = catalog(url, admin).list_partitions_paged("db.p")
        assert sorted(p.spec["dt"] for p in listed.elements) == sorted(parts)
    finally:
        stop_cleanly(srv)
