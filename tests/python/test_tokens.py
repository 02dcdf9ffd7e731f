"""Minted tokens and sealed tickets across the servers of one deployment (issue 14).

Servers given the same `[auth] signing_key_file` accept each other's tokens, DoGet tickets and
prepared-statement handles; a server with another key refuses them; a ticket or handle is refused to
another principal, after a changed byte, and after `ticket_ttl_seconds`. None of it changes the disk.
"""
import base64
import hashlib
import hmac
import json
import os
import time
import uuid

import pyarrow.flight as flight
import pytest

from conftest import PASSWORD, USER, hash_password
from tidelake.flight_sql import decode_fields
from test_flight_sql import _pb_bytes, flight_sql_command, statement_query
from test_hostile import files as tree


def _fields(buf):
    """The last value of each field of a protobuf message (the client's decoder)."""
    return {n: vs[-1] for n, vs in decode_fields(buf).items()}


def prepared_handle(client, options, sql):
    """CreatePreparedStatement as JDBC sends it; the (sealed) handle the server returns."""
    body = flight_sql_command("ActionCreatePreparedStatementRequest", _pb_bytes(1, sql.encode()))
    results = list(client.do_action(flight.Action("CreatePreparedStatement", body), options))
    result = _fields(_fields(results[0].body.to_pybytes())[2])
    return result[1]


def prepared_query(handle):
    return flight.FlightDescriptor.for_command(
        flight_sql_command("CommandPreparedStatementQuery", _pb_bytes(1, handle)))


def _config(tmp_path, name, key_file=None, ticket_ttl=None, token_ttl=None):
    lines = []
    if key_file or ticket_ttl or token_ttl:
        lines.append("[auth]")
        if key_file:
            lines.append(f'signing_key_file = "{key_file}"')
        if ticket_ttl:
            lines.append(f"ticket_ttl_seconds = {ticket_ttl}")
        if token_ttl:
            lines.append(f"token_ttl_seconds = {token_ttl}")
    for user, role in [(USER, "admin"), ("bob", "reader")]:
        lines += ["[[users]]", f'name = "{user}"', f'password_hash = \'{hash_password(PASSWORD)}\'',
                  f'role = "{role}"']
    path = tmp_path / f"{name}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def key_file(tmp_path):
    path = tmp_path / "signing.key"
    path.write_text(os.urandom(32).hex() + "\n")
    return path.name  # relative to the config file


def _client(srv):
    return flight.FlightClient(srv.uri)


def _login(srv, user=USER):
    c = _client(srv)
    header = c.authenticate_basic_token(user, PASSWORD)
    return c, flight.FlightCallOptions(headers=[header], timeout=60)


def test_minted_token_is_a_jwt_accepted_by_every_server_sharing_the_key(tmp_path, server_factory, key_file):
    wh = tmp_path / "wh"
    a = server_factory(warehouse=wh, config=_config(tmp_path, "a", key_file))
    b = server_factory(warehouse=wh, config=_config(tmp_path, "b", key_file))
    other = server_factory(warehouse=tmp_path / "wh2", config=_config(tmp_path, "c"))
    ca = _client(a)
    header = ca.authenticate_basic_token(USER, PASSWORD)
    token = header[1].decode()
    assert token.startswith("Bearer ")
    h, claims, sig = token[len("Bearer "):].split(".")
    pad = lambda s: s + "=" * (-len(s) % 4)  # noqa: E731
    hdr = json.loads(base64.urlsafe_b64decode(pad(h)))
    body = json.loads(base64.urlsafe_b64decode(pad(claims)))
    assert hdr["alg"] == "HS256" and hdr.get("kid")
    assert body["sub"] == USER and body["tenant"] == "tidelake" and body["roles"] == ["admin"]
    assert body["iss"] == "tidelake" and body["exp"] - body["iat"] == 3600 and body["jti"]
    bearer = flight.FlightCallOptions(headers=[header], timeout=60)
    # B never saw this token; it accepts it (nothing per token is kept anywhere).
    cb = _client(b)
    info = cb.get_flight_info(statement_query("SELECT 7 AS x"), bearer)
    assert cb.do_get(info.endpoints[0].ticket, bearer).read_all().to_pylist() == [{"x": 7}]
    # A server with its own key refuses it, saying why, without echoing it.
    co = _client(other)
    with pytest.raises(flight.FlightUnauthenticatedError) as ei:
        co.get_flight_info(statement_query("SELECT 1"), bearer)
    assert "signed by another deployment's key" in str(ei.value)
    assert sig not in str(ei.value)
    assert all(sig not in line for line in other.stderr_lines)


