"""What a broker of a three-broker cluster answers for a partition it does not lead, or leads under another
epoch, asked with raw requests (our codec) so every field of the answer can be checked:

- Produce and Fetch to a follower: NOT_LEADER_OR_FOLLOWER; from Produce v10 / Fetch v12 with the leader
  and its epoch in `current_leader`, and its endpoint in `node_endpoints` (Produce v10, Fetch v16): KIP-951,
  which lets librdkafka and the Java client move to the new leader without a Metadata round trip.
- Fetch to the leader with an older `current_leader_epoch`: FENCED_LEADER_EPOCH; with a newer one:
  UNKNOWN_LEADER_EPOCH.
- A partition whose only replica is down: Metadata says LEADER_NOT_AVAILABLE with no leader.
"""

from __future__ import annotations

import pytest

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from tests.cluster.common import REPLICATED, create_topic
from tests.interop.helpers import record_batch, wait_until
from tests.interop.test_broker_semantics import request


def metadata_of(bootstrap: str, topic: str) -> tuple[bytes, dict[int, dict]]:
    """Topic id and partitions (by index) of `topic` in the broker's Metadata v12 answer."""
    body = request(bootstrap, ApiKey.METADATA, 12, {"topics": [{"topic_id": bytes(16), "name": topic}],
                                                    "allow_auto_topic_creation": False,
                                                    "include_topic_authorized_operations": False})
    (entry,) = body["topics"]
    return entry["topic_id"], {p["partition_index"]: p for p in entry["partitions"]}


def produce(bootstrap: str, version: int, topic: str) -> dict:
    body = request(bootstrap, ApiKey.PRODUCE, version, {
        "transactional_id": None, "acks": 1, "timeout_ms": 5000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": record_batch([b"v"])}]}]})
    return body


def fetch(bootstrap: str, version: int, topic_id: bytes, leader_epoch: int = -1) -> dict:
    return request(bootstrap, ApiKey.FETCH, version, {
        "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
        "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "",
        "topics": [{"topic_id": topic_id, "partitions": [
            {"partition": 0, "current_leader_epoch": leader_epoch, "fetch_offset": 0, "last_fetched_epoch": -1,
             "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}]})


@pytest.mark.timeout(120)
def test_followers_name_the_leader_and_epochs_are_checked(cluster_factory, topic_name):
    cluster = cluster_factory(3, settings=REPLICATED).start()
    cluster.wait_ready()
    create_topic(cluster, topic_name, partitions=1)
    state = cluster.partition_state(topic_name, 0)
    leader = state.leader
    follower = next(b for b in state.replicas if b != leader)
    leader_addr, follower_addr = cluster.broker(leader).bootstrap, cluster.broker(follower).bootstrap
    wait_until(lambda: metadata_of(follower_addr, topic_name)[1][0]["leader_id"] == leader, timeout=30,
               message="the follower's metadata names the leader")
    topic_id, parts = metadata_of(leader_addr, topic_name)
    epoch = parts[0]["leader_epoch"]
    leader_port = int(leader_addr.rsplit(":", 1)[1])

    old = produce(follower_addr, 9, topic_name)["responses"][0]["partition_responses"][0]
    assert old["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
    answer = produce(follower_addr, 11, topic_name)
    part = answer["responses"][0]["partition_responses"][0]
    assert part["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert part["current_leader"] == {"leader_id": leader, "leader_epoch": epoch}
    assert [(n["node_id"], n["host"], n["port"]) for n in answer["node_endpoints"]] == \
        [(leader, "127.0.0.1", leader_port)]
    done = produce(leader_addr, 11, topic_name)
    assert done["responses"][0]["partition_responses"][0]["error_code"] == ErrorCode.NONE
    assert done["node_endpoints"] == []

    answer = fetch(follower_addr, 16, topic_id)
    part = answer["responses"][0]["partitions"][0]
    assert part["error_code"] == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert part["current_leader"] == {"leader_id": leader, "leader_epoch": epoch}
    assert [(n["node_id"], n["port"]) for n in answer["node_endpoints"]] == [(leader, leader_port)]

    assert fetch(leader_addr, 16, topic_id, epoch)["responses"][0]["partitions"][0]["error_code"] == ErrorCode.NONE
    fenced = fetch(leader_addr, 16, topic_id, epoch - 1)["responses"][0]["partitions"][0] if epoch > 0 else None
    if fenced is not None:
        assert fenced["error_code"] == ErrorCode.FENCED_LEADER_EPOCH
    ahead = fetch(leader_addr, 16, topic_id, epoch + 1)["responses"][0]["partitions"][0]
    assert ahead["error_code"] == ErrorCode.UNKNOWN_LEADER_EPOCH


@pytest.mark.timeout(120)
def test_a_partition_without_live_replicas_has_no_leader(cluster_factory, topic_name):
    cluster = cluster_factory(3, settings=REPLICATED).start()
    cluster.wait_ready()
    admin = cluster.admin()
    from confluent_kafka.admin import NewTopic

    admin.create_topics([NewTopic(topic_name, num_partitions=1, replica_assignment=[[3]],
                                  config={"min.insync.replicas": "1"})])[topic_name].result(30)
    wait_until(lambda: cluster.partition_state(topic_name, 0).leader == 3, timeout=30, message="broker 3 leads")
    cluster.kill(3)
    bootstrap = cluster.broker(1).bootstrap

    def offline() -> dict | None:
        part = metadata_of(bootstrap, topic_name)[1][0]
        return part if part["error_code"] == ErrorCode.LEADER_NOT_AVAILABLE else None

    part = wait_until(offline, timeout=30, message="the partition offline in broker 1's metadata")
    assert part["leader_id"] == -1
    assert part["offline_replicas"] == [3]
    assert produce(bootstrap, 11, topic_name)["responses"][0]["partition_responses"][0]["error_code"] in (
        ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE)
