"""Shutdown with live streams: SIGTERM ends every open changelog subscription at once with UNAVAILABLE
(a status subscribers retry, against this server once it is back or another one), so the server exits
promptly instead of holding its 30 s grace period for streams that never end by themselves."""
import threading
import time

import pyarrow.flight as flight

from conftest import PASSWORD, USER, start_server
from tidelake.protocol import encode_ticket


def test_sigterm_ends_open_subscriptions_with_unavailable_and_exits_promptly(tmp_path):
    import tidelake

    srv = start_server(tmp_path / "warehouse", label="server to stop")
    with tidelake.Client(srv.uri, user=USER, password=PASSWORD) as c:
        c.execute("CREATE TABLE default.t (id BIGINT NOT NULL, v STRING, PRIMARY KEY (id)) WITH ('bucket' = '1')")
        c.execute("INSERT INTO default.t VALUES (1, 'a')")
    client = flight.connect(srv.uri)
    options = flight.FlightCallOptions(headers=[client.authenticate_basic_token(USER, PASSWORD)])
    outcomes = []

    def follow():
        reader = client.do_get(flight.Ticket(encode_ticket("default.t", "latest-full", heartbeat_millis=200)),
                               options)
        try:
            while True:
                reader.read_chunk()
        except StopIteration:
            outcomes.append("ended without an error")
        except Exception as e:  # noqa: BLE001 - the status is what is checked
            outcomes.append(e)

    followers = [threading.Thread(target=follow, daemon=True) for _ in range(2)]
    for f in followers:
        f.start()
    time.sleep(1.5)  # both subscriptions are open and idle, waiting for commits
    assert not outcomes, outcomes
    started = time.monotonic()
    rc = srv.stop(timeout=20)
    took = time.monotonic() - started
    for f in followers:
        f.join(timeout=10)
    assert rc == 0, f"exit {rc}:\n" + srv.stderr_since(0)[-3000:]
    assert took < 10, f"shutdown took {took:.1f} s with open subscriptions"
    assert len(outcomes) == 2, outcomes
    for e in outcomes:
        assert isinstance(e, flight.FlightUnavailableError), repr(e)
        assert "shutting down" in str(e), str(e)
    client.close()
