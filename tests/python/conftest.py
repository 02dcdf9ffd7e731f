"""Fixtures for the end-to-end tests: one `tidelake serve` process per session, real clients against it.

The server binary is `$TIDELAKE_BIN` (default `target/debug/tidelake`, relative to the repository root).
Its stderr is drained by a thread; the lines it printed while a test ran are attached to the report of a
failing test. A watchdog stops the server when a test runs longer than `$TIDELAKE_TEST_TIMEOUT` seconds
(default 600), so a hung RPC fails the run instead of hanging it.

Tests that need more servers (a second one on the same warehouse, one to kill and restart) get them from
`server_factory`; their stderr is attached to a failing test's report too.
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
try:  # the client package (clients/python), installed by scripts/setup-python.sh; else from the tree
    import tidelake  # noqa: F401
except ImportError:
    sys.path.insert(0, str(REPO / "clients" / "python"))
USER = "alice"
PASSWORD = "s3cret"
CATALOG = "tidelake"
LISTEN_RE = re.compile(r"^tidelake listening on 127\.0\.0\.1:(\d+)$")
TEST_TIMEOUT = float(os.environ.get("TIDELAKE_TEST_TIMEOUT", "600"))

_SERVER = None  # the running Server, for the report hooks
_EXTRA_SERVERS = []  # servers a test started through server_factory, for the report hooks


class Server:
    def __init__(self, proc, port, warehouse):
        self.proc = proc
        self.port = port
        self.host = "127.0.0.1"
        self.warehouse = pathlib.Path(warehouse)
        self.stderr_lines = []  # appended to by the drain thread (list.append is atomic)
        self.extra_stdout = []
        self.killed_by_watchdog = False
        self.label = "server"

    @property
    def uri(self):
        return f"grpc://{self.host}:{self.port}"

    def stderr_since(self, mark):
        return "".join(self.stderr_lines[mark:])

    def alive(self):
        return self.proc.poll() is None

    def stop(self, timeout=10):
        """SIGTERM, then SIGKILL after `timeout` s; returns the exit code (or a text saying it was killed)."""
        if self.proc.poll() is not None:
            return self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return f"still running {timeout} s after SIGTERM (killed)"

    def kill(self):
        """SIGKILL: the process dies mid-whatever, as in a crash."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


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


class ServerStartError(Exception):
    pass


_HASHES = {}


def hash_password(password):
    """An argon2 hash of ``password`` for a config's ``password_hash``, made by ``tidelake hash-password``
    (cached per password for the session)."""
    if password not in _HASHES:
        out = subprocess.run([str(_binary()), "hash-password"], input=password + "\n", capture_output=True,
                             text=True, timeout=60, check=True)
        _HASHES[password] = out.stdout.strip()
    return _HASHES[password]


def start_server(warehouse, port=0, label="server", config=None, env_extra=None):
    """Starts `tidelake serve` on `warehouse` (127.0.0.1:`port`, 0 = any free port) as user alice and waits
    for its listening line. Raises ServerStartError (with the server's stderr) when it does not announce.
    `config` is the path of a TOML config (its users replace alice)."""
    binary = _binary()
    if not binary.exists():
        pytest.fail(f"tidelake binary not found at {binary} (set TIDELAKE_BIN)", pytrace=False)
    env = dict(os.environ, TIDELAKE_USER=USER, TIDELAKE_PASSWORD=PASSWORD, **(env_extra or {}))
    env.setdefault("RUST_BACKTRACE", "1")
    args = [str(binary), "serve", "--warehouse", str(warehouse), "--listen", f"127.0.0.1:{port}"]
    if config is not None:
        args += ["--config", str(config)]
    proc = subprocess.Popen(
        args,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=str(REPO),
        preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
    )
    srv = Server(proc, None, warehouse)
    srv.label = label
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
        raise ServerStartError(f"{label} did not announce its port; first stdout line {line!r}; stderr:\n"
                               + srv.stderr_since(0)[-20000:])
    srv.port = int(m.group(1))
    return srv


def start_configured(tmp, config_text, label, env_extra=None, password="pw"):
    """A server on `tmp`/warehouse with the TOML config `config_text` (written to `tmp`/tidelake.toml),
    in which `{pw}` stands for the argon2 hash of `password`."""
    cfg = tmp / "tidelake.toml"
    cfg.write_text(config_text.replace("{pw}", hash_password(password)))
    return start_server(tmp / "warehouse", config=cfg, label=label, env_extra=env_extra)


