"""Hostile input to the broker config APIs (AlterConfigs 33, IncrementalAlterConfigs 44, DescribeConfigs 32) on a
single node: every answer is a Kafka error code or success, never a crash or a closed connection, and what
is stored survives a restart (the node's own store, __cluster_metadata/broker_configs.json). What Kafka 4.4
answers to each class of name is compared with Kafka itself in tests/reference/scenarios_configs.py."""

from __future__ import annotations

import random

import pytest

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from tests.interop.test_broker_semantics import request

BROKER = 4
SET, DELETE = 0, 1


def alter(bootstrap: str, name: str, changes: list[tuple[str, int, str | None]], kind: int = BROKER,
          validate_only: bool = False) -> dict:
    body = request(bootstrap, ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, {"validate_only": validate_only, "resources": [
        {"resource_type": kind, "resource_name": name, "configs": [
            {"name": k, "config_operation": op, "value": v} for k, op, v in changes]}]})
    return body["responses"][0]


def describe(bootstrap: str, name: str, keys: list[str] | None, kind: int = BROKER) -> dict:
    body = request(bootstrap, ApiKey.DESCRIBE_CONFIGS, 4, {"resources": [
        {"resource_type": kind, "resource_name": name, "configuration_keys": keys}],
        "include_synonyms": True, "include_documentation": True})
    return body["results"][0]


@pytest.mark.timeout(120)
def test_hostile_broker_config_changes_get_error_codes(broker_factory):
    b = broker_factory({"node.id": "1"})
    boot = b.bootstrap
    invalid = ErrorCode.INVALID_REQUEST
    # broker ids that are not this one, or not numbers at all
    for name in ("99", "-1", " 1", "1 ", "99999999999999999999", "x", "1.0", "\u00e9"):
        assert alter(boot, name, [("log.retention.ms", SET, "1000")])["error_code"] == invalid, name
        assert describe(boot, name, None)["error_code"] == invalid, name
    # values far out of range, empty, and huge
    for value in ("", " ", "9" * 10_000, "-9" * 40, "NaN", "1e3", "0x10", "\x00"):
        answer = alter(boot, "1", [("log.retention.ms", SET, value)])
        assert answer["error_code"] == invalid and "log.retention.ms" in answer["error_message"], value
    assert alter(boot, "1", [("log.cleaner.io.max.bytes.per.second", SET, "not-a-double")])["error_code"] == invalid
    assert alter(boot, "1", [("log.cleaner.threads", SET, "0")])["error_code"] == invalid
    # unknown resource types and operations
    for kind in (0, 1, 3, 99, -1, 127):
        assert alter(boot, "1", [("a", SET, "1")], kind=kind)["error_code"] == invalid, kind
    for op in (4, 9, -1, 127):
        assert alter(boot, "1", [("log.retention.ms", op, "1")])["error_code"] == invalid, op
    # many names, and a large value for a name Kafka does not know: stored, as Kafka stores it, never shown
    many = [(f"hostile.name.{i}", SET, str(i)) for i in range(500)]
    assert alter(boot, "1", many, validate_only=True)["error_code"] == 0
    assert alter(boot, "1", [("hostile.big", SET, "v" * 100_000)])["error_code"] == 0
    shown = describe(boot, "1", ["hostile.big"])
    (entry,) = shown["configs"]
    assert (entry["value"], entry["read_only"], entry["is_sensitive"], entry["config_source"]) == (None, True, True, 2)
    # random operations on random names, then the broker still answers
    rng = random.Random(37)
    names = ["log.retention.ms", "num.partitions", "cleanup.policy", "log.cleanup.policy", "", "hostile.x",
             "listeners", "ssl.keystore.location", "log.cleaner.threads", "message.max.bytes"]
    for _ in range(200):
        changes = [(rng.choice(names), rng.randrange(-2, 6), rng.choice([None, "", "1", "-1", "compact", "x" * 50]))]
        answer = alter(boot, rng.choice(["1", ""]), changes, validate_only=rng.random() < 0.5)
        assert answer["error_code"] in (0, ErrorCode.INVALID_REQUEST, ErrorCode.INVALID_CONFIG), (changes, answer)
    assert alter(boot, "1", [("hostile.big", DELETE, None)])["error_code"] == 0


