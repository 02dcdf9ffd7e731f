"""Progress and cancellation of the long admin operations (compact, expire_snapshots,
remove_orphan_files) through the Python admin client and the CLI, against the real server.

The cancellation tests need a compaction that runs long enough to be cancelled half-way: a
primary-key table of BUCKETS buckets with BIG_COMMITS commits of BIG_ROWS rows each, written with
'write-only' so nothing compacts it before the test does. A full compaction of it takes about
1.5 s (server) and 1 s (CLI) on an idle 2-core machine; the tests cancel it at the first
"compacting buckets" report, about 0.1 s in, and assert that the cancel landed before the end
(the error names how many buckets were done). A cancelled compaction leaves the table as it was, so
the server tests share one big table and rebuild it only when a test did compact it.
"""
import os
import pathlib
import re
import shutil
import signal
import subprocess
import threading
import time

import pyarrow.flight as flight
import pytest

import tidelake
from tidelake.admin import Admin, OperationInfo, OperationProgress
from tidelake.errors import map_error
from tidelake.flight_sql import _len_field

from conftest import PASSWORD, USER, _binary

BUCKETS = 64
BIG_COMMITS = 4
BIG_ROWS = 1_000_000
PHASES = ["starting", "planning", "compacting buckets", "committing"]  # a compaction's, in order
CANCELLED_RE = re.compile(r"compaction of (\S+) was cancelled during 'compacting buckets' \((\d+) of (\d+) done\)")


def create_table(tl, table, *, buckets=BUCKETS, commits=BIG_COMMITS, rows=BIG_ROWS):
    """A write-only primary-key table with `commits` snapshots of `rows` rows each (keys overlap by
    half, so a full compaction merges); written by the server itself (INSERT ... generate_series)."""
    tl.execute(f"DROP TABLE IF EXISTS {table}")
    tl.execute(f"CREATE TABLE {table} (id BIGINT NOT NULL, v STRING, n BIGINT, PRIMARY KEY (id)) "
               f"WITH ('bucket' = '{buckets}', 'write-only' = 'true')")
    for c in range(commits):
        lo = c * rows // 2
        tl.execute(f"INSERT INTO {table} SELECT value, concat('value-', CAST(value AS VARCHAR), '-{c}'), value * 3 "
                   f"FROM generate_series({lo}, {lo + rows - 1})")


def snapshots(tl, table):
    db, name = table.split(".")
    return tl.sql(f'SELECT snapshot_id, commit_kind FROM {db}."{name}$snapshots" ORDER BY snapshot_id').to_pylist()


def files(directory):
    """{relative path: size} of every file under `directory`."""
    directory = pathlib.Path(directory)
    return {str(p.relative_to(directory)): p.stat().st_size for p in directory.rglob("*") if p.is_file()}


def table_dir(server, table):
    db, name = table.split(".")
    return server.warehouse / f"{db}.db" / name


@pytest.fixture
def tl(uri):
    with tidelake.Client(uri, user=USER, password=PASSWORD) as c:
        yield c


@pytest.fixture
def admin(uri):
    with Admin(uri, user=USER, password=PASSWORD) as a:
        yield a


@pytest.fixture(scope="module")
def _big(uri):
    """The module's big table (created once; see big_table)."""
    with tidelake.Client(uri, user=USER, password=PASSWORD) as c:
        db = f"db_progress_{os.getpid()}"
        c.execute(f"CREATE DATABASE IF NOT EXISTS {db}")
        table = f"{db}.big"
        create_table(c, table)
        yield table


@pytest.fixture
def big_table(_big, tl, server):
    """(table, its snapshots, its files): the big table, never compacted (rebuilt if a test did)."""
    snaps = snapshots(tl, _big)
    if [s["commit_kind"] for s in snaps] != ["APPEND"] * BIG_COMMITS:
        create_table(tl, _big)
        snaps = snapshots(tl, _big)
    return _big, snaps, files(table_dir(server, _big))


def assert_unchanged(tl, server, big_table):
    table, snaps, before = big_table
    assert snapshots(tl, table) == snaps, "a cancelled compaction committed a snapshot"
    after = files(table_dir(server, table))
    assert sorted(set(after) - set(before)) == [], "a cancelled compaction left files behind"
    assert after == before


def assert_landed_midway(error, table):
    m = CANCELLED_RE.search(str(error))
    assert m, f"unexpected message: {error}"
    assert m.group(1) == table
    done, total = int(m.group(2)), int(m.group(3))
    assert total == BUCKETS and done < total, f"the cancel landed after the last bucket: {error}"
    return done


