"""cluster/zk_layout.py: every ZooKeeper path and the JSON stored there, in Kafka's own layout.

Three kinds of checks: round trips of every encode/decode pair; the exact field names and shapes of what
we write (Kafka's ZkData: a Kafka broker or Kafka's ZooKeeper tooling must read our znodes); and decoding
of znodes as Kafka 2.x/3.x writes them (hand-written JSON below, in Kafka's key order and spacing-free
encoding, including older versions and optional fields left out).
"""

from __future__ import annotations

import base64
import json
import time
import uuid

import pytest

from odradek.cluster import zk_layout as L
from odradek.cluster.zk_layout import (BrokerRegistration, Endpoint, PartitionState, ProducerIdBlock,
                                       TopicAssignment)


def js(data: bytes) -> dict:
    value = json.loads(data.decode("utf-8"))
    assert isinstance(value, dict)
    return value


def now_ms() -> int:
    return time.time_ns() // 1_000_000


# -- paths ------------------------------------------------------------------------------------------------


def test_paths_are_kafkas() -> None:
    assert L.CLUSTER_ID == "/cluster/id"
    assert L.CONTROLLER == "/controller"
    assert L.CONTROLLER_EPOCH == "/controller_epoch"
    assert L.broker_path(3) == "/brokers/ids/3"
    assert L.topic_path("clicks") == "/brokers/topics/clicks"
    assert L.partitions_path("clicks") == "/brokers/topics/clicks/partitions"
    assert L.partition_path("clicks", 4) == "/brokers/topics/clicks/partitions/4"
    assert L.partition_state_path("clicks", 4) == "/brokers/topics/clicks/partitions/4/state"
    assert L.topic_config_path("clicks") == "/config/topics/clicks"
    assert L.delete_topic_path("clicks") == "/admin/delete_topics/clicks"
    assert f"{L.CONFIG_CHANGES}/{L.CONFIG_CHANGE_PREFIX}" == "/config/changes/config_change_"
    assert f"{L.ISR_CHANGES}/{L.ISR_CHANGE_PREFIX}" == "/isr_change_notification/isr_change_"
    assert L.PRODUCER_ID_BLOCK == "/latest_producer_id_block"


def test_persistent_paths_include_every_parent_we_write_under() -> None:
    for path in (L.BROKER_IDS, L.TOPICS, L.TOPIC_CONFIGS, L.CONFIG_CHANGES, L.DELETE_TOPICS, L.ISR_CHANGES,
                 "/brokers/seqid"):
        assert path in L.PERSISTENT_PATHS


# -- /cluster/id, /controller, /controller_epoch ----------------------------------------------------------


def test_cluster_id_round_trip_and_shape() -> None:
    data = L.encode_cluster_id("1N7JbZwjS-aW9JCXTZUbGQ")
    assert js(data) == {"version": "1", "id": "1N7JbZwjS-aW9JCXTZUbGQ"}  # version is a string here
    assert L.decode_cluster_id(data) == "1N7JbZwjS-aW9JCXTZUbGQ"


def test_cluster_id_as_kafka_writes_it() -> None:
    assert L.decode_cluster_id(b'{"version":"1","id":"xZ0k_Qo9RmKzq1mTq9TVWA"}') == "xZ0k_Qo9RmKzq1mTq9TVWA"


def test_controller_round_trip_and_shape() -> None:
    before = now_ms()
    data = L.encode_controller(2)
    value = js(data)
    assert set(value) == {"version", "brokerid", "timestamp"}
    assert value["version"] == 1 and value["brokerid"] == 2
    assert isinstance(value["timestamp"], str) and before <= int(value["timestamp"]) <= now_ms()
    assert L.decode_controller(data) == 2


def test_controller_as_kafka_writes_it() -> None:
    assert L.decode_controller(b'{"version":1,"brokerid":1001,"timestamp":"1700000000123"}') == 1001
    # Kafka 2.x wrote the same keys in another order
    assert L.decode_controller(b'{"brokerid":3,"timestamp":"1543300074836","version":1}') == 3


