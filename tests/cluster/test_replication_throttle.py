"""The leader side of the replication throttle (issue 40) on a three-broker cluster: a partition whose topic names
it in `leader.replication.throttled.replicas` is sent to a catching-up follower at no more than the leader's
`leader.replication.throttled.rate`, while a partition moved in the same run without a throttle is not held.

The bound checked is a correctness bound, not a speed: at every look, the new replica holds no more than the
rate allows since the move began, plus Kafka's own slack (its rate is measured over at least ten of its eleven
one-second windows, so a move may start with ten seconds' worth) plus a few fetches' worth of margin."""

from __future__ import annotations

import time

import pytest

from confluent_kafka import Producer

from tests.cluster.test_reassignment import (BROKER, SETTINGS, TOPIC, alter_errors, create_placed, log_sizes,
                                             set_configs, settled)
from tests.interop.helpers import wait_until

RATE = 100_000  # bytes/s
FETCH_BYTES = 65536  # replica.fetch.max.bytes: what one follower fetch may bring of a partition
KAFKA_SLACK_S = 11  # Kafka's quota window: 11 samples of 1 s, measured over at least 10 s
MARGIN = 4 * FETCH_BYTES + 256 * 1024
WATCH_S = 14  # how long the throttled catch-up is watched
DESCRIBE_CONFIGS = 32


def fill(cluster, topic: str, partition: int, count: int, size: int = 1000) -> None:
    """``count`` records of ``size`` bytes in batches of at most 16 KiB (librdkafka's own default is 1 MB: a
    follower fetch always brings a whole batch, so big ones would make the throttle's steps coarse)."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "broker.address.family": "v4",
                         "linger.ms": 20, "batch.size": 16384})
    for i in range(count):
        producer.produce(topic, value=b"%08d" % i + b"x" * (size - 8), partition=partition)
        if i % 500 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0


def topic_config_seen(cluster, broker: int, topic: str, name: str, value: str | None) -> bool:
    from tests.interop.test_broker_semantics import request
    response = request(cluster.broker(broker).bootstrap, DESCRIBE_CONFIGS, 1, {
        "resources": [{"resource_type": TOPIC, "resource_name": topic, "configuration_keys": [name]}],
        "include_synonyms": False})
    configs = response["results"][0]["configs"]
    return bool(configs) and configs[0]["value"] == value and (value is None or configs[0]["config_source"] == 1)


@pytest.mark.timeout(240)
def test_the_leader_throttle_bounds_a_moving_replicas_catch_up(cluster_factory, topic_name):
    cluster = cluster_factory(3, settings={**SETTINGS, "replica.fetch.max.bytes": str(FETCH_BYTES)}).start()
    cluster.wait_ready()
    create_placed(cluster, topic_name, [[1], [1]])
    fill(cluster, topic_name, 0, 4000)  # ~4 MB each: 40 s at the rate, after Kafka's 10 s head start
    fill(cluster, topic_name, 1, 4000)
    sizes = log_sizes(cluster, 1)
    total0, total1 = sizes[(topic_name, 0)], sizes[(topic_name, 1)]
    assert total0 > RATE * (WATCH_S + KAFKA_SLACK_S) + MARGIN
    # the leader (broker 1) throttles partition 0 only; the rate first, so the topic config seen means both are
    set_configs(cluster, 1, [(BROKER, "1", {"leader.replication.throttled.rate": str(RATE)})])
    set_configs(cluster, 1, [(TOPIC, topic_name, {"leader.replication.throttled.replicas": "0:1"})])
    wait_until(lambda: topic_config_seen(cluster, 1, topic_name, "leader.replication.throttled.replicas", "0:1"),
               timeout=30, message="broker 1 knowing the throttled replicas")
    started = time.monotonic()
    assert alter_errors(cluster, {(topic_name, 0): [2], (topic_name, 1): [3]}) == {
        (topic_name, 0): 0, (topic_name, 1): 0}
    unthrottled_done_s = None
    looks = 0
    while (elapsed := time.monotonic() - started) < WATCH_S:
        copied0 = log_sizes(cluster, 2).get((topic_name, 0), 0)
        allowed = RATE * (time.monotonic() - started + KAFKA_SLACK_S) + MARGIN
        assert copied0 <= allowed, f"{copied0} bytes of partition 0 copied after {elapsed:.1f} s (at most {allowed})"
        if unthrottled_done_s is None and log_sizes(cluster, 3).get((topic_name, 1), 0) >= total1:
            unthrottled_done_s = time.monotonic() - started
        looks += 1
        time.sleep(0.5)
    assert looks >= 5
    assert 0 < log_sizes(cluster, 2).get((topic_name, 0), 0) < total0  # under way, held back
    # the same move of the other partition, unthrottled, is not held to the rate
    if unthrottled_done_s is None:
        wait_until(lambda: log_sizes(cluster, 3).get((topic_name, 1), 0) >= total1, timeout=60,
                   message="partition 1 copied to broker 3")
        unthrottled_done_s = time.monotonic() - started
    assert total1 > RATE * (unthrottled_done_s + KAFKA_SLACK_S) + MARGIN, \
        f"the unthrottled move took {unthrottled_done_s:.1f} s"
    wait_until(lambda: settled(cluster, topic_name, 1, [3]), timeout=60, message="partition 1 moved to [3]")
    # throttle off: partition 0 catches up and moves
    set_configs(cluster, 1, [(BROKER, "1", {"leader.replication.throttled.rate": None}),
                             (TOPIC, topic_name, {"leader.replication.throttled.replicas": None})])
    wait_until(lambda: settled(cluster, topic_name, 0, [2]), timeout=90, message="partition 0 moved to [2]")
    assert log_sizes(cluster, 2)[(topic_name, 0)] == total0
