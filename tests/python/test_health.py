"""grpc.health.v1 (issue 15): SERVING once the warehouse is open, for callers without credentials;
NOT_SERVING to watchers when the server starts draining, after which their Watch streams end and the
server exits promptly. Driven with grpcio and hand-encoded messages (HealthCheckRequest.service = 1,
HealthCheckResponse.status = 1: 1 SERVING, 2 NOT_SERVING).
"""
import signal
import time

import grpc
import pytest

from test_flight_sql import _pb_bytes

SERVING, NOT_SERVING = b"\x08\x01", b"\x08\x02"
FLIGHT = "arrow.flight.protocol.FlightService"


def _identity(b):
    return b



def test_health_is_served_without_credentials(server_factory):
    srv = server_factory()
    with grpc.insecure_channel(f"127.0.0.1:{srv.port}") as ch:
        check = ch.unary_unary("/grpc.health.v1.Health/Check", request_serializer=_identity,
                               response_deserializer=_identity)
        assert check(b"", timeout=10) == SERVING
        assert check(_pb_bytes(1, FLIGHT.encode()), timeout=10) == SERVING
        with pytest.raises(grpc.RpcError) as ei:
            check(_pb_bytes(1, b"no.such.Service"), timeout=10)
        assert ei.value.code() == grpc.StatusCode.NOT_FOUND
        # Everything else still needs credentials.
        actions = ch.unary_stream("/arrow.flight.protocol.FlightService/ListActions",
                                  request_serializer=_identity, response_deserializer=_identity)
        with pytest.raises(grpc.RpcError) as ei:
            list(actions(b"", timeout=10))
        assert ei.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_watchers_see_not_serving_when_the_server_drains(server_factory):
    srv = server_factory()
    with grpc.insecure_channel(f"127.0.0.1:{srv.port}") as ch:
        watch = ch.unary_stream("/grpc.health.v1.Health/Watch", request_serializer=_identity,
                                response_deserializer=_identity)
        stream = watch(_pb_bytes(1, FLIGHT.encode()), timeout=30)
        assert next(stream) == SERVING
        started = time.monotonic()
        srv.proc.send_signal(signal.SIGTERM)
        assert next(stream) == NOT_SERVING
        # The Watch stream ends (it does not hold the shutdown open), and the server exits.
        rest = []
        try:
            rest = list(stream)
        except grpc.RpcError:
            pass
        assert rest == [] or rest == [NOT_SERVING], rest
    assert srv.proc.wait(timeout=10) == 0
    assert time.monotonic() - started < 5