def check_compaction_progress(reports, result):
    assert reports, "no progress report"
    assert all(isinstance(p, OperationProgress) for p in reports)
    ids = {p.operation_id for p in reports}
    assert len(ids) == 1 and len(ids.pop()) == 36, "one operation id (a uuid) throughout"
    phases = [p.phase for i, p in enumerate(reports) if i == 0 or p.phase != reports[i - 1].phase]
    assert [PHASES.index(p) for p in phases] == sorted(set(PHASES.index(p) for p in phases)), \
        f"phases out of order or repeated: {phases}"
    for a, b in zip(reports, reports[1:]):
        assert b.files >= a.files and b.bytes >= a.bytes, f"files/bytes went back: {a} -> {b}"
        if a.phase == b.phase:
            assert b.done >= a.done and b.total == a.total, f"progress went back: {a} -> {b}"
    for p in reports:
        assert p.total == 0 or p.done <= p.total, p
        if p.phase == "compacting buckets":
            assert p.total == result["buckets_compacted"], p
    last = reports[-1]
    assert (last.phase, last.done, last.total) == ("committing", 1, 1), last
    assert last.files == result["files_after"] and last.bytes > 0, last


# ---------------------------------------------------------------- progress


def test_compact_reports_monotone_progress_and_the_same_result(tl, admin, db):
    twins = [f"{db}.with_progress", f"{db}.without"]
    for t in twins:
        create_table(tl, t, commits=4, rows=200_000)
    reports = []
    result = admin.compact(twins[0], full=True, progress=reports.append)
    check_compaction_progress(reports, result)
    assert "compacting buckets" in {p.phase for p in reports}
    plain = admin.compact(twins[1], full=True)
    assert result == plain == {"buckets_compacted": BUCKETS, "files_before": 4 * BUCKETS,
                               "files_after": BUCKETS, "snapshot_id": 5}
    assert [s["commit_kind"] for s in snapshots(tl, twins[0])] == ["APPEND"] * 4 + ["COMPACT"]
    assert admin.list_operations() == []

    # Through Client.admin too; a compaction with nothing to do reports and returns nothing done.
    reports = []
    assert tl.admin.compact(twins[0], full=True, progress=reports.append)["snapshot_id"] == 0
    assert {p.phase for p in reports} <= {"starting", "planning", "compacting buckets"}
    assert reports[-1].done == reports[-1].total == 0


def test_expire_and_orphans_report_progress(tl, admin, db):
    twins = [f"{db}.a", f"{db}.b"]
    for t in twins:
        create_table(tl, t, buckets=4, commits=3, rows=1000)
    reports = []
    with_progress = admin.expire_snapshots(twins[0], retain_min=1, retain_max=1, progress=reports.append)
    assert with_progress["snapshots"] == [1, 2]
    plain = admin.expire_snapshots(twins[1], retain_min=1, retain_max=1)
    # The twin's files have other (random) names: compare what kind of files went.
    kinds = lambda r: sorted(f.split("/")[2] for f in r["files"])  # noqa: E731 - bucket-N or manifest
    assert with_progress["snapshots"] == plain["snapshots"] and kinds(with_progress) == kinds(plain) != []
    assert all(f.startswith(f"{db}.db/a/") for f in with_progress["files"])
    assert len({p.operation_id for p in reports}) == 1
    last = reports[-1]
    assert (last.phase, last.done) == ("deleting files", last.total) and last.files == last.total > 0, last

    reports = []
    dry = admin.remove_orphan_files(twins[0], older_than="0 ms", progress=reports.append)
    assert dry == admin.remove_orphan_files(twins[0], older_than="0 ms") == {"snapshots": [], "files": []}
    assert len({p.operation_id for p in reports}) == 1
    assert reports[-1].phase == "checking files" and reports[-1].done == reports[-1].total > 0, reports[-1]

    with pytest.raises(TypeError, match="progress must be a callable"):
        admin.compact(twins[0], progress="yes")


# ---------------------------------------------------------------- cancellation


