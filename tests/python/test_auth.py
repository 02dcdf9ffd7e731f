"""Bearer JWTs from identity providers (issue 14; reliability.md §4.5 "Auth"), minted here with PyJWT
and `cryptography` as a real IdP would: RS256 keys from a JWKS file (rotated while the server runs),
ES256 and EdDSA from another, an HS256 secret from the environment. Every forgery is Unauthenticated
with a message naming the failed check and never the token; the server stays up and nothing changes
on disk.
"""
import base64
import hashlib
import hmac
import json
import time

import jwt
import pyarrow.flight as flight
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm

from conftest import PASSWORD, USER, hash_password
from test_flight_sql import statement_query
from test_hostile import files

RS = "https://idp.example.test"
EC = "https://keys.example.test"
HS = "https://hs.example.test"
AUD = "tidelake"
HS_SECRET = "an HS256 secret of well over thirty-two bytes"


def _rsa():
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _jwk(alg_cls, key, kid, alg):
    d = alg_cls.to_jwk(key.public_key(), as_dict=True)
    d.update({"kid": kid, "alg": alg, "use": "sig"})
    return d


class IdP:
    def __init__(self, tmp_path):
        self.k1, self.k2, self.other = _rsa(), _rsa(), _rsa()
        self.e1 = ec.generate_private_key(ec.SECP256R1())
        self.d1 = ed25519.Ed25519PrivateKey.generate()
        self.rs_jwks = tmp_path / "rs.jwks.json"
        self.ec_jwks = tmp_path / "ec.jwks.json"
        self.write_rs(["k1", "k2"])
        self.ec_jwks.write_text(json.dumps({"keys": [
            _jwk(ECAlgorithm, self.e1, "e1", "ES256"), _jwk(OKPAlgorithm, self.d1, "d1", "EdDSA")]}))

    def write_rs(self, kids):
        keys = {"k1": self.k1, "k2": self.k2}
        self.rs_jwks.write_text(json.dumps({"keys": [_jwk(RSAAlgorithm, keys[k], k, "RS256") for k in kids]}))

    def claims(self, iss=RS, **over):
        now = int(time.time())
        c = {"iss": iss, "aud": AUD, "sub": "ann", "iat": now, "exp": now + 300, "roles": ["reader"]}
        c.update(over)
        return {k: v for k, v in c.items() if v is not None}

    def rs(self, kid="k1", key=None, headers=None, **claims):
        key = key or {"k1": self.k1, "k2": self.k2}[kid]
        return jwt.encode(self.claims(**claims), key, algorithm="RS256", headers={"kid": kid, **(headers or {})})


