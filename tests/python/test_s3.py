"""tidelake on S3 (moto's S3 server): `serve --warehouse s3://BUCKET/PREFIX` with the standard AWS
environment variables, queried through ADBC; pypaimon (its `fs.s3.*` options, pyarrow's S3 filesystem)
reads what tidelake wrote and tidelake reads what pypaimon wrote, in one warehouse; two servers on one
S3 warehouse commit at once with contiguous snapshot ids and see each other's commits; and the start-up
failures (missing bucket, unreachable endpoint, refused credentials, a bucket without write permission)
are one error naming the warehouse, without a listening line.

moto's address comes from `TIDELAKE_TEST_S3_ENDPOINT` (scripts/test.sh starts it); without it the module
starts its own. The credential tests start one more moto with IAM checks on.
"""
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid

import pytest

from conftest import REPO, ServerStartError, _binary, adbc_connect, start_server, stop_cleanly

KEY, SECRET = "testing", "testing"


def _free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _start_moto(env_extra=None):
    port = _free_port()
    env = dict(os.environ, **(env_extra or {}))
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    url = f"http://127.0.0.1:{port}"
    for _ in range(100):
        try:
            urllib.request.urlopen(url + "/moto-api/", timeout=1)
            return proc, url
        except Exception:
            time.sleep(0.1)
    proc.kill()
    pytest.fail(f"moto did not start at {url}")


@pytest.fixture(scope="module")
def endpoint():
    url = os.environ.get("TIDELAKE_TEST_S3_ENDPOINT")
    if url:
        yield url
        return
    proc, url = _start_moto()
    yield url
    proc.kill()


def _s3(endpoint, key=KEY, secret=SECRET):
    import boto3

    return boto3.client("s3", endpoint_url=endpoint, aws_access_key_id=key, aws_secret_access_key=secret,
                        region_name="us-east-1")


@pytest.fixture
def bucket(endpoint):
    name = f"py-{uuid.uuid4().hex[:12]}"
    _s3(endpoint).create_bucket(Bucket=name)
    return name


def aws_env(endpoint, key=KEY, secret=SECRET):
    return {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": key, "AWS_SECRET_ACCESS_KEY": secret,
            "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true"}


def pypaimon_catalog(endpoint, warehouse, key=KEY, secret=SECRET):
    from pypaimon import CatalogFactory

    return CatalogFactory.create({
        "warehouse": warehouse, "fs.s3.endpoint": endpoint, "fs.s3.accessKeyId": key,
        "fs.s3.accessKeySecret": secret, "fs.s3.region": "us-east-1", "fs.s3.path-style-access": "true",
    })


def query(conn, sql):
    with conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetch_arrow_table()


def keys(s3, bucket, prefix=""):
    out, token = [], None
    while True:
        kw = {"Bucket": bucket, "Prefix": prefix, **({"ContinuationToken": token} if token else {})}
        page = s3.list_objects_v2(**kw)
        out += [o["Key"] for o in page.get("Contents", [])]
        if not page.get("IsTruncated"):
            return out
        token = page["NextContinuationToken"]


def test_serve_on_s3_and_pypaimon_reads_and_writes_the_same_warehouse(endpoint, bucket):
    import pyarrow as pa

    warehouse = f"s3://{bucket}/lake"
    srv = start_server(warehouse, label="s3-server", env_extra=aws_env(endpoint))
    try:
        conn = adbc_connect(srv.uri)
        query(conn, "CREATE TABLE orders (id BIGINT NOT NULL, item STRING, qty INT, PRIMARY KEY (id)) "
                    "WITH ('bucket' = '2')")
        query(conn, "INSERT INTO orders VALUES (1, 'apple', 3), (2, 'pear', 5)")
        query(conn, "INSERT INTO orders VALUES (2, 'pear', 7), (3, 'fig', 1)")
        got = query(conn, "SELECT id, item, qty FROM orders ORDER BY id").to_pylist()
        assert got == [{"id": 1, "item": "apple", "qty": 3}, {"id": 2, "item": "pear", "qty": 7},
                       {"id": 3, "item": "fig", "qty": 1}]
        # Everything is in the bucket under the prefix; nothing was written locally.
        s3 = _s3(endpoint)
        names = keys(s3, bucket, "lake/")
        assert "lake/default.db/orders/snapshot/snapshot-2" in names, names
        assert "lake/default.db/orders/snapshot/LATEST" in names
        assert not [n for n in names if ".tidelake-probe" in n], names

        # pypaimon reads tidelake's table through pyarrow's S3 filesystem.
        cat = pypaimon_catalog(endpoint, warehouse)
        t = cat.get_table("default.orders")
        rb = t.new_read_builder()
        ours = rb.new_read().to_arrow(rb.new_scan().plan().splits()).sort_by("id").to_pylist()
        assert ours == got

        # pypaimon writes a table of its own (it leaves directory markers); tidelake reads it.
        schema = __import__("pypaimon").Schema.from_pyarrow_schema(
            pa.schema([pa.field("k", pa.int64(), nullable=False), pa.field("v", pa.string())]),
            primary_keys=["k"], options={"bucket": "1"})
        cat.create_table("default.theirs", schema, False)
        theirs = cat.get_table("default.theirs")
        wb = theirs.new_batch_write_builder()
        w, c = wb.new_write(), wb.new_commit()
        w.write_arrow(pa.table({"k": pa.array([1, 2], pa.int64()), "v": ["x", "y"]},
                               schema=pa.schema([pa.field("k", pa.int64(), nullable=False),
                                                 pa.field("v", pa.string())])))
        c.commit(w.prepare_commit())
        w.close()
        c.close()
        tables = query(conn, "SHOW TABLES").to_pylist()
        assert {"orders", "theirs"} <= {r.get("table_name") or r.get("name") for r in tables}, tables
        assert query(conn, "SELECT k, v FROM theirs ORDER BY k").to_pylist() == [
            {"k": 1, "v": "x"}, {"k": 2, "v": "y"}]
        # And tidelake's commit on pypaimon's table is read back by pypaimon.
        query(conn, "INSERT INTO theirs VALUES (3, 'z')")
        theirs = cat.get_table("default.theirs")
        rb = theirs.new_read_builder()
        back = rb.new_read().to_arrow(rb.new_scan().plan().splits()).sort_by("k").to_pylist()
        assert back == [{"k": 1, "v": "x"}, {"k": 2, "v": "y"}, {"k": 3, "v": "z"}]
        conn.close()
    finally:
        stop_cleanly(srv)
    # A CLI read command works on the same warehouse with the same environment.
    out = subprocess.run([str(_binary()), "--warehouse", warehouse, "sql", "SELECT count(*) AS n FROM orders"],
                         capture_output=True, text=True, timeout=120, env=dict(os.environ, **aws_env(endpoint)),
                         cwd=str(REPO))
    assert out.returncode == 0, out.stderr
    assert "3" in out.stdout, out.stdout