def test_a_ticket_from_one_server_is_redeemed_on_another(tmp_path, server_factory, key_file):
    wh = tmp_path / "wh"
    a = server_factory(warehouse=wh, config=_config(tmp_path, "a", key_file))
    b = server_factory(warehouse=wh, config=_config(tmp_path, "b", key_file))
    ca, opts_a = _login(a)
    cb, opts_b = _login(b)  # another token of the same user
    info = ca.get_flight_info(statement_query("SELECT 41 + 1 AS answer"), opts_a)
    # GetFlightInfo on A, DoGet on B (a load balancer may do that).
    assert cb.do_get(info.endpoints[0].ticket, opts_b).read_all().to_pylist() == [{"answer": 42}]
    # A prepared statement made on A runs on B.
    handle = prepared_handle(ca, opts_a, "SELECT 5 AS five")
    info = cb.get_flight_info(prepared_query(handle), opts_b)
    assert cb.do_get(info.endpoints[0].ticket, opts_b).read_all().to_pylist() == [{"five": 5}]


def test_tickets_and_handles_are_bound_to_their_principal_and_sealed(tmp_path, server_factory, key_file):
    wh = tmp_path / "wh"
    srv = server_factory(warehouse=wh, config=_config(tmp_path, "a", key_file))
    alice, opts_alice = _login(srv)
    bob, opts_bob = _login(srv, "bob")
    before = tree(wh)
    info = alice.get_flight_info(statement_query("SELECT 'mine' AS s"), opts_alice)
    ticket = info.endpoints[0].ticket
    with pytest.raises(flight.FlightError) as ei:
        bob.do_get(ticket, opts_bob).read_all()
    assert isinstance(ei.value, flight.FlightUnauthorizedError), repr(ei.value)
    assert "belongs to another principal" in str(ei.value)
    # One byte flipped anywhere in the ticket: not one this deployment issued.
    raw = bytearray(ticket.ticket)
    for i in (len(raw) // 2, len(raw) - 1):
        bad = bytearray(raw)
        bad[i] ^= 0x01
        with pytest.raises(flight.FlightUnauthenticatedError) as ei:
            alice.do_get(flight.Ticket(bytes(bad)), opts_alice).read_all()
        assert "not a ticket this deployment issued" in str(ei.value)
    handle = prepared_handle(alice, opts_alice, "SELECT 1 AS one")
    with pytest.raises(flight.FlightUnauthorizedError) as ei:
        bob.get_flight_info(prepared_query(handle), opts_bob)
    assert "belongs to another principal" in str(ei.value)
    # A ticket's sealed handle is not a prepared-statement handle.
    sealed_ticket = _fields(_fields(ticket.ticket)[2])[1]
    with pytest.raises(flight.FlightUnauthenticatedError) as ei:
        alice.get_flight_info(prepared_query(sealed_ticket), opts_alice)
    assert "not a prepared statement this deployment issued" in str(ei.value)
    assert tree(wh) == before
    assert alice.do_get(ticket, opts_alice).read_all().to_pylist() == [{"s": "mine"}]


def test_tickets_handles_and_tokens_expire(tmp_path, server_factory):
    wh = tmp_path / "wh"
    srv = server_factory(warehouse=wh, config=_config(tmp_path, "a", ticket_ttl=1, token_ttl=1))
    c, opts = _login(srv)
    info = c.get_flight_info(statement_query("SELECT 1 AS one"), opts)
    handle = prepared_handle(c, opts, "SELECT 2 AS two")
    time.sleep(2.5)
    fresh_client, fresh = _login(srv)
    with pytest.raises(flight.FlightUnauthenticatedError) as ei:
        fresh_client.do_get(info.endpoints[0].ticket, fresh).read_all()
    assert "ticket expired; request a new FlightInfo" in str(ei.value)
    with pytest.raises(flight.FlightUnauthenticatedError) as ei:
        fresh_client.get_flight_info(prepared_query(handle), fresh)
    assert "prepared statement expired; prepare it again" in str(ei.value)
    # The first token (1 s, no leeway on minted tokens) has expired by now, 2.5 s later.
    with pytest.raises(flight.FlightUnauthenticatedError) as ei:
        c.get_flight_info(statement_query("SELECT 1"), opts)
    assert "token expired" in str(ei.value)
    assert srv.alive()


def _signed_like_the_server(master, exp, alg_none=False):
    """A token as the server mints it (HS256 with the subkey of `master`, its kid), signed by
    PyJWT; or the same claims under `alg: none`."""
    import jwt

    subkey = lambda label: hmac.new(master, label, hashlib.sha256).digest()  # noqa: E731
    now = int(time.time())
    claims = {"iss": "tidelake", "aud": "tidelake", "sub": USER, "tenant": "tidelake",
              "roles": ["admin"], "iat": now - 60, "exp": exp, "jti": uuid.uuid4().hex}
    if alg_none:
        part = lambda d: base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()  # noqa: E731
        return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(claims)}."
    kid = subkey(b"tidelake key id v1")[:8].hex()
    return jwt.encode(claims, subkey(b"tidelake token v1"), algorithm="HS256", headers={"kid": kid})