def _b64(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def raw_token(header, claims, sign=lambda msg: b""):
    """A token assembled by hand (PyJWT refuses to make the malicious ones)."""
    msg = _b64(json.dumps(header).encode()) + "." + _b64(json.dumps(claims).encode())
    return msg + "." + _b64(sign(msg.encode()))


CONFIG = """
[[users]]
name = "{user}"
password_hash = '{pw}'
[[auth.issuers]]
issuer = "{rs}"
audience = "{aud}"
algorithms = ["RS256"]
jwks_file = "rs.jwks.json"
[[auth.issuers]]
issuer = "{ec}"
audience = "{aud}"
algorithms = ["ES256", "EdDSA"]
jwks_file = "ec.jwks.json"
roles_claim = "groups"
leeway_seconds = 0
[[auth.issuers]]
issuer = "{hs}"
audience = "{aud}"
algorithms = ["HS256"]
hs256_secret_env = "TIDELAKE_TEST_HS_SECRET"
"""


@pytest.fixture(scope="module")
def idp_server(tmp_path_factory):
    from conftest import start_server

    tmp = tmp_path_factory.mktemp("auth")
    idp = IdP(tmp)
    cfg = tmp / "tidelake.toml"
    cfg.write_text(CONFIG.format(user=USER, pw=hash_password(PASSWORD), rs=RS, ec=EC, hs=HS, aud=AUD))
    srv = start_server(tmp / "warehouse", config=cfg, label="idp server",
                       env_extra={"TIDELAKE_TEST_HS_SECRET": HS_SECRET})
    try:
        yield srv, idp
    finally:
        rc = srv.stop()
        assert rc == 0, f"server exit {rc}:\n" + srv.stderr_since(0)[-4000:]


def query(srv, token, sql="SELECT 1 AS one"):
    c = flight.FlightClient(srv.uri)
    opts = flight.FlightCallOptions(headers=[(b"authorization", b"Bearer " + token.encode())], timeout=30)
    try:
        info = c.get_flight_info(statement_query(sql), opts)
        return c.do_get(info.endpoints[0].ticket, opts).read_all().to_pylist()
    finally:
        c.close()


def refused(srv, token, reason, error=flight.FlightUnauthenticatedError):
    before = files(srv.warehouse)
    mark = len(srv.stderr_lines)
    with pytest.raises(error) as ei:
        query(srv, token)
    text = str(ei.value)
    assert reason in text, text
    for part in token.split("."):
        if len(part) > 8:
            assert part not in text, "the token was echoed"
            assert part not in srv.stderr_since(mark), "the token was logged"
    assert srv.alive()
    assert files(srv.warehouse) == before
    # Another principal is still answered.
    c = flight.FlightClient(srv.uri)
    header = c.authenticate_basic_token(USER, PASSWORD)
    info = c.get_flight_info(statement_query("SELECT 2 AS two"), flight.FlightCallOptions(headers=[header]))
    assert c.do_get(info.endpoints[0].ticket, flight.FlightCallOptions(headers=[header])).read_all().num_rows == 1
    c.close()
    return text


def test_identity_provider_tokens_of_every_pinned_algorithm_are_accepted(idp_server):
    srv, idp = idp_server
    assert query(srv, idp.rs()) == [{"one": 1}]
    assert query(srv, idp.rs("k2")) == [{"one": 1}]
    es = jwt.encode(idp.claims(iss=EC, roles=None, groups="reader"), idp.e1, algorithm="ES256", headers={"kid": "e1"})
    assert query(srv, es) == [{"one": 1}]
    ed = jwt.encode(idp.claims(iss=EC, roles=None, groups=["writer"]), idp.d1, algorithm="EdDSA",
                    headers={"kid": "d1"})
    assert query(srv, ed) == [{"one": 1}]
    hs = jwt.encode(idp.claims(iss=HS), HS_SECRET, algorithm="HS256")
    assert query(srv, hs) == [{"one": 1}]


def test_a_readers_token_cannot_write(idp_server):
    srv, idp = idp_server
    with pytest.raises(flight.FlightUnauthorizedError) as ei:
        query(srv, idp.rs(), "CREATE TABLE default.t_reader (a INT)")
    assert "needs the admin role" in str(ei.value)
    refused(srv, idp.rs(roles=["guest"]), "the token grants no tidelake role", flight.FlightUnauthorizedError)


def test_forged_and_malformed_tokens_are_refused(idp_server):
    srv, idp = idp_server
    now = int(time.time())
    pub_pem = idp.k1.public_key().public_bytes(serialization.Encoding.PEM,
                                                serialization.PublicFormat.SubjectPublicKeyInfo)
    cases = [
        ("abc", "malformed token"),
        ("a.b.c", "malformed token"),
        (idp.rs(key=idp.other), "signature does not verify"),
        # `alg: none` names the check and what is accepted: HS256 (minted) and the issuers' pins.
        (raw_token({"alg": "none", "typ": "JWT"}, idp.claims()),
         "token algorithm 'none' is not allowed (expected HS256/RS256/ES256/EdDSA)"),
        # HS256 with the RSA public key as the secret: the issuer is pinned to RS256.
        (raw_token({"alg": "HS256", "typ": "JWT", "kid": "k1"}, idp.claims(),
                   lambda m: hmac.new(pub_pem, m, hashlib.sha256).digest()), "algorithm not allowed for this issuer"),
        (idp.rs("k1", headers={"kid": "k9"}), "unknown key id"),
        (jwt.encode(idp.claims(), idp.k1, algorithm="RS256"), "token has no kid"),
        (idp.rs(aud=None), "token lacks the 'aud' claim"),
        (idp.rs(aud="someone-else"), "wrong audience"),
        (idp.rs(iss="https://evil.example.test"), "unknown issuer"),
        (idp.rs(iss=None), "token lacks the 'iss' claim"),
        (idp.rs(exp=now - 120), "token expired"),
        (idp.rs(nbf=now + 600), "token not yet valid (nbf)"),
        (idp.rs(sub=None), "token lacks the 'sub' claim"),
        (idp.rs(headers={"jku": "https://evil.example.test/jwks.json"}), "jku/x5u headers are refused"),
        (idp.rs(headers={"x5u": "https://evil.example.test/cert.pem"}), "jku/x5u headers are refused"),
        (idp.rs(pad="x" * 9000), "too long"),
        # The HS256 issuer's secret, but claiming the RS256 issuer.
        (jwt.encode(idp.claims(), HS_SECRET, algorithm="HS256", headers={"kid": "k1"}),
         "algorithm not allowed for this issuer"),
        # ES256 issuer, zero leeway: expired a second ago.
        (jwt.encode(idp.claims(iss=EC, exp=now - 2, groups="reader"), idp.e1, algorithm="ES256",
                    headers={"kid": "e1"}), "token expired"),
    ]
    for token, reason in cases:
        refused(srv, token, reason)


def test_expiry_honours_the_leeway(idp_server):
    srv, idp = idp_server
    now = int(time.time())
    assert query(srv, idp.rs(exp=now - 10)) == [{"one": 1}], "30 s leeway"
    refused(srv, idp.rs(exp=now - 40), "token expired")


def test_a_huge_header_fails_the_call_not_the_server(idp_server):
    srv, idp = idp_server
    c = flight.FlightClient(srv.uri)
    opts = flight.FlightCallOptions(headers=[(b"authorization", b"Bearer " + b"A" * 100_000)], timeout=30)
    with pytest.raises(flight.FlightError):
        c.get_flight_info(statement_query("SELECT 1"), opts)
    c.close()
    assert query(srv, idp.rs()) == [{"one": 1}]


def test_rotated_out_keys_stop_working_and_new_ones_start(idp_server):
    srv, idp = idp_server
    old, new = idp.rs("k1"), idp.rs("k2")
    assert query(srv, old) == [{"one": 1}]
    idp.write_rs(["k2"])
    deadline = time.monotonic() + 10
    while True:
        try:
            query(srv, old)
        except flight.FlightUnauthenticatedError as e:
            assert "unknown key id" in str(e)
            break
        assert time.monotonic() < deadline, "the JWKS file was not reloaded"
        time.sleep(0.3)
    assert query(srv, new) == [{"one": 1}]
    # A broken JWKS keeps the last good keys.
    idp.rs_jwks.write_text("{not json")
    time.sleep(1.5)
    assert query(srv, new) == [{"one": 1}]
    idp.write_rs(["k1", "k2"])
    deadline = time.monotonic() + 10
    while True:
        try:
            assert query(srv, old) == [{"one": 1}]
            break
        except flight.FlightUnauthenticatedError:
            assert time.monotonic() < deadline
            time.sleep(0.3)


def test_an_expired_handshake_token_is_not_replayable(tmp_path, server_factory):
    cfg = tmp_path / "short.toml"
    cfg.write_text(f"[auth]\ntoken_ttl_seconds = 1\n[[users]]\nname = \"{USER}\"\npassword_hash = '{hash_password(PASSWORD)}'\n")
    srv = server_factory(config=cfg)
    c = flight.FlightClient(srv.uri)
    header = c.authenticate_basic_token(USER, PASSWORD)
    token = header[1].decode()[len("Bearer "):]
    assert query(srv, token) == [{"one": 1}]
    time.sleep(3)  # 1 s lifetime, no leeway on minted tokens
    refused(srv, token, "token expired")
    c.close()


def test_tenant_claims_choose_the_tenant(tmp_path, server_factory):
    idp = IdP(tmp_path)
    cfg = tmp_path / "tenants.toml"
    cfg.write_text(f"""
[[tenants]]
name = "acme"
[[tenants]]
name = "beta"
[[users]]
name = "{USER}"
password_hash = '{hash_password(PASSWORD)}'
tenant = "acme"
[[auth.issuers]]
issuer = "{RS}"
audience = "{AUD}"
algorithms = ["RS256"]
jwks_file = "rs.jwks.json"
tenant_claim = "org"
""")
    srv = server_factory(config=cfg)
    admin = idp.rs(org="beta", roles=["admin"])
    query(srv, admin, "CREATE TABLE default.only_beta (a INT)")
    assert query(srv, admin, "SELECT count(*) AS n FROM beta.default.only_beta") == [{"n": 0}]
    with pytest.raises(Exception) as ei:
        query(srv, idp.rs(org="acme"), "SELECT * FROM default.only_beta")
    assert "does not exist" in str(ei.value)
    refused(srv, idp.rs(org="gamma"), "tenant 'gamma' is not served here", flight.FlightUnauthorizedError)
    refused(srv, idp.rs(), "the token names no tenant", flight.FlightUnauthorizedError)