def test_cancel_from_another_connection(tl, admin, uri, server, big_table):
    """list_operations shows the running compaction; tidelake.cancel from a second connection makes
    it fail with CANCELLED, and it leaves no snapshot and no file behind."""
    table = big_table[0]
    compacting = threading.Event()
    reports, outcome = [], {}

    def on_progress(p):
        reports.append(p)
        if p.phase == "compacting buckets":
            compacting.set()

    def run():
        t0 = time.monotonic()
        try:
            outcome["result"] = admin.compact(table, full=True, progress=on_progress)
        except BaseException as e:  # noqa: B902 - handed to the test thread
            outcome["error"] = e
        outcome["seconds"] = time.monotonic() - t0

    worker = threading.Thread(target=run)
    with Admin(uri, user=USER, password=PASSWORD) as other:  # the second connection
        started = int(time.time() * 1000)
        worker.start()
        try:
            assert compacting.wait(120), f"no 'compacting buckets' report: {reports} {outcome}"
            running = [o for o in other.list_operations() if o.table == table]
            op_id = reports[0].operation_id
            try:
                cancelled = other.cancel(op_id)
            except tidelake.NotFoundError:
                worker.join(120)
                pytest.fail(f"the compaction ended before the cancel landed ({outcome}); make the table bigger")
        finally:
            worker.join(120)
    assert not worker.is_alive()

    assert len(running) == 1, running
    op = running[0]
    assert isinstance(op, OperationInfo)
    assert (op.operation_id, op.action, op.table, op.user, op.cancelling) == (
        op_id, "tidelake.compact", table, USER, False)
    assert started - 5000 <= op.started_millis <= int(time.time() * 1000)
    assert op.progress.operation_id == op_id and op.progress.phase == "compacting buckets"
    assert op.progress.total == BUCKETS and op.progress.done < BUCKETS
    assert cancelled.operation_id == op_id and cancelled.cancelling and cancelled.table == table

    error = outcome.get("error")
    assert isinstance(error, tidelake.CancelledError), outcome
    assert isinstance(error, flight.FlightCancelledError) and error.code == "CANCELLED"
    done = assert_landed_midway(error, table)
    print(f"cancelled after {done}/{BUCKETS} buckets, {outcome['seconds']:.2f} s")
    assert all(p.operation_id == op_id for p in reports)
    assert [o for o in admin.list_operations() if o.table == table] == []
    assert_unchanged(tl, server, big_table)
    with pytest.raises(tidelake.NotFoundError, match="no running operation"):
        admin.cancel(op_id)


def test_cancel_a_call_without_progress(tl, admin, uri, server, big_table):
    """A compaction called without progress is listed and cancelled all the same."""
    table = big_table[0]
    outcome = {}

    def run():
        try:
            outcome["result"] = admin.compact(table, full=True)
        except BaseException as e:  # noqa: B902 - handed to the test thread
            outcome["error"] = e

    worker = threading.Thread(target=run)
    with Admin(uri, user=USER, password=PASSWORD) as other:
        worker.start()
        try:
            deadline, ops = time.monotonic() + 120, []
            while time.monotonic() < deadline and "result" not in outcome:
                ops = [o for o in other.list_operations()
                       if o.table == table and o.progress.phase == "compacting buckets"]
                if ops:
                    break
                time.sleep(0.01)
            assert ops, f"the compaction was never listed as compacting buckets: {outcome}"
            assert other.cancel(ops[0].operation_id).cancelling
        finally:
            worker.join(120)
    assert isinstance(outcome.get("error"), tidelake.CancelledError), outcome
    print(f"cancelled after {assert_landed_midway(outcome['error'], table)}/{BUCKETS} buckets (no progress)")
    assert_unchanged(tl, server, big_table)


def test_progress_callback_returning_false_cancels(tl, admin, server, big_table):
    table = big_table[0]
    reports = []

    def stop_when_compacting(p):
        reports.append(p)
        return p.phase != "compacting buckets"  # False: cancel

    t0 = time.monotonic()
    with pytest.raises(tidelake.CancelledError) as info:
        admin.compact(table, full=True, progress=stop_when_compacting)
    seconds = time.monotonic() - t0
    done = assert_landed_midway(info.value, table)
    assert reports[-1].phase == "compacting buckets", "no callback after it asked to stop"
    # The call returns once the server stopped the operation: nothing runs, nothing is left.
    assert [o for o in admin.list_operations() if o.table == table] == []
    assert_unchanged(tl, server, big_table)
    print(f"cancelled after {done}/{BUCKETS} buckets, {seconds:.2f} s")


def test_progress_callback_raising_cancels_and_reraises(tl, server, big_table):
    table = big_table[0]

    class Stop(Exception):
        pass

    def boom(p):
        if p.phase == "compacting buckets":
            raise Stop("enough")

    with pytest.raises(Stop, match="enough"):
        tl.admin.compact(table, full=True, progress=boom)
    assert [o for o in tl.admin.list_operations() if o.table == table] == []
    assert_unchanged(tl, server, big_table)


