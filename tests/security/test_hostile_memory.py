"""Hostile connections against a broker with DEFAULT memory settings: strangers that announce 100 MiB frames
and send 64 KiB of them, on a SASL listener (closed: sasl.server.max.receive.size) and on a PLAINTEXT one
(buffers grow with what arrives, the default queued.max.request.bytes bounds the rest, memory goes back when
they leave); and connections.max.idle.ms closing idle, half-open TLS, half-logged-in and trickling
connections while an active client stays. RSS is the broker's VmRSS from /proc; bounds, never times, are
asserted (bench/hostile_memory.py has the figures, beside Apache Kafka's)."""

from __future__ import annotations

import socket
import ssl
import struct
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.conftest import BrokerProcess, free_port
from tests.interop.helpers import parse_produce_response_v3, produce_request_v3, read_frame, record_batch, wait_until
from tests.security.certs import TestCA
from tests.security.test_limits import answered
from tests.security.test_request_memory import rss_bytes
from tests.security.test_sasl import JAAS, authenticate, handshake

MB = 1 << 20
HOSTILE = 300
ANNOUNCED = 100 * MB
SENT = 64 * 1024


def unread_bytes(port: int) -> int:
    """Bytes waiting in the receive queues of the sockets the broker accepted on ``port`` (/proc/net/tcp):
    0 once it has read everything its clients sent (or closed them)."""
    total = 0
    with open("/proc/net/tcp") as f:
        next(f)
        for line in f:
            fields = line.split()
            local_port = int(fields[1].split(":")[1], 16)
            state = fields[3]
            if local_port == port and state == "01":  # ESTABLISHED, the broker's side
                total += int(fields[4].split(":")[1], 16)
    return total


class RssPeak:
    """The broker's highest RSS, sampled every 10 ms from a thread while the block runs."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, rss_bytes(self.pid))
            self._stop.wait(0.01)

    def __enter__(self) -> "RssPeak":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(5)
        self.peak = max(self.peak, rss_bytes(self.pid))


def announce_large_frames(port: int, count: int = HOSTILE) -> list[socket.socket]:
    """``count`` connections, each announcing a 100 MiB frame and sending 64 KiB of it."""
    socks = []
    try:
        for _ in range(count):
            sock = socket.create_connection(("127.0.0.1", port), timeout=10)
            try:
                sock.sendall(struct.pack(">i", ANNOUNCED) + bytes(SENT))
            except OSError:  # already closed by the broker (a SASL listener may be that quick)
                pass
            socks.append(sock)
    except BaseException:
        for sock in socks:
            sock.close()
        raise
    return socks


def closed_by_peer(sock: socket.socket) -> bool:
    """Non-blocking: True once the broker has closed ``sock`` (EOF or reset)."""
    sock.setblocking(False)
    try:
        return sock.recv(1 << 16) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
    finally:
        sock.settimeout(10)


def settle(broker: BrokerProcess) -> int:
    """The broker's RSS once a couple of requests have been served (allocator pools warmed)."""
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as warm:
            assert answered(warm)
    return rss_bytes(broker.proc.pid)


class SaslPlainBroker:
    def __init__(self, tmp_path: Path, extra: dict[str, str] | None = None) -> None:
        self.plain, self.sasl = free_port(), free_port()
        self.process = BrokerProcess(tmp_path / "data", {
            "listeners": f"PLAINTEXT://127.0.0.1:{self.plain},SASL_PLAINTEXT://127.0.0.1:{self.sasl}",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
            **(extra or {}),
        }, port=self.plain).start()

    def login(self) -> socket.socket:
        sock = socket.create_connection(("127.0.0.1", self.sasl), timeout=10)
        assert handshake(sock, "PLAIN")[0] == 0
        assert authenticate(sock, b"\0alice\0alice-secret")[0] == 0
        return sock


@pytest.fixture
def sasl_plain_broker(tmp_path):
    broker = SaslPlainBroker(tmp_path)
    yield broker
    broker.process.stop()


@pytest.mark.timeout(180)
def test_unauthenticated_large_frames_on_a_sasl_listener_are_closed_before_anything_is_buffered(sasl_plain_broker):
    broker = sasl_plain_broker.process
    before = settle(broker)
    with RssPeak(broker.proc.pid) as rss:
        hostile = announce_large_frames(sasl_plain_broker.sasl)
        try:
            wait_until(lambda: all(closed_by_peer(s) for s in hostile), timeout=60,
                       message="every connection announcing a frame over sasl.server.max.receive.size closed")
        finally:
            for sock in hostile:
                sock.close()
    # Each stranger costs its connection objects and a 32 KiB scratch buffer until it is closed (~13 MB for
    # 300); buffering the announced frames would cost 30 GB, buffering even the 512 KiB the cap allows 150 MB.
    grown = rss.peak - before
    assert grown < 48 * MB, f"RSS grew by {grown / MB:.0f} MB"
    assert "outside 0..524288" in broker.log_tail(400_000)
    # a real login still works, and once logged in a frame over 512 KiB is a request like any other
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "broker.address.family": "v4"})
    for future in admin.create_topics([NewTopic("big", 1, 1)]).values():
        future.result(20)
    with sasl_plain_broker.login() as sock:
        sock.sendall(produce_request_v3(1, "big", 0, record_batch([bytes(600 * 1024)]), acks=1))
        _, results = parse_produce_response_v3(read_frame(sock, timeout=20))
        assert results[0][2] == 0, results


