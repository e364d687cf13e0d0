"""ShareFetch under client quotas (issue 40 item 9): a share-group member over its client id's
`consumer_byte_rate` is throttled as Kafka throttles ShareFetch with the fetch quota: the response that would
take it over the rate carries `throttle_time_ms` and no records, and the next one gets none either. The same
requests go to odradek and to Apache Kafka 4.4 in this run, and another client id is not held back."""

from __future__ import annotations

import time
import uuid
from typing import Callable

import pytest

from odradek.protocol import codec
from tests.interop.helpers import assert_delivered, bounded, connect, produce_messages, read_frame
from tests.interop.test_broker_semantics import request
from tests.interop.test_share_fetch_v2 import acquired, fetch_body
from tests.interop.test_broker_semantics import create_topic
from tests.interop.test_share_groups import set_group_configs
from tests.reference.conftest import kafka_reference  # noqa: F401 - the session fixture (skips without Kafka)

SHARE_GROUP_HEARTBEAT, SHARE_FETCH, ALTER_CLIENT_QUOTAS = 76, 78, 49
QUOTA = 2048  # bytes a second
VALUE = b"s" * 1024


@pytest.fixture(params=["odradek", "kafka"])
def bootstrap(request: pytest.FixtureRequest, broker_factory: Callable) -> str:
    if request.param == "kafka":
        return request.getfixturevalue("kafka_reference").bootstrap
    return broker_factory({"quota.window.num": "3", "quota.window.size.seconds": "1"}).bootstrap


def call(bootstrap: str, api_key: int, version: int, body: dict, client_id: str) -> dict:
    with connect(bootstrap) as sock:
        sock.sendall(codec.encode_request(api_key, version, 7, client_id, body))
        correlation_id, response = codec.decode_response(api_key, version, read_frame(sock, timeout=40))
        assert correlation_id == 7
        return response


def joined(bootstrap: str, group: str, topic: str, member: str) -> bytes:
    """``member`` joins ``group`` (asked again while the coordinator loads: Kafka creates its offsets topic
    on the first FindCoordinator); the topic's id."""
    for _ in bounded(100, 30):
        request(bootstrap, 10, 4, {"key_type": 0, "coordinator_keys": [group]})
        answer = request(bootstrap, SHARE_GROUP_HEARTBEAT, 1, {
            "group_id": group, "member_id": member, "member_epoch": 0, "rack_id": None,
            "subscribed_topic_names": [topic]})
        if answer["error_code"] == 0 and answer["assignment"] and answer["assignment"]["topic_partitions"]:
            return answer["assignment"]["topic_partitions"][0]["topic_id"]
        time.sleep(0.3)
    raise AssertionError(f"{member} did not join {group}: {answer}")


def set_consumer_byte_rate(bootstrap: str, client_id: str, rate: float) -> None:
    body = request(bootstrap, ALTER_CLIENT_QUOTAS, 1, {"validate_only": False, "entries": [
        {"entity": [{"entity_type": "client-id", "entity_name": client_id}],
         "ops": [{"key": "consumer_byte_rate", "value": rate, "remove": False}]}]})
    assert [e["error_code"] for e in body["entries"]] == [0], body


@pytest.mark.timeout(120)
def test_share_fetch_over_the_consumer_byte_rate_is_throttled(bootstrap, topic_name):
    slow = f"share-slow-{uuid.uuid4().hex[:6]}"
    set_consumer_byte_rate(bootstrap, slow, QUOTA)
    create_topic(bootstrap, topic_name, partitions=1)
    group = f"{topic_name}-g"
    set_group_configs(bootstrap, group, share_auto_offset_reset="earliest")
    assert_delivered(produce_messages(bootstrap, topic_name, [{"value": VALUE, "partition": 0}] * 200))
    topic_id = joined(bootstrap, group, topic_name, "member-slow")
    other_group = f"{group}-free"  # its own group: every record is there for it
    set_group_configs(bootstrap, other_group, share_auto_offset_reset="earliest")
    joined(bootstrap, other_group, topic_name, "member-free")
    # a quota reaches Kafka's brokers a moment after AlterClientQuotas: fetch until the throttle shows
    throttled = None
    epoch = 0
    got = 0
    for _ in bounded(20, 60):
        answer = call(bootstrap, SHARE_FETCH, 1, fetch_body(group, "member-slow", topic_id, epoch=epoch,
                                                             max_records=20), slow)
        assert answer["error_code"] == 0, answer
        epoch += 1
        got += sum(last - first + 1 for first, last, _ in acquired(answer))
        if answer["throttle_time_ms"] > 0:
            throttled = answer
            break
    assert throttled is not None, "no ShareFetch of the slow client was throttled"
    assert acquired(throttled) == [], "a throttled response carries no records (Kafka's throttled response)"
    # the next fetch, at once, gets no records either (odradek: throttled again, the records it was not
    # sent given back to the group; Kafka: they stay locked to the member until their lock runs out)
    again = call(bootstrap, SHARE_FETCH, 1, fetch_body(group, "member-slow", topic_id, epoch=epoch, max_records=20),
                 slow)
    assert again["error_code"] == 0 and acquired(again) == []
    # another client id is not held to the quota
    free = call(bootstrap, SHARE_FETCH, 1, fetch_body(other_group, "member-free", topic_id, max_records=20),
                "share-free")
    assert free["throttle_time_ms"] == 0 and acquired(free)
