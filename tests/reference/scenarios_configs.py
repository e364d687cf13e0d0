"""Differential scenarios of configs on BROKER resources (AlterConfigs 33, IncrementalAlterConfigs 44,
DescribeConfigs 32) and of a topic's synonyms (issues 37 and 40).

Same DSL as scenarios.py. Broker configs outlive a scenario on both brokers, so every change that is not
`validate_only` either sets a name unique to the scenario (under its prefix) or a dynamic config at Kafka's
default (`log.cleaner.backoff.ms=15000`), or deletes; nothing here changes what another scenario sees. The
broker's own id is each side's node id (`c.broker.node_id`).
"""

from __future__ import annotations

from typing import Callable

from .differential import Body, Call, Ctx, Scenario
from .scenarios import (ALTER_CONFIGS, BROKER, DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS, TOPIC, config_table,
                        create_topic)

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
THROTTLES = ("leader.replication.throttled.rate", "follower.replication.throttled.rate",
             "replica.alter.log.dirs.io.max.bytes.per.second")  # what kafka-reassign-partitions --verify clears


def own_id(c: Ctx) -> str:
    return str(c.broker.node_id)


def incremental(changes: list[tuple[str, int, str | None]], name: Callable[[Ctx], str] = own_id,
                validate_only: bool = True, kind: int = BROKER) -> Callable[[Ctx], Body]:
    """IncrementalAlterConfigs of one resource (this broker by default); a name "{p}" gets the scenario's prefix."""
    return lambda c: {"resources": [{"resource_type": kind, "resource_name": name(c), "configs": [
        {"name": k.format(p=c.prefix), "config_operation": op, "value": v} for k, op, v in changes]}],
        "validate_only": validate_only}


def legacy(changes: dict[str, str | None], name: Callable[[Ctx], str] = own_id) -> Callable[[Ctx], Body]:
    return lambda c: {"resources": [{"resource_type": BROKER, "resource_name": name(c), "configs": [
        {"name": k, "value": v} for k, v in changes.items()]}], "validate_only": True}


def describe(kind: int, name: Callable[[Ctx], str], keys: list[str], synonyms: bool) -> Callable[[Ctx], Body]:
    return lambda c: {"resources": [{"resource_type": kind, "resource_name": name(c),
                                     "configuration_keys": [k.format(p=c.prefix) for k in keys]}],
                      "include_synonyms": synonyms, "include_documentation": False}


def with_synonyms(c: Ctx, r: Body) -> Body:
    """config_table plus each config's synonyms (name, value, source) in order; the scenario prefix as {p}."""
    table = config_table(c, r)
    for result, raw in zip(table["results"], r["results"]):
        for cfg in raw["configs"]:
            result["configs"][cfg["name"]]["synonyms"] = [(s["name"], s["value"], s["source"])
                                                          for s in cfg["synonyms"]]
        result["configs"] = {k.replace(c.prefix, "{p}"): v for k, v in result["configs"].items()}
    return table


def own_named(c: Ctx, r: Body) -> Body:
    """An alter answer with the broker's own id as <self> (Kafka runs as node 1, odradek as node 0)."""
    return {"responses": [{**x, "resource_name": "<self>" if x["resource_name"] == own_id(c) else x["resource_name"]}
                          for x in r["responses"]]}


def S(id: str, setup: tuple[Call, ...], request: Call, **kw) -> Scenario:
    if request.api in (ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS):
        kw.setdefault("project", own_named)
    return Scenario(id, tuple(setup), request, **kw)


def _set_one(label: str, name: str, value: str | None, resource: Callable[[Ctx], str] = own_id) -> Scenario:
    return S(f"broker-configs-set-{label}", (), Call(INCREMENTAL_ALTER_CONFIGS,
                                                     incremental([(name, SET, value)], resource)))


# every class of name Kafka 4.4 answers differently, each at the broker's own id and at the cluster default
_NAMES = [("dynamic-retention", "log.retention.ms", "3600000"), ("dynamic-message-max", "message.max.bytes", "2000000"),
          ("dynamic-max-connections", "max.connections", "1000"), ("dynamic-cleaner-threads", "log.cleaner.threads", "2"),
          ("dynamic-throttle", "leader.replication.throttled.rate", "1000"),
          ("dynamic-alter-log-dirs", "replica.alter.log.dirs.io.max.bytes.per.second", "1000"),
          ("topic-level-name", "cleanup.policy", "compact"), ("unknown-name", "no.such.broker.config", "1"),
          ("read-only", "num.partitions", "3"), ("read-only-auto-create", "auto.create.topics.enable", "false"),
          ("per-listener-ssl", "ssl.keystore.location", "/nowhere"),
          ("cleaner-threads-too-many", "log.cleaner.threads", "5"),
          ("not-a-long", "log.retention.ms", "abc"), ("huge-long", "log.retention.ms", "9" * 40),
          ("below-minimum", "leader.replication.throttled.rate", "-5"),
          ("not-a-boolean", "unclean.leader.election.enable", "maybe"),
          ("not-a-policy", "log.cleanup.policy", "bogus"), ("int-overflow", "message.max.bytes", "4294967296")]

