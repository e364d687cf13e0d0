"""Incremental fetch sessions (KIP-227) against the real broker, spoken over a raw socket with our codec: a
session is made on request, its incremental fetches name only what changed and are answered only what has
news, forgotten partitions stop coming back, and the session's errors are Kafka's. (The Java client's
consumer and the brokers' own replica fetchers use sessions too: tests/interop/test_java.py, tests/cluster.)"""

from __future__ import annotations

import socket

import pytest

from odradek.protocol import codec
from odradek.protocol.errors import ErrorCode
from tests.interop.helpers import assert_delivered, connect, produce_messages, read_frame
from tests.interop.test_broker_semantics import create_topic

VERSION = 12  # topics by name; sessions exist from v7


class FetchClient:
    """One connection; each fetch names the partitions given (topic, partition, fetch offset)."""

    def __init__(self, bootstrap: str) -> None:
        self.sock: socket.socket = connect(bootstrap)
        self.correlation_id = 0

    def fetch(self, session_id: int, epoch: int, partitions: list[tuple[str, int, int]],
              forgotten: list[tuple[str, int]] = (), max_wait_ms: int = 0) -> dict:
        topics: dict[str, list] = {}
        for topic, index, offset in partitions:
            topics.setdefault(topic, []).append({"partition": index, "fetch_offset": offset,
                                                 "partition_max_bytes": 1 << 20, "current_leader_epoch": -1,
                                                 "log_start_offset": -1, "last_fetched_epoch": -1})
        gone: dict[str, list] = {}
        for topic, index in forgotten:
            gone.setdefault(topic, []).append(index)
        self.correlation_id += 1
        self.sock.sendall(codec.encode_request(1, VERSION, self.correlation_id, "session-test", {
            "replica_id": -1, "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": 50 << 20,
            "isolation_level": 0, "session_id": session_id, "session_epoch": epoch,
            "topics": [{"topic": t, "partitions": p} for t, p in topics.items()],
            "forgotten_topics_data": [{"topic": t, "partitions": p} for t, p in gone.items()]}))
        correlation_id, response = codec.decode_response(1, VERSION, read_frame(self.sock))
        assert correlation_id == self.correlation_id
        return response

    def close(self) -> None:
        self.sock.close()


def answered(response: dict) -> dict[tuple[str, int], dict]:
    return {(t["topic"], p["partition_index"]): p for t in response["responses"] for p in t["partitions"]}


def produce(bootstrap: str, topic: str, partition: int, count: int) -> None:
    assert_delivered(produce_messages(bootstrap, topic, [{"value": b"v%d" % i, "partition": partition}
                                                         for i in range(count)]))


@pytest.fixture
def client(broker):
    c = FetchClient(broker.bootstrap)
    yield c
    c.close()


@pytest.mark.timeout(60)
def test_incremental_fetches_name_and_return_only_what_changed(broker, client, topic_name):
    create_topic(broker.bootstrap, topic_name, partitions=3)
    produce(broker.bootstrap, topic_name, 0, 2)
    full = client.fetch(0, 0, [(topic_name, p, 0) for p in range(3)])
    assert full["error_code"] == ErrorCode.NONE and full["session_id"] != 0
    session = full["session_id"]
    first = answered(full)
    assert sorted(first) == [(topic_name, p) for p in range(3)]  # a full answer names every partition
    assert first[(topic_name, 0)]["high_watermark"] == 2 and first[(topic_name, 0)]["records"]

    # nothing new: the incremental answer is empty (the partition at offset 0 still has records, so the
    # fetcher moves it past them; the others are not named and have nothing to say)
    quiet = client.fetch(session, 1, [(topic_name, 0, 2)])
    assert quiet["error_code"] == ErrorCode.NONE and quiet["session_id"] == session
    assert answered(quiet) == {}

    # records on partition 1 only: that partition alone comes back, though the fetch names none
    produce(broker.bootstrap, topic_name, 1, 3)
    news = answered(client.fetch(session, 2, [], max_wait_ms=5000))
    assert list(news) == [(topic_name, 1)]
    assert news[(topic_name, 1)]["high_watermark"] == 3 and news[(topic_name, 1)]["records"]

    # the fetcher moves partition 1 on and forgets partition 2; new records there no longer come back
    moved = answered(client.fetch(session, 3, [(topic_name, 1, 3)], forgotten=[(topic_name, 2)]))
    assert moved == {}
    produce(broker.bootstrap, topic_name, 2, 1)
    produce(broker.bootstrap, topic_name, 0, 1)
    later = answered(client.fetch(session, 4, [], max_wait_ms=5000))
    assert list(later) == [(topic_name, 0)]


@pytest.mark.timeout(60)
def test_session_errors_and_closing(broker, client, topic_name):
    create_topic(broker.bootstrap, topic_name)
    session = client.fetch(0, 0, [(topic_name, 0, 0)])["session_id"]
    assert session != 0
    wrong_epoch = client.fetch(session, 5, [])
    assert wrong_epoch["error_code"] == ErrorCode.INVALID_FETCH_SESSION_EPOCH and wrong_epoch["responses"] == []
    unknown = client.fetch(session + 1 if session < 0x7FFFFFFE else 1, 1, [])
    assert unknown["error_code"] == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    assert client.fetch(session, 1, [])["error_code"] == ErrorCode.NONE  # the session survived both

    # a session goes on over another connection (it is the broker's, not the connection's)
    other = FetchClient(broker.bootstrap)
    try:
        assert other.fetch(session, 2, [])["error_code"] == ErrorCode.NONE
    finally:
        other.close()

    # epoch -1 closes it and is answered as a full fetch without a session
    closing = client.fetch(session, -1, [(topic_name, 0, 0)])
    assert closing["error_code"] == ErrorCode.NONE and closing["session_id"] == 0
    assert list(answered(closing)) == [(topic_name, 0)]
    assert client.fetch(session, 3, [])["error_code"] == ErrorCode.FETCH_SESSION_ID_NOT_FOUND

    # a sessionless fetch (librdkafka's) is answered in full with session id 0, as before
    plain = client.fetch(0, -1, [(topic_name, 0, 0)])
    assert plain["session_id"] == 0 and list(answered(plain)) == [(topic_name, 0)]


@pytest.mark.timeout(60)
def test_a_full_cache_gives_no_session(broker_factory, topic_name):
    broker = broker_factory({"max.incremental.fetch.session.cache.slots": "1"})
    create_topic(broker.bootstrap, topic_name)
    client = FetchClient(broker.bootstrap)
    try:
        first = client.fetch(0, 0, [(topic_name, 0, 0)])
        assert first["session_id"] != 0
        second = client.fetch(0, 0, [(topic_name, 0, 0)])  # the first is not idle long enough to be evicted
        assert second["error_code"] == ErrorCode.NONE and second["session_id"] == 0
        assert list(answered(second)) == [(topic_name, 0)]
        assert client.fetch(first["session_id"], 1, [])["error_code"] == ErrorCode.NONE
    finally:
        client.close()
