"""Fixtures for the end-to-end tests: one `tidelake serve` process per session, real clients against it.

The server binary is `$TIDELAKE_BIN` (default `target/debug/tidelake`, relative to the repository root).
Its stderr is drained by a thread; the lines it printed while a test ran are attached to the report of a
failing test. A watchdog stops the server when a test runs longer than `$TIDELAKE_TEST_TIMEOUT` seconds
(default 600), so a hung RPC fails the run instead of hanging it.
"""
import os
import pathlib
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
USER = "alice"
PASSWORD = "s3cret"
CATALOG = "tidelake"
LISTEN_RE = re.compile(r"^tidelake listening on 127\.0\.0\.1:(\d+)$")
TEST_TIMEOUT = float(os.environ.get("TIDELAKE_TEST_TIMEOUT", "600"))

_SERVER = None  # the running Server, for the report hooks


class Server:
    def __init__(self, proc, port, warehouse):
        self.proc = proc
        self.port = port
        self.host = "127.0.0.1"
        self.warehouse = pathlib.Path(warehouse)
        self.stderr_lines = []  # appended to by the drain thread (list.append is atomic)
        self.extra_stdout = []
        self.killed_by_watchdog = False

    @property
    def uri(self):
        return f"grpc://{self.host}:{self.port}"

    def stderr_since(self, mark):
        return "".join(self.stderr_lines[mark:])

    def alive(self):
        return self.proc.poll() is None


def _binary():
    b = pathlib.Path(os.environ.get("TIDELAKE_BIN", "target/debug/tidelake"))
    if not b.is_absolute():
        b = REPO / b
    return b


def _die_with_parent():
    """Linux: the server gets SIGKILL if the pytest process dies without its teardown."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def _drain(stream, sink, first_line_queue=None):
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", "replace")
        if first_line_queue is not None:
            first_line_queue.put(line)
            first_line_queue = None
        else:
            sink.append(line)
    if first_line_queue is not None:
        first_line_queue.put(None)  # EOF before the first line
    stream.close()


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    global _SERVER
    binary = _binary()
    if not binary.exists():
        pytest.fail(f"tidelake binary not found at {binary} (set TIDELAKE_BIN)", pytrace=False)
    warehouse = tmp_path_factory.mktemp("warehouse")
    env = dict(os.environ, TIDELAKE_USER=USER, TIDELAKE_PASSWORD=PASSWORD)
    env.setdefault("RUST_BACKTRACE", "1")
    proc = subprocess.Popen(
        [str(binary), "serve", "--warehouse", str(warehouse), "--listen", "127.0.0.1:0"],
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=str(REPO),
        preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
    )
    srv = Server(proc, None, warehouse)
    threading.Thread(target=_drain, args=(proc.stderr, srv.stderr_lines), daemon=True).start()
    first = queue.Queue()
    threading.Thread(target=_drain, args=(proc.stdout, srv.extra_stdout, first), daemon=True).start()
    try:
        line = first.get(timeout=120)
    except queue.Empty:
        line = None
    m = LISTEN_RE.match(line.rstrip("\r\n")) if line else None
    if not m:
        proc.kill()
        proc.wait()
        time.sleep(0.2)
        pytest.fail(f"server did not announce its port; first stdout line {line!r}; stderr:\n"
                    + srv.stderr_since(0)[-20000:], pytrace=False)
    srv.port = int(m.group(1))
    _SERVER = srv
    try:
        yield srv
    finally:
        _SERVER = None
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                rc = proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
                rc = "still running 10 s after SIGTERM (killed)"
        else:
            rc = f"exited on its own before teardown with {proc.returncode}"
        assert not srv.extra_stdout, f"server printed more than the listening line on stdout: {srv.extra_stdout[:20]}"
        assert rc == 0 and not srv.killed_by_watchdog, (
            f"server shutdown on SIGTERM: {rc}; stderr tail:\n" + srv.stderr_since(0)[-8000:])


@pytest.fixture(scope="session")
def uri(server):
    return server.uri


@pytest.fixture(scope="session")
def warehouse(server):
    return server.warehouse


def adbc_connect(uri, user=USER, password=PASSWORD, **db_kwargs):
    """An ADBC DB-API connection (autocommit) authenticated with Basic credentials (Handshake)."""
    import adbc_driver_flightsql.dbapi as flightsql

    kwargs = dict(db_kwargs)
    if user is not None:
        kwargs["username"] = user
    if password is not None:
        kwargs["password"] = password
    return flightsql.connect(uri, db_kwargs=kwargs, autocommit=True)


@pytest.fixture
def connect(uri):
    """Factory for ADBC connections; every one it opened is closed after the test."""
    opened = []

    def _connect(user=USER, password=PASSWORD, **db_kwargs):
        c = adbc_connect(uri, user, password, **db_kwargs)
        opened.append(c)
        return c

    yield _connect
    for c in opened:
        try:
            c.close()
        except Exception:
            pass


@pytest.fixture
def conn(connect):
    return connect()


@pytest.fixture
def flight_client(server):
    import pyarrow.flight as flight

    client = flight.FlightClient(server.uri)
    yield client
    client.close()


@pytest.fixture
def auth_header(flight_client):
    """The `authorization: Bearer ...` header pair the Handshake returned."""
    return flight_client.authenticate_basic_token(USER, PASSWORD)


@pytest.fixture
def flight_options(auth_header):
    import pyarrow.flight as flight

    return flight.FlightCallOptions(headers=[auth_header], timeout=TEST_TIMEOUT)


@pytest.fixture
def uniq():
    """uniq('orders') -> 'orders_1a2b3c4d': names no other test uses."""
    return lambda prefix: f"{prefix}_{uuid.uuid4().hex[:8]}"


@pytest.fixture
def db(conn, uniq):
    """A fresh database (Paimon database = Flight SQL db_schema) for this test."""
    name = uniq("db")
    with conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE {name}")
        cur.fetchall()
    return name


# ---------------------------------------------------------------- reporting, watchdog


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    srv = _SERVER
    item._tidelake_mark = len(srv.stderr_lines) if srv else 0
    done = threading.Event()

    def watchdog():
        if done.wait(TEST_TIMEOUT):
            return
        s = _SERVER
        if s is not None and s.alive():
            s.killed_by_watchdog = True
            sys.stderr.write(f"\n!!! {item.nodeid} ran over {TEST_TIMEOUT} s; stopping the server\n")
            s.proc.send_signal(signal.SIGTERM)
            try:
                s.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                s.proc.kill()

    threading.Thread(target=watchdog, daemon=True).start()
    try:
        yield
    finally:
        done.set()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    srv = _SERVER
    if srv is None or not rep.failed:
        return
    mark = getattr(item, "_tidelake_mark", 0)
    text = srv.stderr_since(mark)
    if len(text) > 20000:
        text = "...\n" + text[-20000:]
    status = "running" if srv.alive() else f"EXITED with {srv.proc.returncode}"
    rep.sections.append((f"tidelake server stderr during this test (server {status})", text or "(nothing)"))


@pytest.fixture(autouse=True)
def _server_still_alive(request):
    yield
    srv = _SERVER
    if srv is not None and "server" in request.fixturenames and not srv.alive():
        pytest.fail(f"the tidelake server died during this test (exit code {srv.proc.returncode})", pytrace=False)