def test_controller_epoch_is_a_plain_decimal() -> None:
    assert L.encode_controller_epoch(17) == b"17"
    assert L.decode_controller_epoch(b"17") == 17
    for epoch in (0, 1, 2**31 - 1):
        assert L.decode_controller_epoch(L.encode_controller_epoch(epoch)) == epoch


# -- /brokers/ids/ID --------------------------------------------------------------------------------------


def test_broker_registration_shape_is_kafkas_version_5() -> None:
    before = now_ms()
    reg = BrokerRegistration(1, (Endpoint("PLAINTEXT", "10.0.0.1", 9092),))
    value = js(L.encode_broker(reg))
    assert set(value) == {"version", "host", "port", "endpoints", "listener_security_protocol_map", "jmx_port",
                          "timestamp", "features"}
    assert value["version"] == 5
    assert value["host"] == "10.0.0.1" and value["port"] == 9092
    assert value["endpoints"] == ["PLAINTEXT://10.0.0.1:9092"]
    assert value["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT"}
    assert value["jmx_port"] == -1
    assert isinstance(value["timestamp"], str) and before <= int(value["timestamp"]) <= now_ms()
    assert value["features"] == {}


def test_broker_registration_with_rack_and_several_listeners() -> None:
    reg = BrokerRegistration(7, (Endpoint("INTERNAL", "h1", 9093, "SASL_SSL"), Endpoint("CLIENT", "h2", 9092)),
                             rack="eu-west-1a")
    value = js(L.encode_broker(reg))
    assert value["rack"] == "eu-west-1a"
    assert value["endpoints"] == ["INTERNAL://h1:9093", "CLIENT://h2:9092"]
    assert value["listener_security_protocol_map"] == {"INTERNAL": "SASL_SSL", "CLIENT": "PLAINTEXT"}
    # host/port are those of the first PLAINTEXT endpoint, for old clients
    assert (value["host"], value["port"]) == ("h2", 9092)


def test_broker_registration_without_plaintext_has_kafkas_empty_host() -> None:
    value = js(L.encode_broker(BrokerRegistration(1, (Endpoint("SECURE", "h", 9093, "SSL"),))))
    assert value["host"] is None and value["port"] == -1
    assert "rack" not in value


@pytest.mark.parametrize("reg", [
    BrokerRegistration(1, (Endpoint("PLAINTEXT", "localhost", 9092),)),
    BrokerRegistration(2, (Endpoint("PLAINTEXT", "::1", 19092),), rack="r1"),
    BrokerRegistration(3, (Endpoint("INTERNAL", "10.1.2.3", 9093, "SSL"), Endpoint("EXTERNAL", "a.example", 443,
                                                                                        "SASL_SSL"))),
    BrokerRegistration(4, (Endpoint("REPLICATION", "fe80::1", 9094, "SASL_PLAINTEXT"),
                           Endpoint("PLAINTEXT", "b.example", 9092))),
])
def test_broker_registration_round_trip(reg: BrokerRegistration) -> None:
    decoded = L.decode_broker(reg.broker_id, L.encode_broker(reg), epoch=4242)
    assert decoded == BrokerRegistration(reg.broker_id, reg.endpoints, reg.rack, 4242)


def test_broker_registration_ipv6_hosts_are_bracketed() -> None:
    value = js(L.encode_broker(BrokerRegistration(1, (Endpoint("PLAINTEXT", "::1", 9092),))))
    assert value["endpoints"] == ["PLAINTEXT://[::1]:9092"]
    assert value["host"] == "::1"


def test_broker_epoch_is_not_stored_in_the_json() -> None:
    reg = BrokerRegistration(1, (Endpoint("PLAINTEXT", "h", 1),), epoch=99)
    value = js(L.encode_broker(reg))
    assert "epoch" not in value and 99 not in value.values()
    assert L.decode_broker(1, L.encode_broker(reg)).epoch == -1