def test_two_servers_on_one_s3_warehouse(endpoint, bucket):
    warehouse = f"s3://{bucket}/wh"
    a = start_server(warehouse, label="s3-a", env_extra=aws_env(endpoint))
    b = start_server(warehouse, label="s3-b", env_extra=aws_env(endpoint))
    try:
        ca, cb = adbc_connect(a.uri), adbc_connect(b.uri)
        query(ca, "CREATE TABLE events (id BIGINT NOT NULL, src STRING) WITH ('commit.max-retries' = '100')")
        errors, per = [], 6

        def insert(uri, name):
            try:
                c = adbc_connect(uri)
                for i in range(per):
                    query(c, f"INSERT INTO events VALUES ({i}, '{name}')")
                c.close()
            except Exception as e:  # reported below
                errors.append(e)

        threads = [threading.Thread(target=insert, args=(s.uri, n)) for s, n in ((a, "a"), (b, "b"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        # Each server sees every commit, both its own and the other's.
        for c in (ca, cb):
            rows = query(c, "SELECT src, count(*) AS n FROM events GROUP BY src ORDER BY src").to_pylist()
            assert rows == [{"src": "a", "n": per}, {"src": "b", "n": per}], rows
        ids = sorted(int(k.rsplit("-", 1)[1]) for k in keys(_s3(endpoint), bucket, "wh/default.db/events/snapshot/")
                     if k.rsplit("/", 1)[1].startswith("snapshot-"))
        assert ids == list(range(1, 2 * per + 1)), ids
        ca.close()
        cb.close()
    finally:
        stop_cleanly(a)
        stop_cleanly(b)


def _refused(warehouse, env, expect):
    """`serve` on `warehouse` must exit non-zero without a listening line, its last stderr line naming the
    warehouse and saying `expect`."""
    started = time.monotonic()
    with pytest.raises(ServerStartError) as e:
        start_server(warehouse, label="s3-refused", env_extra=env)
    assert time.monotonic() - started < 60
    text = str(e.value)
    assert "did not announce" in text and "first stdout line None" in text, text
    line = [ln for ln in text.splitlines() if warehouse in ln]
    assert line and expect in line[-1], text


def test_a_missing_bucket_or_an_unreachable_endpoint_is_one_error_at_start(endpoint):
    _refused("s3://no-such-bucket-anywhere/wh", aws_env(endpoint), "the bucket does not exist")
    closed = f"http://127.0.0.1:{_free_port()}"
    _refused("s3://lake/wh", dict(aws_env(endpoint), AWS_ENDPOINT_URL=closed), "listing it failed")


@pytest.fixture(scope="module")
def iam_moto():
    """A moto with IAM checks on after the first requests, which create a bucket, a writer and a reader
    whose policy allows only reads."""
    proc, url = _start_moto({"INITIAL_NO_AUTH_ACTION_COUNT": "7"})
    import boto3

    iam = boto3.client("iam", endpoint_url=url, aws_access_key_id=KEY, aws_secret_access_key=SECRET,
                       region_name="us-east-1")
    _s3(url).create_bucket(Bucket="guarded")
    users = {}
    for name, actions in (("writer", ["s3:*"]), ("reader", ["s3:GetObject", "s3:ListBucket"])):
        iam.create_user(UserName=name)
        iam.put_user_policy(UserName=name, PolicyName="p", PolicyDocument=json.dumps({
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": actions, "Resource": "*"}]}))
        k = iam.create_access_key(UserName=name)["AccessKey"]
        users[name] = (k["AccessKeyId"], k["SecretAccessKey"])
    yield url, users
    proc.kill()


def test_refused_credentials_and_a_read_only_bucket_are_one_error_at_start(iam_moto):
    url, users = iam_moto
    _refused("s3://guarded/wh", aws_env(url, "AKIAWRONGWRONGWRONG", "nope"), "the credentials were refused")
    _refused("s3://guarded/wh", aws_env(url, *users["reader"]), "writing to it failed")
    # The writer's credentials work.
    srv = start_server("s3://guarded/wh", label="s3-writer", env_extra=aws_env(url, *users["writer"]))
    try:
        conn = adbc_connect(srv.uri)
        assert query(conn, "SELECT 1 AS one").to_pylist() == [{"one": 1}]
        conn.close()
    finally:
        stop_cleanly(srv)
