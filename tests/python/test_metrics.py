"""`[metrics] listen`: the Prometheus endpoint a real scrape reads (OpenMetrics text over HTTP), with the
numbers moving as calls are made: commits by kind, rows written and read, RPCs by status code,
object-store requests by kind, statements and subscriptions; and one log line per request at info."""
import re
import time
import urllib.error
import urllib.request

import pytest

from conftest import adbc_connect, announced, start_configured, stop_cleanly


def scrape(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        assert r.headers["Content-Type"].startswith("application/openmetrics-text"), r.headers
        return r.read().decode()


def value(text, name, labels=""):
    """The sample `name{labels}` in `text` (0 when the family has no such sample yet)."""
    pattern = rf"^{re.escape(name)}{re.escape('{' + labels + '}') if labels else ''} (\S+)$"
    m = re.search(pattern, text, re.M)
    return float(m.group(1)) if m else 0.0


@pytest.fixture
def metered(tmp_path):
    srv = start_configured(tmp_path, '[metrics]\nlisten = "127.0.0.1:0"\n', "metrics-server",
                           env_extra={"TIDELAKE_LOG": "warn,audit=info"})
    yield srv, announced(srv, r"tidelake metrics on (http://127\.0\.0\.1:\d+/metrics)")
    stop_cleanly(srv)


def test_metrics_follow_the_calls(metered):
    srv, url = metered
    before = scrape(url)
    assert before.endswith("# EOF\n")
    conn = adbc_connect(srv.uri)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE m (id BIGINT NOT NULL, v STRING, PRIMARY KEY (id)) WITH ('bucket' = '1')")
        cur.fetchall()
        for i in range(3):
            cur.execute(f"INSERT INTO m VALUES ({i}, 'x'), ({i + 10}, 'y')")
            cur.fetchall()
        cur.execute("SELECT count(*) AS n FROM m")
        assert cur.fetchall() == [(6,)]
        # Point queries by the whole primary key, bound and literal, are read without planning.
        cur.execute("SELECT v FROM m WHERE id = ?", parameters=(10,))
        assert cur.fetchall() == [("y",)]
        cur.execute("SELECT id, v FROM m WHERE id = 2")
        assert cur.fetchall() == [(2, "x")]
        cur.execute("SELECT v FROM m WHERE id = 2 LIMIT 1")  # not a point query's shape
        assert cur.fetchall() == [("x",)]
        with pytest.raises(Exception):
            cur.execute("SELECT * FROM no_such_table")
    conn.close()
    after = scrape(url)
    appends = value(after, "tidelake_commits_total", 'kind="APPEND"')
    assert appends - value(before, "tidelake_commits_total", 'kind="APPEND"') == 3, after
    assert value(after, "tidelake_rows_written_total") - value(before, "tidelake_rows_written_total") >= 6
    assert value(after, "tidelake_rows_read_total") >= 6
    assert value(after, "tidelake_commit_duration_seconds_count") >= 3
    assert value(after, "tidelake_point_queries_total") - value(before, "tidelake_point_queries_total") == 2, after
    assert value(after, "tidelake_requests_total", 'code="OK"') > value(before, "tidelake_requests_total", 'code="OK"')
    assert value(after, "tidelake_requests_total", 'code="NOT_FOUND"') >= 1, after
    assert value(after, "tidelake_object_store_requests_total", 'op="get"') > 0
    assert value(after, "tidelake_object_store_requests_total", 'op="head"') > 0
    # Nothing runs now.
    assert value(after, "tidelake_active_statements") == 0
    assert value(after, "tidelake_subscriptions") == 0
    # Anything but /metrics is 404; the endpoint takes no body.
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(url.replace("/metrics", "/other"), timeout=10)
    assert e.value.code == 404
    # One log line per request at info (the audit events, as no audit file is configured).
    lines = [ln for ln in srv.stderr_since(0).splitlines() if "audit" in ln and "method" in ln]
    assert any("DoGet" in ln for ln in lines) and any("GetFlightInfo" in ln for ln in lines), lines[-5:]


def test_a_taken_metrics_port_is_an_error_at_start(tmp_path):
    import socket

    from conftest import ServerStartError

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    port = s.getsockname()[1]
    try:
        with pytest.raises(ServerStartError) as e:
            start_configured(tmp_path, f'[metrics]\nlisten = "127.0.0.1:{port}"\n', "metrics-taken")
        assert f"[metrics] listen 127.0.0.1:{port}" in str(e.value), str(e.value)[-2000:]
    finally:
        s.close()