def test_broker_endpoint_lookup() -> None:
    reg = BrokerRegistration(1, (Endpoint("A", "h", 1), Endpoint("B", "h", 2)))
    assert reg.endpoint().port == 1
    assert reg.endpoint("B").port == 2
    with pytest.raises(KeyError):
        reg.endpoint("C")


def test_decode_broker_v5_as_kafka_3_writes_it() -> None:
    data = (b'{"features":{},"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT","SSL":"SSL"},'
            b'"endpoints":["PLAINTEXT://kafka-1.internal:9092","SSL://kafka-1.internal:9093"],"jmx_port":-1,'
            b'"port":9092,"host":"kafka-1.internal","version":5,"timestamp":"1700000000000"}')
    reg = L.decode_broker(1, data, epoch=123)
    assert reg == BrokerRegistration(1, (Endpoint("PLAINTEXT", "kafka-1.internal", 9092, "PLAINTEXT"),
                                         Endpoint("SSL", "kafka-1.internal", 9093, "SSL")), None, 123)


def test_decode_broker_v5_with_features_and_rack() -> None:
    data = (b'{"features":{"metadata.version":{"min_version":1,"max_version":20}},'
            b'"listener_security_protocol_map":{"CLIENT":"SASL_SSL","REPLICATION":"PLAINTEXT"},'
            b'"endpoints":["CLIENT://c.example:9094","REPLICATION://10.0.0.5:9092"],"rack":"rack-b","jmx_port":9999,'
            b'"port":9092,"host":"10.0.0.5","version":5,"timestamp":"1700000000000"}')
    reg = L.decode_broker(5, data)
    assert reg.rack == "rack-b"
    assert reg.endpoint("CLIENT") == Endpoint("CLIENT", "c.example", 9094, "SASL_SSL")
    assert reg.endpoint("REPLICATION") == Endpoint("REPLICATION", "10.0.0.5", 9092, "PLAINTEXT")


def test_decode_broker_v4_as_kafka_2_writes_it() -> None:
    data = (b'{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},"endpoints":["PLAINTEXT://10.9.167.48:9092"],'
            b'"jmx_port":9999,"host":"10.9.167.48","timestamp":"1543300074836","port":9092,"version":4}')
    reg = L.decode_broker(1, data, epoch=7)
    assert reg == BrokerRegistration(1, (Endpoint("PLAINTEXT", "10.9.167.48", 9092, "PLAINTEXT"),), None, 7)


def test_decode_broker_v4_with_ipv6_endpoint_and_rack() -> None:
    data = (b'{"listener_security_protocol_map":{"INTERNAL":"SSL"},"endpoints":["INTERNAL://[2001:db8::5]:9093"],'
            b'"rack":"dc1","jmx_port":-1,"host":null,"timestamp":"1543300074836","port":-1,"version":4}')
    reg = L.decode_broker(2, data)
    assert reg.endpoints == (Endpoint("INTERNAL", "2001:db8::5", 9093, "SSL"),)
    assert reg.rack == "dc1"


def test_decode_broker_v2_without_a_protocol_map_uses_the_listener_name_as_protocol() -> None:
    data = (b'{"jmx_port":-1,"timestamp":"1450000000000","endpoints":["PLAINTEXT://old:9092","SSL://old:9093"],'
            b'"host":"old","version":2,"port":9092}')
    reg = L.decode_broker(1, data)
    assert reg.endpoints == (Endpoint("PLAINTEXT", "old", 9092, "PLAINTEXT"), Endpoint("SSL", "old", 9093, "SSL"))


def test_decode_broker_v1_host_and_port_only() -> None:
    reg = L.decode_broker(1, b'{"jmx_port":-1,"timestamp":"1400000000000","host":"ancient","version":1,"port":9092}')
    assert reg.endpoints == (Endpoint("PLAINTEXT", "ancient", 9092, "PLAINTEXT"),)


