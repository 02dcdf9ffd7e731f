"""TLS on the Flight port (issue 14; reliability.md §4.5 "Transport"): ADBC over `grpc+tls://` and
pyarrow.flight trusting the CA connect; plaintext to the TLS port, TLS 1.1 and (with mTLS) a client
without a certificate fail their handshake and the server stays up. Certificates are made with
`cryptography`.
"""
import datetime
import ipaddress
import socket
import ssl
import time

import pyarrow.flight as flight
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from conftest import PASSWORD, USER, hash_password
from test_flight_sql import statement_query


def _name(cn):
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _cert(subject, issuer_name, key, signer, ca=False, sans=(), usage=None):
    now = datetime.datetime.now(datetime.timezone.utc)
    b = (x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(issuer_name)
         .public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if sans:
        b = b.add_extension(x509.SubjectAlternativeName(list(sans)), critical=False)
    if usage:
        b = b.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    return b.sign(signer, hashes.SHA256())


def _pem(obj):
    if isinstance(obj, x509.Certificate):
        return obj.public_bytes(serialization.Encoding.PEM)
    return obj.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """Files of a CA, a server certificate (localhost, 127.0.0.1) and a client certificate."""
    d = tmp_path_factory.mktemp("pki")
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _cert("tidelake test CA", _name("tidelake test CA"), ca_key, ca_key, ca=True)
    srv_key = ec.generate_private_key(ec.SECP256R1())
    srv = _cert("localhost", ca.subject, srv_key, ca_key,
                sans=[x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))],
                usage=ExtendedKeyUsageOID.SERVER_AUTH)
    cli_key = ec.generate_private_key(ec.SECP256R1())
    cli = _cert("a client", ca.subject, cli_key, ca_key, usage=ExtendedKeyUsageOID.CLIENT_AUTH)
    files = {"ca.pem": _pem(ca), "server.pem": _pem(srv), "server.key": _pem(srv_key),
             "client.pem": _pem(cli), "client.key": _pem(cli_key)}
    for name, data in files.items():
        (d / name).write_bytes(data)
    return d


def _tls_server(server_factory, pki, tmp_path, mtls=False):
    cfg = tmp_path / "tls.toml"
    lines = [f"[[users]]\nname = \"{USER}\"\npassword_hash = '{hash_password(PASSWORD)}'",
             f"[tls]\ncert_file = \"{pki / 'server.pem'}\"\nkey_file = \"{pki / 'server.key'}\""]
    if mtls:
        lines.append(f"client_ca_file = \"{pki / 'ca.pem'}\"")
    cfg.write_text("\n".join(lines) + "\n")
    return server_factory(config=cfg)


def _flight_tls(srv, pki, **kw):
    return flight.FlightClient(f"grpc+tls://localhost:{srv.port}",
                               tls_root_certs=(pki / "ca.pem").read_bytes(), **kw)


def _select(client):
    opts = flight.FlightCallOptions(headers=[client.authenticate_basic_token(USER, PASSWORD)], timeout=20)
    info = client.get_flight_info(statement_query("SELECT 7 AS seven"), opts)
    return client.do_get(info.endpoints[0].ticket, opts).read_all().to_pylist()


def test_adbc_and_pyarrow_connect_over_tls(server_factory, pki, tmp_path):
    srv = _tls_server(server_factory, pki, tmp_path)
    c = _flight_tls(srv, pki)
    assert _select(c) == [{"seven": 7}]
    c.close()
    import adbc_driver_flightsql.dbapi as flightsql

    kwargs = {"username": USER, "password": PASSWORD,
              "adbc.flight.sql.client_option.tls_root_certs": (pki / "ca.pem").read_text()}
    with flightsql.connect(f"grpc+tls://localhost:{srv.port}", db_kwargs=kwargs, autocommit=True) as conn:
        with conn.cursor() as cur:
            cur.execute("SELECT 1 + 1 AS two")
            assert cur.fetchall() == [(2,)]


def test_plaintext_and_old_tls_fail_cleanly(server_factory, pki, tmp_path):
    srv = _tls_server(server_factory, pki, tmp_path)
    started = time.monotonic()
    plain = flight.FlightClient(f"grpc://127.0.0.1:{srv.port}")
    with pytest.raises(flight.FlightError):
        plain.authenticate_basic_token(USER, PASSWORD, flight.FlightCallOptions(timeout=5))
    plain.close()
    assert time.monotonic() - started < 10
    # TLS 1.1: rustls speaks 1.2 and 1.3 only.
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
        ctx.minimum_version = ssl.TLSVersion.TLSv1_1
        ctx.maximum_version = ssl.TLSVersion.TLSv1_1
    except (ValueError, ssl.SSLError):
        pytest.skip("this Python's OpenSSL cannot offer TLS 1.1")
    with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as raw:
        with pytest.raises((ssl.SSLError, ConnectionResetError, OSError)):
            with ctx.wrap_socket(raw, server_hostname="localhost") as tls:
                tls.do_handshake()
    assert srv.alive()
    c = _flight_tls(srv, pki)
    assert _select(c) == [{"seven": 7}]
    c.close()


def test_mtls_requires_a_client_certificate(server_factory, pki, tmp_path):
    srv = _tls_server(server_factory, pki, tmp_path, mtls=True)
    without = _flight_tls(srv, pki)
    with pytest.raises(flight.FlightError):
        without.authenticate_basic_token(USER, PASSWORD, flight.FlightCallOptions(timeout=5))
    without.close()
    with_cert = _flight_tls(srv, pki, cert_chain=(pki / "client.pem").read_bytes(),
                            private_key=(pki / "client.key").read_bytes())
    assert _select(with_cert) == [{"seven": 7}]
    with_cert.close()
    assert srv.alive()


def test_a_tls_config_that_cannot_work_stops_the_server(tmp_path, pki):
    from conftest import ServerStartError, start_server

    (tmp_path / "bad.key").write_text("-----BEGIN PRIVATE KEY-----\nnot a key\n-----END PRIVATE KEY-----\n")
    for tls, expected in [
        (f'cert_file = "{pki / "server.pem"}"\nkey_file = "missing.key"', "key_file"),
        (f'cert_file = "{pki / "server.pem"}"\nkey_file = "bad.key"', "[tls]"),
        (f'cert_file = "{pki / "ca.pem"}"\nkey_file = "{pki / "ca.pem"}"', "[tls]"),
    ]:
        cfg = tmp_path / "tidelake.toml"
        cfg.write_text(f"[tls]\n{tls}\n")
        with pytest.raises(ServerStartError) as e:
            srv = start_server(tmp_path / "warehouse", config=cfg, label="bad tls server")
            srv.stop()
        assert expected in str(e.value), str(e.value)[-2000:]