BROKER_CONFIG_SCENARIOS = [
    *[_set_one(label, name, value) for label, name, value in _NAMES],
    *[_set_one(f"default-{label}", name, value, lambda c: "") for label, name, value in _NAMES[:9]],
    _set_one("null-value", "log.retention.ms", None),
    _set_one("other-broker-id", "log.retention.ms", "1000", lambda c: "99"),
    _set_one("non-numeric-broker-id", "log.retention.ms", "1000", lambda c: "x"),
    S("broker-configs-append-list", (), Call(INCREMENTAL_ALTER_CONFIGS,
                                             incremental([("log.cleanup.policy", APPEND, "compact")]))),
    S("broker-configs-subtract-non-list", (), Call(INCREMENTAL_ALTER_CONFIGS,
                                                   incremental([("log.retention.ms", SUBTRACT, "1")]))),
    S("broker-configs-unknown-operation", (), Call(INCREMENTAL_ALTER_CONFIGS,
                                                   incremental([("log.retention.ms", 9, "1")]))),
    S("broker-configs-duplicate-keys", (), Call(INCREMENTAL_ALTER_CONFIGS, incremental(
        [("log.retention.ms", SET, "1"), ("log.retention.ms", DELETE, None)]))),
    S("broker-configs-read-only-before-bad-value", (), Call(INCREMENTAL_ALTER_CONFIGS, incremental(
        [("num.partitions", SET, "3"), ("log.retention.ms", SET, "abc")]))),
    # kafka-reassign-partitions --verify, once a move is done: every broker's throttles deleted (issue 40)
    S("broker-configs-delete-reassignment-throttles", (), Call(INCREMENTAL_ALTER_CONFIGS, incremental(
        [(name, DELETE, None) for name in THROTTLES], validate_only=False))),
    S("broker-configs-delete-default-throttles", (), Call(INCREMENTAL_ALTER_CONFIGS, incremental(
        [(name, DELETE, None) for name in THROTTLES], lambda c: "", validate_only=False))),
    S("broker-configs-delete-read-only-and-unknown", (), Call(INCREMENTAL_ALTER_CONFIGS, incremental(
        [("num.partitions", DELETE, None), ("no.such.broker.config", DELETE, None)], validate_only=False))),
    S("alter-configs-broker-dynamic", (), Call(ALTER_CONFIGS, legacy({"log.cleaner.threads": "2"}))),
    S("alter-configs-broker-read-only", (), Call(ALTER_CONFIGS, legacy({"num.partitions": "2"}))),
    S("alter-configs-broker-unknown", (), Call(ALTER_CONFIGS, legacy({"no.such.broker.config": "2"}))),
    S("alter-configs-broker-null-value", (), Call(ALTER_CONFIGS, legacy({"log.retention.ms": None}))),
    S("alter-configs-broker-other-id", (), Call(ALTER_CONFIGS, legacy({"log.retention.ms": "5"}, lambda c: "99"))),
    # stored, then described: a known dynamic config with its value, unknown and topic-level names null and
    # read-only, each as DYNAMIC_BROKER_CONFIG (own id) or DYNAMIC_DEFAULT_BROKER_CONFIG ("")
    S("broker-configs-set-then-describe",
      (Call(INCREMENTAL_ALTER_CONFIGS, incremental([("log.cleaner.backoff.ms", SET, "15000"), ("{p}.custom", SET, "x")],
                                                   validate_only=False), until=lambda r: r["responses"][0]["error_code"] == 0),
       Call(INCREMENTAL_ALTER_CONFIGS, incremental([("{p}.default", SET, "y")], lambda c: "", validate_only=False),
            until=lambda r: r["responses"][0]["error_code"] == 0),
       Call(DESCRIBE_CONFIGS, describe(BROKER, own_id, ["{p}.custom", "{p}.default"], False),
            until=lambda r: len(r["results"][0]["configs"]) == 2)),
      Call(DESCRIBE_CONFIGS, describe(BROKER, own_id, ["log.cleaner.backoff.ms", "{p}.custom", "{p}.default"], True)),
      project=with_synonyms),
    S("broker-configs-describe-default-resource",
      (Call(INCREMENTAL_ALTER_CONFIGS, incremental([("{p}.default", SET, "y")], lambda c: "", validate_only=False),
            until=lambda r: r["responses"][0]["error_code"] == 0),
       Call(DESCRIBE_CONFIGS, describe(BROKER, lambda c: "", ["{p}.default"], False),
            until=lambda r: len(r["results"][0]["configs"]) == 1)),
      Call(DESCRIBE_CONFIGS, describe(BROKER, lambda c: "", ["{p}.default", "num.partitions", "log.retention.ms"], True)),
      project=with_synonyms),
]

# a topic's synonyms: a topic override first, then the BROKER's properties behind it with the broker's values
# (min.insync.replicas is left out: Kafka's storage format makes it a cluster-wide dynamic config, known.py)
SYNONYM_KEYS = ["cleanup.policy", "retention.ms", "max.message.bytes", "segment.ms", "segment.bytes",
                "retention.bytes", "compression.type", "flush.ms", "delete.retention.ms"]
OVERRIDES = {"cleanup.policy": "compact", "retention.ms": "1000", "max.message.bytes": "5000", "segment.ms": "100000"}

TOPIC_SYNONYM_SCENARIOS = [
    S(f"describe-configs-topic-{label}-synonyms-{synonyms}".lower(), create_topic(configs=configs),
      Call(DESCRIBE_CONFIGS, describe(TOPIC, lambda c: c.topic(), SYNONYM_KEYS, synonyms)), project=with_synonyms)
    for label, configs in (("defaults", None), ("overrides", OVERRIDES)) for synonyms in (False, True)
]

SCENARIOS_CONFIGS = [*BROKER_CONFIG_SCENARIOS, *TOPIC_SYNONYM_SCENARIOS]