# -- /brokers/topics/TOPIC --------------------------------------------------------------------------------


def test_topic_id_is_kafkas_uuid_string() -> None:
    # Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, no padding (22 characters).
    raw = bytes.fromhex("fb7fd5cc8a2e4b6e9f3e3ffe0f1e2d3c")
    text = L.encode_topic_id(raw)
    assert text == base64.urlsafe_b64encode(raw).decode().rstrip("=")
    assert len(text) == 22 and "=" not in text
    assert L.decode_topic_id(text) == raw
    # bytes that produce '-' and '_' in URL-safe base64 (and '+', '/' in the standard alphabet)
    raw = bytes([0xFB, 0xFF, 0xBF] * 5 + [0xFE])
    text = L.encode_topic_id(raw)
    assert "-" in text and "_" in text and "+" not in text and "/" not in text
    assert L.decode_topic_id(text) == raw


def test_topic_id_known_value() -> None:
    # Kafka's Uuid.METADATA_TOPIC_ID is (0, 1): its string form is "AAAAAAAAAAAAAAAAAAAAAQ".
    assert L.encode_topic_id(bytes(15) + b"\x01") == "AAAAAAAAAAAAAAAAAAAAAQ"
    assert L.decode_topic_id("AAAAAAAAAAAAAAAAAAAAAQ") == bytes(15) + b"\x01"


def test_topic_shape_is_kafkas_version_3() -> None:
    topic_id = uuid.UUID("0f8fad5b-d9cb-469f-a165-70867728950e").bytes
    value = js(L.encode_topic(TopicAssignment(topic_id, {1: [2, 3], 0: [1, 2], 10: [3, 1]})))
    assert set(value) == {"version", "topic_id", "partitions", "adding_replicas", "removing_replicas"}
    assert value["version"] == 3
    assert value["topic_id"] == L.encode_topic_id(topic_id)
    assert value["partitions"] == {"0": [1, 2], "1": [2, 3], "10": [3, 1]}
    assert all(isinstance(k, str) for k in value["partitions"])
    assert value["adding_replicas"] == {} and value["removing_replicas"] == {}


def test_topic_round_trip() -> None:
    for n in (1, 3, 50):
        assignment = TopicAssignment(uuid.uuid4().bytes, {p: [(p + i) % 5 for i in range(3)] for p in range(n)})
        decoded = L.decode_topic(L.encode_topic(assignment))
        assert decoded == assignment


def test_decode_topic_as_kafka_3_writes_it() -> None:
    data = (b'{"removing_replicas":{},"partitions":{"2":[3,1,2],"1":[2,3,1],"0":[1,2,3]},"topic_id":'
            b'"dXNgHWw1Qj2vyaC5yfnYvw","adding_replicas":{},"version":3}')
    assignment = L.decode_topic(data)
    assert assignment.partitions == {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}
    assert assignment.topic_id == base64.urlsafe_b64decode("dXNgHWw1Qj2vyaC5yfnYvw==")
    assert len(assignment.topic_id) == 16


def test_decode_topic_without_topic_id_as_older_kafka_writes_it() -> None:
    # Kafka before 2.8 (and topics created by such brokers) wrote no topic_id: the id reads as zero (unknown).
    for data in (b'{"version":2,"partitions":{"0":[1,2],"1":[2,1]},"adding_replicas":{},"removing_replicas":{}}',
                 b'{"version":1,"partitions":{"0":[1,2],"1":[2,1]}}'):
        assignment = L.decode_topic(data)
        assert assignment.topic_id == bytes(16)
        assert assignment.partitions == {0: [1, 2], 1: [2, 1]}