def announced(srv, pattern):
    """Group 1 of the first line `srv` printed after its listening line that matches `pattern` (the
    address of a side port: `[metrics]`, `[rest]`), waiting up to 5 s for it."""
    for _ in range(100):
        for line in srv.extra_stdout:
            m = re.match(pattern, line)
            if m:
                return m.group(1)
        time.sleep(0.05)
    raise AssertionError(f"no line matching {pattern!r}: {srv.extra_stdout}")


def stop_cleanly(srv):
    """Stops `srv` with SIGTERM; it must exit 0."""
    rc = srv.stop()
    assert rc == 0, f"server exit {rc}:\n" + srv.stderr_since(0)[-4000:]


def latencies_while(busy_threads, probe):
    """Seconds each `probe()` took, called back to back while any of `busy_threads` runs (then joined);
    every probe must return a true value."""
    out = []
    while any(t.is_alive() for t in busy_threads):
        started = time.monotonic()
        assert probe(), "the probe failed"
        out.append(time.monotonic() - started)
    for t in busy_threads:
        t.join()
    return sorted(out)


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    global _SERVER
    warehouse = tmp_path_factory.mktemp("warehouse")
    try:
        srv = start_server(warehouse)
    except ServerStartError as e:
        pytest.fail(str(e), pytrace=False)
    proc = srv.proc
    _SERVER = srv
    try:
        yield srv
    finally:
        _SERVER = None
        if proc.poll() is None:
            rc = srv.stop()
        else:
            rc = f"exited on its own before teardown with {proc.returncode}"
        assert not srv.extra_stdout, f"server printed more than the listening line on stdout: {srv.extra_stdout[:20]}"
        assert rc == 0 and not srv.killed_by_watchdog, (
            f"server shutdown on SIGTERM: {rc}; stderr tail:\n" + srv.stderr_since(0)[-8000:])


@pytest.fixture
def server_factory(tmp_path):
    """start(warehouse=None, port=0) -> Server: more `tidelake serve` processes for this test (a fresh
    warehouse under tmp_path by default; pass the session server's to share it, and a dead server's port
    to restart it there). Every one still running is stopped after the test."""
    started = []

    def start(warehouse=None, port=0, config=None, env_extra=None):
        wh = warehouse if warehouse is not None else tmp_path / f"warehouse-{len(started)}"
        deadline = time.monotonic() + 30
        while True:  # a port just released by a killed server may take a moment to bind again
            try:
                srv = start_server(wh, port=port, label=f"extra server {len(started) + 1}", config=config,
                                   env_extra=env_extra)
                break
            except ServerStartError:
                if not port or time.monotonic() > deadline:
                    raise
                time.sleep(0.3)
        started.append(srv)
        _EXTRA_SERVERS.append(srv)
        return srv

    yield start
    for srv in started:
        srv.stop()
        _EXTRA_SERVERS.remove(srv)


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
    if not rep.failed:
        return
    srv = _SERVER
    if srv is not None:
        mark = getattr(item, "_tidelake_mark", 0)
        text = srv.stderr_since(mark)
        if len(text) > 20000:
            text = "...\n" + text[-20000:]
        status = "running" if srv.alive() else f"EXITED with {srv.proc.returncode}"
        rep.sections.append((f"tidelake server stderr during this test (server {status})", text or "(nothing)"))
    for extra in _EXTRA_SERVERS:
        text = extra.stderr_since(0)
        if len(text) > 20000:
            text = "...\n" + text[-20000:]
        status = "running" if extra.alive() else f"exited with {extra.proc.returncode}"
        rep.sections.append((f"{extra.label} (port {extra.port}, {status}) stderr", text or "(nothing)"))


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: runs for more than a few seconds (deselect with -m 'not slow')")


@pytest.fixture(autouse=True)
def _server_still_alive(request):
    yield
    srv = _SERVER
    if srv is not None and "server" in request.fixturenames and not srv.alive():
        pytest.fail(f"the tidelake server died during this test (exit code {srv.proc.returncode})", pytrace=False)
