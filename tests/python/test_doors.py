"""Every maintenance operation through all four doors: the CLI on the warehouse, `CALL sys.*` over ADBC,
the Flight action (the Python admin client) and Paimon's REST catalog. The same history, the same
operations: each door must leave the same table (snapshots, tags, branches, rows) and refuse the same
bad input with the same one-line message, since all four build one `maintenance::Request` and run it
through one core (issue 42)."""
import json
import subprocess
import urllib.error
import urllib.request

import pytest

from tidelake.admin import Admin

CONFIG = """
[rest]
listen = "127.0.0.1:0"
[metrics]
listen = "127.0.0.1:0"
[[users]]
name = "alice"
password_hash = '{pw}'
role = "admin"
"""
REST_LINE = r"tidelake REST catalog on (http://\S+)"
METRICS_LINE = r"tidelake metrics on (http://127\.0\.0\.1:\d+/metrics)"
DOORS = ["cli", "call", "action", "rest"]


@pytest.fixture(scope="module")
def doors(tmp_path_factory):
    """(server, REST base URL, REST prefix, bearer token, ADBC connection, admin client, metrics URL)."""
    import pyarrow.flight as flight
    from conftest import adbc_connect, announced, start_configured, stop_cleanly

    tmp = tmp_path_factory.mktemp("doors")
    srv = start_configured(tmp, CONFIG, "four-door server")
    try:
        url = announced(srv, REST_LINE)
        client = flight.FlightClient(srv.uri)
        _, value = client.authenticate_basic_token("alice", "pw")
        client.close()
        token = value.decode().split(" ", 1)[1]
        status, config = rest_call(url, "GET", "/v1/config", token)
        assert status == 200, config
        prefix = config["overrides"]["prefix"]
        conn = adbc_connect(srv.uri, user="alice", password="pw")
        admin = Admin(srv.uri, user="alice", password="pw")
        conn.cursor().execute("CREATE DATABASE IF NOT EXISTS doors")
        yield srv, url, prefix, token, conn, admin, announced(srv, METRICS_LINE)
        admin.close()
        conn.close()
    finally:
        stop_cleanly(srv)


def rest_call(url, method, path, token, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url + path, data=data, method=method)
    req.add_header("Authorization", f"Bearer {token}")
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")