def cpu_seconds(pid):
    fields = pathlib.Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def test_ending_the_call_cancels(tl, admin, monkeypatch, server, big_table):
    """When tidelake.cancel cannot be sent the client ends the DoAction call, which the server takes
    as cancellation too. The operation then stops at its next safe point on its own, unobservable
    (list_operations forgets it with its call), so the test waits until the table's files are back
    and the server is idle: a compaction that went on would keep it busy and then commit."""
    if not pathlib.Path(f"/proc/{server.proc.pid}/stat").exists():
        pytest.skip("needs /proc to see the server idle")
    table = big_table[0]
    monkeypatch.setattr(admin, "_request_cancel", lambda operation_id: False)
    with pytest.raises(tidelake.CancelledError, match="cancelled by ending the call"):
        admin.compact(table, full=True, progress=lambda p: p.phase != "compacting buckets")
    deadline = time.monotonic() + 120
    cpu = cpu_seconds(server.proc.pid)
    while time.monotonic() < deadline:
        time.sleep(0.3)
        now = cpu_seconds(server.proc.pid)
        idle, cpu = now - cpu < 0.03, now
        if idle and files(table_dir(server, table)) == big_table[2]:
            break
    assert [o for o in admin.list_operations() if o.table == table] == []
    assert_unchanged(tl, server, big_table)


def test_cancel_errors(admin, uri):
    with pytest.raises(tidelake.NotFoundError, match="no running operation 'no-such-id'"):
        admin.cancel("no-such-id")
    with pytest.raises(tidelake.InvalidArgumentError, match="cancel needs an operation_id"):
        admin.cancel("")
    with pytest.raises(TypeError):
        admin.cancel(42)
    client = flight.FlightClient(uri)
    options = flight.FlightCallOptions(headers=[client.authenticate_basic_token(USER, PASSWORD)])
    try:
        for name, body, message in [
            ("cancel", b"\xff", "malformed OperationRequest"),
            ("list_operations", b"\xff", "malformed OperationRequest"),
            ("cancel", _len_field(1, "abc")[:-1], "malformed OperationRequest"),
            ("compact", b"\x0a\x09", "malformed CompactRequest"),
            ("expire_snapshots", b"\xff", "malformed ExpireSnapshotsRequest"),
            ("remove_orphan_files", b"\xff", "malformed RemoveOrphanFilesRequest"),
        ]:
            with pytest.raises(Exception) as info:
                list(client.do_action(flight.Action(f"tidelake.{name}", body), options))
            error = map_error(info.value)
            assert isinstance(error, tidelake.InvalidArgumentError) and message in str(error), (name, error)
    finally:
        client.close()
    assert admin.list_operations() == []


def test_decoding_without_a_server():
    from tidelake.admin import _compact_result, _progress, _unpack_any
    from tidelake.flight_sql import _int_field

    progress = (_len_field(1, "op-1") + _len_field(2, "compacting buckets") + _int_field(3, 2) + _int_field(4, 64)
                + _int_field(5, 2) + _int_field(6, 1000))
    wrapped = _len_field(1, "type.googleapis.com/tidelake.OperationProgress") + _len_field(2, progress)
    name, value = _unpack_any(wrapped)
    assert name == "OperationProgress"
    assert _progress(value) == OperationProgress("op-1", "compacting buckets", 2, 64, 2, 1000)
    # A server that ignores report_progress answers with the bare result, which is no Any.
    bare = _int_field(1, 4) + _int_field(2, 12) + _int_field(3, 4) + _int_field(4, 7)
    assert _unpack_any(bare) is None and _unpack_any(b"\xff") is None
    assert _compact_result(bare) == {"buckets_compacted": 4, "files_before": 12, "files_after": 4, "snapshot_id": 7}
    # pyarrow words CANCELLED differently from the other codes.
    error = map_error(flight.FlightCancelledError("Flight cancelled call, with message: compaction of db.t was "
                                                  "cancelled during 'planning' (0 of 0 done)"))
    assert isinstance(error, tidelake.CancelledError) and isinstance(error, flight.FlightCancelledError)
    assert (error.code, str(error)) == ("CANCELLED", "compaction of db.t was cancelled during 'planning' (0 of 0 done)")


# ---------------------------------------------------------------- the CLI