@pytest.mark.timeout(120)
def test_broker_configs_survive_a_restart(broker_factory):
    b = broker_factory({"node.id": "1"})
    assert alter(b.bootstrap, "1", [("log.cleaner.backoff.ms", SET, "20000"), ("no.such.config", SET, "x")])[
        "error_code"] == 0
    assert alter(b.bootstrap, "", [("log.retention.ms", SET, "7200000")])["error_code"] == 0
    # what kafka-reassign-partitions --verify sends once a move is done, the third name included (issue 40)
    assert alter(b.bootstrap, "1", [(n, DELETE, None) for n in (
        "leader.replication.throttled.rate", "follower.replication.throttled.rate",
        "replica.alter.log.dirs.io.max.bytes.per.second")])["error_code"] == 0
    b.stop()
    b.start()
    configs = {c["name"]: (c["value"], c["config_source"]) for c in describe(b.bootstrap, "1", [
        "log.cleaner.backoff.ms", "no.such.config", "log.retention.ms"])["configs"]}
    assert configs == {"log.cleaner.backoff.ms": ("20000", 2), "no.such.config": (None, 2),
                       "log.retention.ms": ("7200000", 3)}
    defaults = describe(b.bootstrap, "", None)
    assert [(c["name"], c["value"], c["config_source"]) for c in defaults["configs"]] == [
        ("log.retention.ms", "7200000", 3)]
    # AlterConfigs replaces the broker's whole set
    body = request(b.bootstrap, ApiKey.ALTER_CONFIGS, 2, {"validate_only": False, "resources": [
        {"resource_type": BROKER, "resource_name": "1", "configs": [{"name": "log.cleaner.backoff.ms",
                                                                      "value": "30000"}]}]})
    assert body["responses"][0]["error_code"] == 0
    own = {c["name"] for c in describe(b.bootstrap, "1", None)["configs"] if c["config_source"] == 2}
    assert own == {"log.cleaner.backoff.ms"}


@pytest.mark.timeout(120)
def test_dynamic_values_odradek_cannot_take_leave_it_serving(broker_factory, topic_name):
    """Values Kafka stores that odradek cannot apply (outside its own ranges, overrides that do not parse, a
    keystore on a listener without TLS): stored, the static value kept in force, the broker serving."""
    from tests.interop.helpers import roundtrip
    from tests.interop.test_broker_configs_runtime import produce_one, too_large
    from tests.interop.test_broker_semantics import create_topic

    b = broker_factory({"node.id": "1"})
    create_topic(b.bootstrap, topic_name)
    odd = [("max.connections.per.ip.overrides", "not-a-host-count,::,x:y"), ("log.segment.bytes", "14"),
           ("log.cleaner.io.max.bytes.per.second", "-1e308"), ("listener.name.plaintext.ssl.keystore.location",
                                                               "/no/such/keystore.pem"),
           ("log.retention.ms", "-1"), ("producer.id.expiration.ms", "1"), ("log.cleanup.policy", "")]
    for name, value in odd:
        answer = alter(b.bootstrap, "1", [(name, SET, value)])
        assert answer["error_code"] in (0, ErrorCode.INVALID_REQUEST), (name, answer)
        roundtrip(b.bootstrap, topic_name, count=2)
    # message.max.bytes=0 refuses every record until deleted, and never takes the broker down
    assert alter(b.bootstrap, "", [("message.max.bytes", SET, "0")])["error_code"] == 0
    assert too_large(produce_one(b.bootstrap, topic_name, 10))
    assert alter(b.bootstrap, "", [("message.max.bytes", DELETE, None)])["error_code"] == 0
    assert alter(b.bootstrap, "1", [(name, DELETE, None) for name, _ in odd])["error_code"] == 0
    roundtrip(b.bootstrap, topic_name, count=2)
    assert b.is_running()


@pytest.mark.timeout(120)
def test_produce_v13_with_hostile_topic_ids(broker_factory, topic_name):
    """Produce v13 names topics by id: unknown, zero and random ids get UNKNOWN_TOPIC_ID per partition, next to a
    known id in the same request, which is written; nothing crashes or closes the connection."""
    from tests.interop.helpers import record_batch
    from tests.interop.test_broker_semantics import create_topic

    b = broker_factory({"node.id": "1"})
    create_topic(b.bootstrap, topic_name, partitions=2)
    metadata = request(b.bootstrap, ApiKey.METADATA, 12, {"topics": [{"name": topic_name, "topic_id": bytes(16)}],
                                                           "allow_auto_topic_creation": False,
                                                           "include_topic_authorized_operations": False})
    known = metadata["topics"][0]["topic_id"]
    rng = random.Random(13)
    ids = [known, bytes(16), b"\xff" * 16, *(rng.randbytes(16) for _ in range(100)), known]
    body = request(b.bootstrap, ApiKey.PRODUCE, 13, {"transactional_id": None, "acks": -1, "timeout_ms": 5000,
                                                      "topic_data": [{"name": "", "topic_id": tid, "partition_data": [
                                                          {"index": 2 if i == len(ids) - 1 else i % 2, "records": record_batch([b"v"])}]}
                                                          for i, tid in enumerate(ids)]})
    answers = [(t["topic_id"], p["index"], p["error_code"]) for t in body["responses"] for p in t["partition_responses"]]
    assert len(answers) == len(ids)
    assert answers[0] == (known, 0, 0)
    assert all(code == ErrorCode.UNKNOWN_TOPIC_ID for tid, _, code in answers[1:-1]), answers[1:5]
    # the last entry names the known topic again, partition 2 of 2: no such partition
    assert answers[-1][0] == known and answers[-1][2] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert b.is_running()
