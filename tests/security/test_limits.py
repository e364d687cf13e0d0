"""Connection limits: max.connections.per.ip (with overrides) and max.connections, on real sockets."""

from __future__ import annotations

import socket
import struct

import pytest

from tests.interop.helpers import frame, read_frame, request_header_v1, wait_closed, wait_until

API_VERSIONS = 18


def answered(sock: socket.socket) -> bool:
    """Whether an ApiVersions request on ``sock`` is answered (a closed connection is not)."""
    try:
        sock.sendall(frame(request_header_v1(API_VERSIONS, 1, 3) + b""))
        return struct.unpack_from(">ih", read_frame(sock, timeout=5))[1] == 0
    except (OSError, AssertionError, EOFError):
        return False


def connect(port: int) -> socket.socket:
    return socket.create_connection(("127.0.0.1", port), timeout=10)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("settings, limit", [
    ({"max.connections.per.ip": "3"}, 3),
    ({"max.connections.per.ip": "1", "max.connections.per.ip.overrides": "127.0.0.1:4"}, 4),
    ({"max.connections": "2"}, 2),
])
def test_connections_over_the_limit_are_closed(broker_factory, settings, limit):
    broker = broker_factory(settings)
    open_ = [connect(broker.port) for _ in range(limit)]
    try:
        assert all(answered(s) for s in open_)
        extra = connect(broker.port)
        assert wait_closed(extra), "a connection over the limit stayed open"
        extra.close()
        open_.pop().close()  # one leaves: a new one gets in again
        def admitted() -> bool:
            with connect(broker.port) as s:
                return answered(s)
        wait_until(admitted, timeout=10, message="a connection admitted once one closed")
    finally:
        for s in open_:
            s.close()


@pytest.mark.timeout(30)
def test_a_bad_override_is_refused_at_start(tmp_path):
    from tests.security.test_tls import serve

    result = serve(tmp_path / "data", {"max.connections.per.ip.overrides": "127.0.0.1"})
    assert result.returncode == 2 and "max.connections.per.ip.overrides" in result.stderr, result.stderr