class Door:
    """One door onto the maintenance core; each method returns None on success or the error's
    one-line message."""

    def __init__(self, name, env, table):
        self.name = name
        self.srv, self.url, self.prefix, self.token, self.conn, self.admin, _ = env
        self.table = table
        self.db, self.t = table.split(".")

    # --- how each door is called ---
    def cli(self, *args):
        from conftest import _binary

        out = subprocess.run([str(_binary()), "--warehouse", str(self.srv.warehouse), *args],
                             capture_output=True, text=True, timeout=120)
        if out.returncode == 0:
            return None
        lines = [l for l in out.stderr.splitlines() if l.startswith("error: ")]
        assert len(lines) == 1, out.stderr
        return lines[0][len("error: "):]

    def call(self, sql):
        try:
            self.conn.cursor().execute(sql)
            return None
        except Exception as e:  # the ADBC driver's error carries the status message
            return str(e)

    def action(self, fn, *args, **kwargs):
        try:
            fn(*args, **kwargs)
            return None
        except Exception as e:
            return str(e)

    def rest(self, method, resource, body=None):
        path = f"/v1/{self.prefix}/databases/{self.db}/tables/{self.t}/{resource}"
        status, reply = rest_call(self.url, method, path, self.token, body)
        return None if status == 200 else reply["message"]

    # --- the operations ---
    def create_tag(self, name, snapshot_id):
        t = self.table
        return {
            "cli": lambda: self.cli("tag", "create", t, name, "--snapshot-id", str(snapshot_id)),
            "call": lambda: self.call(f"CALL sys.create_tag('{t}', '{name}', {snapshot_id})"),
            "action": lambda: self.action(self.admin.create_tag, t, name, snapshot_id=snapshot_id),
            "rest": lambda: self.rest("POST", "tags", {"tagName": name, "snapshotId": snapshot_id}),
        }[self.name]()

    def delete_tag(self, name):
        t = self.table
        return {
            "cli": lambda: self.cli("tag", "delete", t, name),
            "call": lambda: self.call(f"CALL sys.delete_tag('{t}', '{name}')"),
            "action": lambda: self.action(self.admin.delete_tag, t, name),
            "rest": lambda: self.rest("DELETE", f"tags/{name}"),
        }[self.name]()

    def rollback(self, snapshot_id):
        t = self.table
        return {
            "cli": lambda: self.cli("rollback", t, "--snapshot-id", str(snapshot_id)),
            "call": lambda: self.call(f"CALL sys.rollback_to('{t}', '{snapshot_id}')"),
            "action": lambda: self.action(self.admin.rollback, t, snapshot_id=snapshot_id),
            "rest": lambda: self.rest("POST", "rollback",
                                      {"instant": {"type": "snapshot", "snapshotId": snapshot_id}}),
        }[self.name]()

    def rollback_to_tag(self, tag):
        t = self.table
        return {
            "cli": lambda: self.cli("rollback", t, "--tag", tag),
            "call": lambda: self.call(f"CALL sys.rollback_to('{t}', '{tag}')"),
            "action": lambda: self.action(self.admin.rollback, t, tag=tag),
            "rest": lambda: self.rest("POST", "rollback", {"instant": {"type": "tag", "tagName": tag}}),
        }[self.name]()

    def create_branch(self, name, from_tag):
        t = self.table
        return {
            "cli": lambda: self.cli("branch", "create", t, name, "--from-tag", from_tag),
            "call": lambda: self.call(f"CALL sys.create_branch('{t}', '{name}', '{from_tag}')"),
            "action": lambda: self.action(self.admin.create_branch, t, name, from_tag=from_tag),
            "rest": lambda: self.rest("POST", "branches", {"branch": name, "fromTag": from_tag}),
        }[self.name]()

    def delete_branch(self, name):
        t = self.table
        return {
            "cli": lambda: self.cli("branch", "delete", t, name),
            "call": lambda: self.call(f"CALL sys.delete_branch('{t}', '{name}')"),
            "action": lambda: self.action(self.admin.delete_branch, t, name),
            "rest": lambda: self.rest("DELETE", f"branches/{name}"),
        }[self.name]()

    def fast_forward(self, name):
        t = self.table
        return {
            "cli": lambda: self.cli("branch", "fast-forward", t, name),
            "call": lambda: self.call(f"CALL sys.fast_forward('{t}', '{name}')"),
            "action": lambda: self.action(self.admin.fast_forward, t, name),
            "rest": lambda: self.rest("POST", f"branches/{name}/forward", {}),
        }[self.name]()


def state(env, table):
    """What a door's operations leave: snapshot ids, tags with their snapshots, branches, rows."""
    srv, conn = env[0], env[4]
    db, t = table.split(".")
    root = srv.warehouse / f"{db}.db" / t
    snapshots = sorted(int(p.name.split("-")[1]) for p in (root / "snapshot").glob("snapshot-*"))
    tags = sorted((p.name[len("tag-"):], json.loads(p.read_text())["id"]) for p in (root / "tag").glob("tag-*"))
    branches = sorted(p.name[len("branch-"):] for p in (root / "branch").glob("branch-*"))
    cur = conn.cursor()
    cur.execute(f"SELECT id, v FROM {table} ORDER BY id")
    return {"snapshots": snapshots, "tags": tags, "branches": branches, "rows": cur.fetchall()}


def history(env, table, commits=4):
    cur = env[4].cursor()
    cur.execute(f"CREATE TABLE {table} (id BIGINT NOT NULL, v STRING, PRIMARY KEY (id)) "
                "WITH ('bucket' = '1', 'write-only' = 'true')")
    for i in range(1, commits + 1):
        cur.execute(f"INSERT INTO {table} VALUES ({i}, 'v{i}')")