def test_minted_tokens_end_at_their_exp_and_alg_none_is_named(tmp_path, server_factory, key_file):
    srv = server_factory(warehouse=tmp_path / "wh", config=_config(tmp_path, "a", key_file))
    master = bytes.fromhex((tmp_path / key_file).read_text().strip())
    c = _client(srv)
    bearer = lambda t: flight.FlightCallOptions(headers=[(b"authorization", f"Bearer {t}".encode())],  # noqa: E731
                                                timeout=60)
    now = int(time.time())
    # Signed as the server signs: accepted until its exp.
    good = _signed_like_the_server(master, now + 60)
    info = c.get_flight_info(statement_query("SELECT 3 AS three"), bearer(good))
    assert c.do_get(info.endpoints[0].ticket, bearer(good)).read_all().to_pylist() == [{"three": 3}]
    # Two seconds past its exp: refused (no leeway on the server's own tokens).
    with pytest.raises(flight.FlightUnauthenticatedError) as ei:
        c.get_flight_info(statement_query("SELECT 1"), bearer(_signed_like_the_server(master, now - 2)))
    assert "token expired" in str(ei.value)
    # The same claims under alg none: refused naming the check, on one line.
    with pytest.raises(flight.FlightUnauthenticatedError) as ei:
        c.get_flight_info(statement_query("SELECT 1"), bearer(_signed_like_the_server(master, now + 60, True)))
    assert "invalid bearer token: token algorithm 'none' is not allowed (expected HS256)" in str(ei.value)
    assert srv.alive()


def test_adbc_prepared_statements_work_with_sealed_handles(tmp_path, server_factory, key_file):
    srv = server_factory(warehouse=tmp_path / "wh", config=_config(tmp_path, "a", key_file))
    import adbc_driver_flightsql.dbapi as flightsql

    with flightsql.connect(srv.uri, db_kwargs={"username": USER, "password": PASSWORD}, autocommit=True) as conn:
        with conn.cursor() as cur:
            cur.execute("SELECT CAST(? AS BIGINT) * 2 AS d", parameters=(21,))
            assert cur.fetchall() == [(42,)]


def test_closed_session_token_stops_working_on_that_server(tmp_path, server_factory, key_file):
    srv = server_factory(warehouse=tmp_path / "wh", config=_config(tmp_path, "a", key_file))
    c, opts = _login(srv)
    list(c.do_action(flight.Action("CloseSession", b""), opts))
    with pytest.raises(flight.FlightUnauthenticatedError) as ei:
        c.get_flight_info(statement_query("SELECT 1"), opts)
    assert "the session was closed" in str(ei.value)
