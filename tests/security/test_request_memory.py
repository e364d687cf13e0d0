"""queued.max.request.bytes: connections that announce large requests and trickle them in hold at most the
budget between them; small requests are served meanwhile, and a large one waits until memory is given back."""

from __future__ import annotations

import socket
import struct
import time

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.interop.helpers import parse_produce_response_v3, produce_request_v3, read_frame, record_batch
from tests.security.test_limits import answered

MB = 1 << 20


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def trickler(port: int) -> socket.socket:
    """A connection that announces a 50 MB request and sends 20 KB of it."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(struct.pack(">i", 50 * MB) + bytes(20 * 1024))
    return sock


@pytest.mark.timeout(120)
def test_trickling_large_requests_hold_at_most_the_budget(broker_factory, topic_name):
    # each trickler's buffer is 64 KiB (twice what it sent, at least OWN_BUFFER_FIRST_MIN): 16 fill the budget
    broker = broker_factory({"queued.max.request.bytes": str(1 * MB), "socket.request.max.bytes": str(64 * MB)})
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "broker.address.family": "v4"})
    for future in admin.create_topics([NewTopic(topic_name, 1, 1)]).values():
        future.result(20)
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as warm:
        assert answered(warm)
    before = rss_bytes(broker.proc.pid)
    hostile = [trickler(broker.port) for _ in range(60)]
    try:
        time.sleep(1.0)  # the broker reads what they sent (no event says when; a slow read only weakens the check)
        grown = rss_bytes(broker.proc.pid) - before
        # buffers sized from the announced 50 MB would be 3 GB; with the budget, 1 MB and small change
        assert grown < 20 * MB, f"RSS grew by {grown / MB:.0f} MB"
        with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as small:
            assert answered(small)  # small requests need no budget
        # a real large produce waits for memory, and is served once the hostile connections go
        producer = socket.create_connection(("127.0.0.1", broker.port), timeout=30)
        batch = record_batch([bytes(600 * 1024)])
        producer.sendall(produce_request_v3(1, topic_name, 0, batch, acks=1))
        producer.settimeout(1.0)
        with pytest.raises(socket.timeout):
            producer.recv(1)
        for sock in hostile:  # paused, not dropped: each waits its turn for memory
            sock.setblocking(False)
            with pytest.raises(BlockingIOError):
                sock.recv(1)
        for sock in hostile:
            sock.close()
        hostile.clear()
        _, results = parse_produce_response_v3(read_frame(producer, timeout=20))
        assert results[0][2] == 0, results
        producer.close()
    finally:
        for sock in hostile:
            sock.close()