def scenario_tags_branches_rollback(door, env):
    """Tag, branch from the tag, write on the branch, fast-forward, delete the branch, roll back."""
    steps = [
        door.create_tag("v2", 2),
        door.create_tag("v3", 3),
        door.delete_tag("v3"),
        door.create_branch("dev", "v2"),
    ]
    env[4].cursor().execute(f"INSERT INTO {door.table}$branch_dev VALUES (20, 'dev')")
    steps += [door.fast_forward("dev"), door.delete_branch("dev"), door.rollback_to_tag("v2")]
    return steps


def scenario_rollback(door, env):
    return [door.create_tag("late", 4), door.rollback(2)]


@pytest.mark.parametrize("scenario", [scenario_tags_branches_rollback, scenario_rollback])
def test_every_door_leaves_the_same_table(doors, scenario, uniq):
    run = uniq("run")
    rollbacks_before = rollbacks(doors)
    outcomes = {}
    for name in DOORS:
        table = f"doors.{scenario.__name__[len('scenario_'):]}_{name}_{run}"
        history(doors, table)
        errors = scenario(Door(name, doors, table), doors)
        assert errors == [None] * len(errors), f"{name}: {errors}"
        outcomes[name] = state(doors, table)
    first = outcomes["cli"]
    assert first["snapshots"], first
    for name in DOORS[1:]:
        assert outcomes[name] == first, f"{name} differs from the CLI:\n{outcomes[name]}\n{first}"
    # The after-change effects are the core's: the server counted the rollback of each of its
    # three doors (the CLI ran in a process of its own).
    assert rollbacks(doors) - rollbacks_before == 3


def rollbacks(env):
    """The server's count of successful rollbacks."""
    import re

    with urllib.request.urlopen(env[6], timeout=30) as r:
        text = r.read().decode()
    m = re.search(r'^tidelake_maintenance_operations_total\{operation="rollback"\} (\S+)$', text, re.M)
    return float(m.group(1)) if m else 0.0


BAD = [
    ("a blank tag name", lambda d: d.create_tag("", 1)),
    ("a tag on a snapshot that does not exist", lambda d: d.create_tag("x", 99)),
    ("a tag that does not exist", lambda d: d.delete_tag("nope")),
    ("a rollback to a snapshot that does not exist", lambda d: d.rollback(99)),
    ("a branch named main", lambda d: d.create_branch("main", "t1")),
    ("a fast-forward to a branch that does not exist", lambda d: d.fast_forward("nope")),
    ("a branch from a tag that does not exist", lambda d: d.create_branch("b", "nope")),
]


@pytest.mark.parametrize("what,op", BAD, ids=[b[0] for b in BAD])
def test_every_door_refuses_bad_input_with_one_message_and_changes_nothing(doors, what, op, uniq):
    run = uniq("run")
    messages = {}
    for name in DOORS:
        table = f"doors.bad_{name}_{run}"
        history(doors, table, commits=2)
        door = Door(name, doors, table)
        assert door.create_tag("t1", 1) is None
        before = state(doors, table)
        messages[name] = op(door)
        assert messages[name], f"{name} accepted {what}"
        assert "\n" not in messages[name], messages[name]
        assert state(doors, table) == before, f"{name} changed the table on {what}"
    # The CLI prints the core's message as it is; every other door carries the same line (the
    # table's name and directory told apart from the door's own table).
    def normal(name):
        return (messages[name].replace(f"doors.bad_{name}_{run}", "TABLE")
                .replace(f"doors.db/bad_{name}_{run}", "TABLE_DIR"))

    core = normal("cli")
    for name in DOORS[1:]:
        got = normal(name)
        assert core in got, f"{what}: {name} says {got!r}, the CLI {core!r}"
