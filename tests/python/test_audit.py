"""The audit log (issue 14): one JSON line per RPC with tenant, subject, method, object, status, rows,
bytes and duration, for handshakes, queries, refused logins and tokens, ingest and subscriptions;
never a password, a token, SQL text or a bound parameter value.
"""
import json
import time

import pyarrow as pa
import pyarrow.flight as flight

import tidelake
from tidelake.protocol import encode_ticket

from conftest import start_configured, stop_cleanly
from test_flight_sql import statement_query

CONFIG = """
[[users]]
name = "alice"
password_hash = '{pw}'
[audit]
file = "audit.log"
"""

PASSWORD = "pw"
PARAM = "secret-param-4242"


def _lines(path, objects, timeout=20):
    """The audit lines once a line names each of `objects`: a streamed call's line is written when
    its stream ends (a cancelled subscription's when the server sees the cancel), so a count of lines
    can be reached before the last call's line is there."""
    deadline = time.monotonic() + timeout
    while True:
        lines = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
        seen = {line.get("object") for line in lines}
        if all(o in seen for o in objects) or time.monotonic() > deadline:
            return lines
        time.sleep(0.1)


def test_every_call_gets_one_line_and_no_secret(tmp_path):
    srv = start_configured(tmp_path, CONFIG, "audit server", password=PASSWORD)
    log = tmp_path / "audit.log"
    try:
        c = flight.FlightClient(srv.uri)
        header = c.authenticate_basic_token("alice", PASSWORD)
        token = header[1].decode()[len("Bearer "):]
        opts = flight.FlightCallOptions(headers=[header], timeout=30)
        secret_sql = f"SELECT '{PARAM}' AS p, value FROM generate_series(1, 5)"
        info = c.get_flight_info(statement_query(secret_sql), opts)
        assert c.do_get(info.endpoints[0].ticket, opts).read_all().num_rows == 5
        try:
            c.authenticate_basic_token("alice", "wrong-password-777")
        except flight.FlightUnauthenticatedError:
            pass
        bad = flight.FlightCallOptions(headers=[(b"authorization", b"Bearer " + token[:-4].encode() + b"AAAA")])
        try:
            c.get_flight_info(statement_query("SELECT 1"), bad)
        except flight.FlightUnauthenticatedError:
            pass
        with tidelake.Client(srv.uri, user="alice", password=PASSWORD) as client:
            client.execute("CREATE TABLE default.t (id BIGINT NOT NULL, v STRING, PRIMARY KEY (id)) WITH ('bucket' = '1')")
            client.execute("INSERT INTO default.t VALUES ($1, $2)", [1, PARAM])
        import adbc_driver_flightsql.dbapi as flightsql
        with flightsql.connect(srv.uri, db_kwargs={"username": "alice", "password": PASSWORD}, autocommit=True) as conn:
            with conn.cursor() as cur:
                cur.adbc_ingest("t2", pa.table({"id": pa.array([1, 2, 3], pa.int64())}), mode="create",
                                db_schema_name="default")
        sub = c.do_get(flight.Ticket(encode_ticket("default.t", "from-snapshot", snapshot_id=1)), opts)
        sub.read_chunk()
        sub.cancel()
        c.close()
        lines = _lines(log, ["subscribe default.t", "ingest default.t2"])
    finally:
        stop_cleanly(srv)
    text = log.read_text()
    for secret in [PASSWORD, "wrong-password-777", token, token.split(".")[2], PARAM, "generate_series"]:
        assert secret not in text, f"{secret!r} is in the audit log"
    by_method = {}
    for line in lines:
        assert set(line) >= {"time", "tenant", "subject", "method", "object", "status", "rows", "bytes_out",
                             "duration_ms", "peer"}, line
        assert line["time"].endswith("Z") and line["peer"].startswith("127.0.0.1:")
        by_method.setdefault(line["method"], []).append(line)
    handshakes = by_method["Handshake"]
    assert any(h["status"] == "OK" and h["subject"] == "alice" and h["tenant"] == "tidelake" for h in handshakes)
    assert any(h["status"] == "UNAUTHENTICATED" and h["auth"] == "invalid user name or password" for h in handshakes)
    infos = by_method["GetFlightInfo"]
    assert any(i["status"] == "UNAUTHENTICATED" and "invalid bearer token" in i["auth"] and i["subject"] is None
               for i in infos), infos
    statement = [i for i in infos if i["status"] == "OK" and (i["object"] or "").startswith("statement #")]
    assert statement, infos
    gets = [g for g in by_method["DoGet"] if g["object"] == statement[0]["object"]]
    assert gets and gets[0]["rows"] == 5 and gets[0]["bytes_out"] > 0 and gets[0]["status"] == "OK", by_method["DoGet"]
    subs = [g for g in by_method["DoGet"] if g["object"] == "subscribe default.t"]
    assert subs and subs[0]["status"] in ("CANCELLED", "OK"), by_method["DoGet"]
    puts = [p for p in by_method.get("DoPut", []) if p["object"] == "ingest default.t2"]
    assert puts and puts[0]["rows"] == 3 and puts[0]["status"] == "OK", by_method.get("DoPut")
    assert all(isinstance(line["duration_ms"], int) for line in lines)
