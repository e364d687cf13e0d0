"""A restarted broker answers clients only once it knows its cluster.

After kill -9 a broker restarts while its previous ZooKeeper session still holds its registration; it opens
its listeners at once (the controller reaches it through them) but holds every client request until it has
registered and the controller's metadata names it. A Metadata request sent the moment the port accepts is
answered late, never with an empty cluster (librdkafka forgets every broker it knew on such an answer).
"""

from __future__ import annotations

import socket
import threading
import time

import pytest

from odradek.protocol import codec
from tests.cluster.common import REPLICATED, create_topic
from tests.interop.helpers import read_frame, wait_until

METADATA = 3
METADATA_VERSION = 9


def metadata_request(correlation_id: int, topic: str) -> bytes:
    body = {"topics": [{"name": topic}], "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False}
    return codec.encode_request(METADATA, METADATA_VERSION, correlation_id, "join-test", body)


def connect_when_listening(port: int, deadline: float) -> socket.socket:
    """The first connection the restarting broker accepts (it listens before it has joined)."""
    while time.monotonic() < deadline:
        try:
            return socket.create_connection(("127.0.0.1", port), timeout=1.0)
        except OSError:
            time.sleep(0.005)
    raise AssertionError("the restarted broker never accepted a connection")


@pytest.mark.timeout(180)
def test_a_restarted_broker_answers_metadata_only_once_it_has_joined(cluster_factory):
    cluster = cluster_factory(3, settings=REPLICATED).start()
    cluster.wait_ready()
    topic = "joined"
    create_topic(cluster, topic, partitions=3)
    victim = 2
    broker = cluster.broker(victim)
    cluster.kill(victim)  # its ZooKeeper session outlives it by the session timeout
    started = threading.Thread(target=broker.start, daemon=True)  # returns at its ready line
    started.start()
    sock = connect_when_listening(broker.port, time.monotonic() + 60)
    try:
        sent = time.monotonic()
        sock.sendall(metadata_request(1, topic))
        _, answer = codec.decode_response(METADATA, METADATA_VERSION, read_frame(sock, timeout=60))
        waited = time.monotonic() - sent
    finally:
        sock.close()
    started.join(60)
    assert broker.is_running()
    brokers = {b["node_id"] for b in answer["brokers"]}
    assert victim in brokers and len(brokers) == 3, (answer, waited)
    assert answer["controller_id"] in cluster.ids, answer
    [found] = answer["topics"]
    assert found["error_code"] == 0 and len(found["partitions"]) == 3, found
    assert all(p["leader_id"] in cluster.ids for p in found["partitions"]), found
    # and it serves on: the same question, asked after it joined, is answered alike
    wait_until(lambda: len(cluster.metadata(victim).brokers) == 3, timeout=30, message="metadata of 3 brokers")
    log = broker.log_tail(200_000)
    assert "larger than available brokers" not in log, log[-3000:]
    assert "Traceback" not in log, log[-3000:]