def cli(*args, **kwargs):
    return subprocess.run([str(_binary()), *map(str, args)], capture_output=True, text=True, timeout=300, **kwargs)


@pytest.fixture(scope="module")
def cli_warehouse(tmp_path_factory):
    """A warehouse written by the CLI alone, holding db.t: the big table (copy it before use)."""
    wh = tmp_path_factory.mktemp("cli-warehouse")
    for sql in ["CREATE DATABASE db",
                f"CREATE TABLE db.t (id BIGINT NOT NULL, v STRING, n BIGINT, PRIMARY KEY (id)) "
                f"WITH ('bucket' = '{BUCKETS}', 'write-only' = 'true')"]:
        p = cli("--warehouse", wh, "sql", sql)
        assert p.returncode == 0, p.stderr
    for c in range(BIG_COMMITS):
        lo = c * BIG_ROWS // 2
        p = cli("--warehouse", wh, "sql", f"INSERT INTO db.t SELECT value, concat('value-', CAST(value AS VARCHAR), "
                f"'-{c}'), value * 3 FROM generate_series({lo}, {lo + BIG_ROWS - 1})")
        assert p.returncode == 0, p.stderr
    return wh


@pytest.fixture
def cli_copy(cli_warehouse, tmp_path):
    wh = tmp_path / "warehouse"
    shutil.copytree(cli_warehouse, wh)
    return wh


PHASE_LINE = re.compile(r"^(planning|compacting buckets|committing): "
                        r"(\d+ done|\[[#-]{30}\] (\d+)/(\d+))(, \d+ file\(s\), \d+ bytes)?$")


def test_cli_compact_prints_phase_lines(cli_copy):
    p = cli("--warehouse", cli_copy, "compact", "db.t", "--full")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == (f"compacted {BUCKETS} bucket(s) of db.t: {4 * BUCKETS} files rewritten into "
                                f"{BUCKETS}; snapshot {BIG_COMMITS + 1}")
    lines = p.stderr.splitlines()
    assert lines and all(PHASE_LINE.match(line) for line in lines), p.stderr
    assert "\r" not in p.stderr and "\x1b" not in p.stderr, "no bar redrawing when stderr is not a terminal"
    phases = [PHASE_LINE.match(line).group(1) for line in lines]
    # One line per phase seen, in order, then a last line with where it ended (the final counts).
    assert phases[-1] == "committing" and lines[-1].startswith("committing: [" + "#" * 30 + "] 1/1"), p.stderr
    seen = phases[:-1] if phases[:-1] and phases[-2] == phases[-1] else phases
    assert seen == sorted(set(seen), key=PHASES.index), f"one line per phase, in order: {lines}"
    compacting = [PHASE_LINE.match(line) for line in lines if line.startswith("compacting buckets: [")]
    assert compacting and int(compacting[0].group(4)) == BUCKETS, p.stderr
    assert len(lines[phases.index("compacting buckets")].split("[")[1].split("]")[0]) == 30


def test_cli_compact_sigint_cancels(cli_copy):
    table_dir_ = cli_copy / "db.db" / "t"
    before = files(table_dir_)
    proc = subprocess.Popen([str(_binary()), "--warehouse", str(cli_copy), "compact", "db.t", "--full"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    try:
        for line in proc.stderr:
            lines.append(line)
            if line.startswith("compacting buckets"):
                proc.send_signal(signal.SIGINT)
                break
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    err = "".join(lines) + err
    assert any(line.startswith("compacting buckets") for line in lines), err
    assert proc.returncode == 130, f"exit {proc.returncode}\nstdout: {out}\nstderr: {err}"
    assert out == ""
    assert "cancelling (the operation stops at its next safe point; Ctrl-C again to quit now)..." in err
    m = re.search(r"^error: compaction of db\.t was cancelled during 'compacting buckets' \((\d+) of (\d+) done\)$",
                  err, re.M)
    assert m, err
    assert int(m.group(2)) == BUCKETS and int(m.group(1)) < BUCKETS, f"the SIGINT landed after the last bucket: {err}"
    print(f"SIGINT landed after {m.group(1)}/{BUCKETS} buckets")
    assert files(table_dir_) == before, "a cancelled compaction changed the table's files"
    p = cli("--warehouse", cli_copy, "sql", 'SELECT count(*) AS n FROM db."t$snapshots"', "--format", "csv")
    assert p.returncode == 0, p.stderr
    assert p.stdout.split() == ["n", str(BIG_COMMITS)], p.stdout
