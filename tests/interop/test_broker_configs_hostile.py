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