def test_decode_topic_during_a_reassignment_reads_the_full_replica_lists() -> None:
    data = (b'{"version":3,"topic_id":"AAAAAAAAAAAAAAAAAAAAAQ","partitions":{"0":[1,2,4]},'
            b'"adding_replicas":{"0":[4]},"removing_replicas":{"0":[2]}}')
    assert L.decode_topic(data).partitions == {0: [1, 2, 4]}


# -- /brokers/topics/TOPIC/partitions/P/state -------------------------------------------------------------


def test_partition_state_shape_is_kafkas_version_1() -> None:
    value = js(L.encode_partition_state(PartitionState(leader=2, leader_epoch=7, isr=[2, 3, 1], controller_epoch=4,
                                                       zk_version=12)))
    assert value == {"version": 1, "leader": 2, "leader_epoch": 7, "isr": [2, 3, 1], "controller_epoch": 4}


def test_partition_state_round_trip_takes_the_version_from_the_znode() -> None:
    state = PartitionState(3, 11, [3, 1], 9, zk_version=5)
    decoded = L.decode_partition_state(L.encode_partition_state(state), zk_version=5)
    assert decoded == state
    # the znode version is not in the JSON: it is whatever the stat says
    assert L.decode_partition_state(L.encode_partition_state(state), zk_version=8).zk_version == 8


def test_partition_state_without_a_leader() -> None:
    state = PartitionState(-1, 4, [2], 3, 0)
    assert L.decode_partition_state(L.encode_partition_state(state), 0) == state


def test_decode_partition_state_as_kafka_writes_it() -> None:
    state = L.decode_partition_state(b'{"controller_epoch":1,"leader":3,"version":1,"leader_epoch":55,"isr":[1,2,3]}',
                                     zk_version=60)
    assert state == PartitionState(3, 55, [1, 2, 3], 1, 60, 0)


def test_decode_partition_state_with_leader_recovery_state() -> None:
    # Kafka 3.2+ adds leader_recovery_state (1: RECOVERING) after an unclean election.
    state = L.decode_partition_state(
        b'{"version":1,"leader":2,"leader_epoch":9,"controller_epoch":3,"isr":[2],"leader_recovery_state":1}', 4)
    assert state.leader_recovery_state == 1 and state.isr == [2]


def test_partition_state_round_trip_keeps_leader_recovery_state() -> None:
    """Kafka 3.2+ writes "leader_recovery_state" (state version 2) whenever it is not RECOVERED (0): a
    RECOVERING state read from a Kafka-written znode survives our next write of it."""
    state = PartitionState(2, 9, [2], 3, 4, leader_recovery_state=1)
    data = L.encode_partition_state(state)
    assert js(data).get("leader_recovery_state") == 1 and js(data)["version"] == 2
    assert L.decode_partition_state(data, 4) == state


def test_partition_state_copy_is_deep_for_the_isr() -> None:
    state = PartitionState(1, 2, [1, 2], 3, 4)
    copy = state.copy(leader=2, zk_version=5)
    assert copy == PartitionState(2, 2, [1, 2], 3, 5)
    copy.isr.append(3)
    assert state.isr == [1, 2]


# -- /config/topics/TOPIC and /config/changes -------------------------------------------------------------


def test_topic_config_shape_and_round_trip() -> None:
    configs = {"retention.ms": "86400000", "cleanup.policy": "compact", "min.insync.replicas": "2"}
    data = L.encode_topic_config(configs)
    value = js(data)
    assert value == {"version": 1, "config": configs}
    assert all(isinstance(v, str) for v in value["config"].values())
    assert L.decode_topic_config(data) == configs
    assert L.decode_topic_config(L.encode_topic_config({})) == {}


def test_decode_topic_config_as_kafka_writes_it_and_when_missing() -> None:
    assert L.decode_topic_config(b'{"version":1,"config":{"segment.bytes":"1048576"}}') == {"segment.bytes": "1048576"}
    assert L.decode_topic_config(b'{"version":1,"config":{}}') == {}
    assert L.decode_topic_config(None) == {}
    assert L.decode_topic_config(b"") == {}