def closed_by_peer_within(sock: socket.socket, timeout: float) -> bool:
    """True if the broker closes ``sock`` (EOF or reset) within ``timeout``; bytes it sends are skipped."""
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            if sock.recv(1 << 16) == b"":
                return True
        except TimeoutError:
            return False
        except OSError:
            return True
    return False


@pytest.mark.timeout(120)
def test_a_re_authentication_exchange_is_capped_like_a_first_login(sasl_plain_broker):
    with sasl_plain_broker.login() as sock:
        assert handshake(sock, "PLAIN")[0] == 0  # a re-authentication begins (KIP-368)
        sock.sendall(struct.pack(">i", 600 * 1024) + bytes(SENT))
        assert closed_by_peer_within(sock, 20), "a 600 KiB frame during re-authentication was read"




@pytest.mark.timeout(240)
def test_large_frames_announced_on_plaintext_hold_what_arrived_and_give_it_back(broker_factory):
    broker = broker_factory()  # default settings: no queued.max.request.bytes
    before = settle(broker)
    hostile: list[socket.socket] = []
    try:
        with RssPeak(broker.proc.pid) as rss:
            hostile = announce_large_frames(broker.port)
            wait_until(lambda: unread_bytes(broker.port) == 0, timeout=60,
                       message="the broker read what the hostile connections sent")
            # a normal client is served meanwhile
            with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as client:
                assert answered(client)
        # Each holds a frame buffer of at most twice what it sent (128 KiB) and its 32 KiB scratch buffer:
        # ~48 MB for 300, where buffers sized from the announced 100 MiB would be 30 GB.
        grown = rss.peak - before
        assert grown < 150 * MB, f"RSS grew by {grown / MB:.0f} MB with {HOSTILE} connections open"
        assert all(not closed_by_peer(s) for s in hostile), "connections were dropped, not just held"
    finally:
        for sock in hostile:
            sock.close()
    # Once they are gone the buffers go back to the allocator, and malloc_trim gives the pages to the kernel.
    # What may stay: allocator arenas of small objects still partly used, and the interpreter's free lists.
    bound = before + 24 * MB
    wait_until(lambda: rss_bytes(broker.proc.pid) < bound, timeout=30,
               message=f"RSS back under {bound / MB:.0f} MB (it was {before / MB:.0f} MB before)")
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as client:
        assert answered(client)


def trickle(sock: socket.socket, every_s: float, stop: threading.Event) -> None:
    """Send ApiVersions requests one byte at a time, a byte every ``every_s``, until ``stop`` or an error."""
    from tests.interop.helpers import api_versions_request

    data = api_versions_request(1) * 1000
    for i in range(len(data)):
        if stop.wait(every_s):
            return
        try:
            sock.sendall(data[i:i + 1])
        except OSError:
            return


@pytest.mark.timeout(120)
def test_connections_max_idle_ms_closes_idle_half_open_and_half_logged_in_connections(tmp_path):
    ca = TestCA()
    plain, tls, sasl = free_port(), free_port(), free_port()
    broker = BrokerProcess(tmp_path / "data", {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{tls},SASL_PLAINTEXT://127.0.0.1:{sasl}",
        "ssl.keystore.location": str(ca.issue("broker", server=True).keystore(tmp_path / "broker.pem")),
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "connections.max.idle.ms": "1500",
    }, port=plain).start()
    stop = threading.Event()
    socks: list[socket.socket] = []
    try:
        idle = socket.create_connection(("127.0.0.1", plain), timeout=10)
        half_open_tls = socket.create_connection(("127.0.0.1", tls), timeout=10)  # no ClientHello
        half_logged_in = socket.create_connection(("127.0.0.1", sasl), timeout=10)
        assert handshake(half_logged_in, "PLAIN")[0] == 0  # and no SaslAuthenticate
        slow = socket.create_connection(("127.0.0.1", plain), timeout=10)  # a byte every 3 s: idle in between
        steady = socket.create_connection(("127.0.0.1", plain), timeout=10)  # a byte every 0.2 s: never idle
        active = socket.create_connection(("127.0.0.1", plain), timeout=10)
        socks = [idle, half_open_tls, half_logged_in, slow, steady, active]
        trickles = [threading.Thread(target=trickle, args=(s, every, stop), daemon=True)
                    for s, every in ((slow, 3.0), (steady, 0.2))]
        for thread in trickles:
            thread.start()
        doomed = {"idle": idle, "half-open TLS": half_open_tls, "half-logged-in SASL": half_logged_in,
                  "slow trickle": slow}
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and doomed:
            assert answered(active), "an active client was disconnected"
            for name in [n for n, s in doomed.items() if closed_by_peer(s)]:
                del doomed[name]
            time.sleep(0.2)
        assert not doomed, f"still open after 30 s with connections.max.idle.ms=1500: {sorted(doomed)}"
        # Kafka's idle is the time since the last activity: a connection that keeps sending is not idle
        assert not closed_by_peer(steady) and answered(active)
        # and a TLS client that does finish its handshake is served like any other
        context = ssl.create_default_context(cafile=str(ca.truststore(tmp_path / "ca.pem")))
        with context.wrap_socket(socket.create_connection(("127.0.0.1", tls), timeout=10),
                                 server_hostname="localhost") as tls_client:
            assert answered(tls_client)
    finally:
        stop.set()
        for sock in socks:
            sock.close()
        broker.stop()
