"""Limits per tenant (issue 14): concurrent statements (a bounded queue, then ResourceExhausted naming the
limit), a memory pool, a statement timeout and concurrent subscriptions, each acme's alone; beta's
small queries keep being answered while acme runs at its limits (the latencies are printed; only loose
bounds are asserted: bench/tenant_latency.py measures them). A REST catalog request takes a statement
slot of its tenant too: refused with 429 when acme's slots and queue are full, served for beta.
"""
import threading
import time

import pyarrow.flight as flight
import pytest

import tidelake
from tidelake.protocol import encode_ticket

from conftest import latencies_while
from test_hostile import code_of

CONFIG = """
[rest]
listen = "127.0.0.1:0"
[[tenants]]
name = "acme"
max_concurrent_statements = 2
memory_limit_mb = 32
statement_timeout_seconds = 3
max_subscriptions = 1
[[tenants]]
name = "beta"
memory_limit_mb = 512
[[users]]
name = "alice"
password_hash = '{pw}'
tenant = "acme"
[[users]]
name = "bob"
password_hash = '{pw}'
tenant = "beta"
"""

HEAVY = ("SELECT count(*) FROM generate_series(1, 1000000) a, generate_series(1, 1000000) b "
         "WHERE a.value + b.value = 7")
# A hash aggregation of 3M groups: about 100 MB of state, with no spilling (the disk manager is off).
BIG_SORT = "SELECT count(*) FROM (SELECT value, count(*) FROM generate_series(1, 3000000) GROUP BY value)"


@pytest.fixture(scope="module")
def limited(tmp_path_factory):
    from conftest import start_configured, stop_cleanly

    srv = start_configured(tmp_path_factory.mktemp("limits"), CONFIG, "limits server")
    try:
        yield srv
    finally:
        stop_cleanly(srv)


def _run(srv, user, sql, out):
    started = time.monotonic()
    try:
        with tidelake.Client(srv.uri, user=user, password="pw") as c:
            c.sql(sql)
        out.append(("OK", time.monotonic() - started, ""))
    except Exception as e:
        out.append((code_of(e), time.monotonic() - started, str(e)))


def test_statements_beyond_the_limit_and_its_queue_are_refused_and_others_are_served(limited):
    srv = limited
    outcomes = []
    threads = [threading.Thread(target=_run, args=(srv, "alice", HEAVY, outcomes)) for _ in range(5)]
    for t in threads:
        t.start()
        time.sleep(0.2)
    with tidelake.Client(srv.uri, user="bob", password="pw") as bob:
        latencies = latencies_while(threads, lambda: bob.sql("SELECT 1 AS one").num_rows == 1)
    codes = sorted(o[0] for o in outcomes)
    # 2 run (and hit the 3 s timeout), 2 wait (and time out while waiting or running), 1 is refused.
    refused = [o for o in outcomes if "max_concurrent_statements = 2" in o[2]]
    assert len(refused) >= 1, outcomes
    assert all(c == "RESOURCE_EXHAUSTED" for c in codes), outcomes
    assert all(o[1] < 15 for o in outcomes), outcomes
    p95 = latencies[int(len(latencies) * 0.95)] if latencies else None
    print(f"\nbeta SELECT 1 while acme is at max_concurrent_statements: n={len(latencies)} "
          f"p50={latencies[len(latencies) // 2] * 1000:.1f} ms p95={p95 * 1000:.1f} ms max={latencies[-1] * 1000:.1f} ms")
    assert latencies and p95 < 1.0


def test_the_memory_pool_and_timeout_are_the_tenants_own(limited):
    srv = limited
    out = []
    _run(srv, "alice", BIG_SORT, out)
    assert out[0][0] == "RESOURCE_EXHAUSTED", out
    out = []
    _run(srv, "bob", BIG_SORT, out)
    assert out[0][0] == "OK", out
    # beta has no statement timeout: a 4 s statement finishes.
    with tidelake.Client(srv.uri, user="bob", password="pw") as bob:
        slow = "SELECT count(*) AS n FROM generate_series(1, 60000000)"
        started = time.monotonic()
        assert bob.sql(slow).num_rows == 1
        took = time.monotonic() - started
    out = []
    _run(srv, "alice", HEAVY, out)
    assert out[0][0] == "RESOURCE_EXHAUSTED" and out[0][1] < 3 + 5, out
    print(f"\nbeta's long count took {took:.1f} s; acme's join ended after {out[0][1]:.1f} s")


def test_subscriptions_beyond_the_limit_are_refused(limited):
    srv = limited
    with tidelake.Client(srv.uri, user="alice", password="pw") as alice:
        alice.sql("CREATE TABLE default.feed (id BIGINT NOT NULL, PRIMARY KEY (id)) WITH ('bucket' = '1')")
        alice.sql("INSERT INTO default.feed VALUES (1)")
    c = flight.FlightClient(srv.uri)
    opts = flight.FlightCallOptions(headers=[c.authenticate_basic_token("alice", "pw")], timeout=30)
    ticket = flight.Ticket(encode_ticket("default.feed", "from-snapshot", snapshot_id=1))
    first = c.do_get(ticket, opts)
    first.read_chunk()  # the subscription is open and streaming
    with pytest.raises(Exception) as ei:
        c.do_get(ticket, opts).read_chunk()
    assert "max_subscriptions = 1" in str(ei.value)
    assert code_of(ei.value) == "RESOURCE_EXHAUSTED", str(ei.value)
    first.cancel()
    # Once the first one is gone, another may open (the slot is released when its stream ends).
    deadline = time.monotonic() + 10
    while True:
        try:
            again = c.do_get(ticket, opts)
            again.read_chunk()
            again.cancel()
            break
        except Exception as e:
            assert code_of(e) == "RESOURCE_EXHAUSTED", str(e)
            assert time.monotonic() < deadline, "the subscription slot was never released"
            time.sleep(0.2)
    c.close()


# Last in the module: its timed-out counts may still be winding down when it ends.
def test_rest_requests_take_their_tenants_statement_slots(limited):
    from conftest import announced
    from test_rest_catalog import REST_LINE, call, token

    srv = limited
    url = announced(srv, REST_LINE)
    alice, bob = token(srv, "alice"), token(srv, "bob")
    assert call(url, "GET", "/v1/acme/databases", alice)[0] == 200
    outcomes = []
    # Long counts (little memory: the pool is not what is tested) that run into acme's 3 s timeout.
    slow = "SELECT count(*) AS n FROM generate_series(1, 600000000)"
    threads = [threading.Thread(target=_run, args=(srv, "alice", slow, outcomes)) for _ in range(6)]
    for t in threads:
        t.start()
        time.sleep(0.2)
    # While 2 of acme's statements run and 2 wait, a REST request of acme's finds no slot and no room
    # to wait; beta's are served meanwhile.
    acme, beta = [], []
    while any(t.is_alive() for t in threads):
        acme.append(call(url, "GET", "/v1/acme/databases", alice))
        beta.append(call(url, "GET", "/v1/beta/databases", bob)[0])
        time.sleep(0.05)
    refused = [b for s, b in acme if s == 429]
    assert refused and all(b["code"] == 429 for b in refused), (acme, outcomes)
    assert all("max_concurrent_statements = 2" in b["message"] for b in refused), refused
    assert set(beta) == {200}, beta
    for t in threads:
        t.join()
    assert call(url, "GET", "/v1/acme/databases", alice)[0] == 200