def test_config_change_shape_is_kafkas_version_2() -> None:
    data = L.encode_config_change("clicks")
    assert js(data) == {"version": 2, "entity_path": "topics/clicks"}
    assert L.decode_config_change(data) == ("topics", "clicks")


def test_decode_config_change_of_other_entities_and_versions() -> None:
    assert L.decode_config_change(b'{"version":2,"entity_path":"brokers/<default>"}') == ("brokers", "<default>")
    assert L.decode_config_change(b'{"version":2,"entity_path":"users/alice/clients/app"}') == ("users",
                                                                                                 "alice/clients/app")
    # version 1, as Kafka 0.10 wrote it
    assert L.decode_config_change(b'{"version":1,"entity_type":"topics","entity_name":"t1"}') == ("topics", "t1")
    assert L.decode_config_change(b'{"version":2,"entity_path":"topics"}') is None
    assert L.decode_config_change(b'{"version":3}') is None


# -- /isr_change_notification -----------------------------------------------------------------------------


def test_isr_change_shape_and_round_trip() -> None:
    partitions = [("clicks", 0), ("clicks", 3), ("__consumer_offsets", 49)]
    data = L.encode_isr_change(partitions)
    assert js(data) == {"version": 1, "partitions": [{"topic": "clicks", "partition": 0},
                                                     {"topic": "clicks", "partition": 3},
                                                     {"topic": "__consumer_offsets", "partition": 49}]}
    assert L.decode_isr_change(data) == partitions
    assert L.decode_isr_change(L.encode_isr_change([])) == []


def test_decode_isr_change_as_kafka_writes_it() -> None:
    data = b'{"version":1,"partitions":[{"partition":2,"topic":"orders"},{"partition":0,"topic":"orders"}]}'
    assert sorted(L.decode_isr_change(data)) == [("orders", 0), ("orders", 2)]


# -- /latest_producer_id_block ----------------------------------------------------------------------------


def test_producer_id_block_shape_and_round_trip() -> None:
    block = ProducerIdBlock(broker_id=2, start=1000, end=1999)
    data = L.encode_producer_id_block(block)
    assert js(data) == {"version": 1, "broker": 2, "block_start": "1000", "block_end": "1999"}
    assert L.decode_producer_id_block(data) == block
    assert block.size == 1000


def test_producer_id_block_with_large_ids_survives_as_strings() -> None:
    block = ProducerIdBlock(1, 2**62, 2**62 + 999)
    data = L.encode_producer_id_block(block)
    assert js(data)["block_start"] == str(2**62)
    assert L.decode_producer_id_block(data) == block


def test_decode_producer_id_block_as_kafka_writes_it() -> None:
    data = b'{"version":1,"broker":1001,"block_start":"0","block_end":"999"}'
    assert L.decode_producer_id_block(data) == ProducerIdBlock(1001, 0, 999)


# -- encoding ---------------------------------------------------------------------------------------------


def test_encodings_are_compact_utf8_json() -> None:
    samples = [L.encode_cluster_id("x"), L.encode_controller(1), L.encode_topic(TopicAssignment(bytes(16), {0: [1]})),
               L.encode_partition_state(PartitionState(1, 0, [1], 1)), L.encode_topic_config({"a": "b"}),
               L.encode_config_change("t"), L.encode_isr_change([("t", 0)]),
               L.encode_producer_id_block(ProducerIdBlock(1, 0, 9)),
               L.encode_broker(BrokerRegistration(1, (Endpoint("PLAINTEXT", "h", 1),)))]
    for data in samples:
        assert isinstance(data, bytes)
        text = data.decode("utf-8")
        assert ": " not in text and ", " not in text
        json.loads(text)


def test_non_ascii_topic_config_values_round_trip() -> None:
    configs = {"message.format.version": "3.0-IV1", "note": "grüße"}
    assert L.decode_topic_config(L.encode_topic_config(configs)) == configs
