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
from .scenarios import (ALTER_CONFIGS, BROKER, DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS, LIST_OFFSETS, PRODUCE,
                        TOPIC, config_table, create_topic, filled_topic, list_offsets_body, produce_body)

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



def listeners_shape(c: Ctx, r: Body) -> Body:
    """`listeners` / `advertised.listeners`: whether each is set (the addresses differ), its source, read-only flag
    and its synonyms' names and sources (Kafka runs with both properties set, odradek with --listen and the
    advertised address given: both static)."""
    out = {}
    for cfg in r["results"][0]["configs"]:
        out[cfg["name"]] = {"set": bool(cfg["value"]), "source": cfg["config_source"], "read_only": cfg["read_only"],
                            "synonyms": [(s["name"], s["source"]) for s in cfg["synonyms"]]}
    return {"error_code": r["results"][0]["error_code"], "configs": out}


def log_dirs_shape(c: Ctx, r: Body) -> Body:
    """DescribeLogDirs of the scenario's topic: the directory's error and cordoned flag, the partition's lag and
    future flag (paths and sizes differ)."""
    return {"error_code": r["error_code"], "dirs": [
        {"error_code": d["error_code"], "is_cordoned": d.get("is_cordoned"),
         "partitions": [(t["name"].replace(c.prefix, "{p}"), p["partition_index"], p["offset_lag"], p["is_future_key"])
                        for t in d["topics"] for p in t["partitions"]]} for d in r["results"]]}


def own_topics_listed(c: Ctx, r: Body) -> Body:
    """ListConfigResources: the error and the scenario's own resources (the rest of each cluster differs)."""
    return {"error_code": r["error_code"], "mine": sorted((x["resource_name"].replace(c.prefix, "{p}"),
                                                            x.get("resource_type"))
                                                           for x in r["config_resources"]
                                                           if x["resource_name"].startswith(c.prefix))}


def topic_resource(c: Ctx) -> str:
    return c.topic()


def _accepted(r: Body) -> bool:
    return r["responses"][0]["error_code"] == 0


EARLIEST_PENDING_UPLOAD = -6  # ListOffsets v11 (KIP-1023)
DESCRIBE_LOG_DIRS, ALTER_REPLICA_LOG_DIRS, LIST_CONFIG_RESOURCES = 35, 34, 74

# issue 40 item 8: list configs emptied by SUBTRACT, a cluster-wide dynamic default behind a topic config, the
# listeners as DescribeConfigs lists them, and the API versions kafka-python reads a broker's release from
ISSUE_40_SCENARIOS = [
    S("broker-configs-describe-listeners", (),
      Call(DESCRIBE_CONFIGS, describe(BROKER, own_id, ["listeners", "advertised.listeners"], True)),
      project=listeners_shape),
    S("topic-configs-subtract-empties-cleanup-policy", create_topic(configs={"cleanup.policy": "delete"}),
      Call(INCREMENTAL_ALTER_CONFIGS, incremental([("cleanup.policy", SUBTRACT, "delete")], topic_resource,
                                                  validate_only=False, kind=TOPIC))),
    S("topic-configs-subtract-emptied-then-described",
      (*create_topic(configs={"cleanup.policy": "delete"}),
       Call(INCREMENTAL_ALTER_CONFIGS, incremental([("cleanup.policy", SUBTRACT, "delete")], topic_resource,
                                                   validate_only=False, kind=TOPIC), until=_accepted)),
      Call(DESCRIBE_CONFIGS, describe(TOPIC, topic_resource, ["cleanup.policy"], True)), project=with_synonyms),
    S("topic-configs-set-empty-cleanup-policy", create_topic(),
      Call(INCREMENTAL_ALTER_CONFIGS, incremental([("cleanup.policy", SET, "")], topic_resource, kind=TOPIC))),
    S("broker-configs-subtract-empties-log-cleanup-policy", (),
      Call(INCREMENTAL_ALTER_CONFIGS, incremental([("log.cleanup.policy", SUBTRACT, "delete")]))),
    S("broker-configs-set-empty-log-cleanup-policy", (),
      Call(INCREMENTAL_ALTER_CONFIGS, incremental([("log.cleanup.policy", SET, "")]))),
    # a cluster-wide default at Kafka's own value (so no other scenario sees a different setting), then a
    # topic without an override: its value comes from the dynamic default, listed first among its synonyms
    S("topic-configs-behind-dynamic-default",
      (*create_topic(),
       Call(INCREMENTAL_ALTER_CONFIGS, incremental([("log.cleaner.min.compaction.lag.ms", SET, "0")], lambda c: "",
                                                   validate_only=False), until=_accepted),
       Call(DESCRIBE_CONFIGS, describe(TOPIC, topic_resource, ["min.compaction.lag.ms"], False),
            until=lambda r: r["results"][0]["configs"][0]["config_source"] == 3)),
      Call(DESCRIBE_CONFIGS, describe(TOPIC, topic_resource, ["min.compaction.lag.ms"], True)), project=with_synonyms),
    S("list-offsets-earliest-pending-upload-empty", create_topic(),
      Call(LIST_OFFSETS, list_offsets_body(EARLIEST_PENDING_UPLOAD), version=11)),
    S("list-offsets-earliest-pending-upload-filled", filled_topic(),
      Call(LIST_OFFSETS, list_offsets_body(EARLIEST_PENDING_UPLOAD), version=11)),
    S("list-offsets-v10-latest-filled", filled_topic(), Call(LIST_OFFSETS, list_offsets_body(-1), version=10)),
    S("produce-v13-unknown-topic-id", (), Call(PRODUCE, produce_body(), version=13)),
    S("produce-v13-by-topic-id", create_topic(), Call(PRODUCE, produce_body(), version=13)),
    S("describe-log-dirs-v5-topic", filled_topic(),
      Call(DESCRIBE_LOG_DIRS, lambda c: {"topics": [{"topic": c.topic(), "partitions": [0]}]}, version=5),
      project=log_dirs_shape),
    S("alter-replica-log-dirs-unknown-dir", create_topic(),
      Call(ALTER_REPLICA_LOG_DIRS, lambda c: {"dirs": [{"path": "/no/such/log/dir", "topics": [
          {"name": c.topic(), "partitions": [0]}]}]})),
    S("list-config-resources-topics", create_topic(),
      Call(LIST_CONFIG_RESOURCES, {"resource_types": [TOPIC]}, version=1), project=own_topics_listed),
]



def with_types(c: Ctx, r: Body) -> Body:
    """with_synonyms plus each config's config_type (Kafka's ConfigDef type)."""
    table = with_synonyms(c, r)
    for result, raw in zip(table["results"], r["results"]):
        for cfg in raw["configs"]:
            result["configs"][cfg["name"]]["config_type"] = cfg["config_type"]
    return table


def _source_is(source: int) -> Callable[[Body], bool]:
    return lambda r: bool(r["results"][0]["configs"]) and r["results"][0]["configs"][0]["config_source"] == source


# issue 40 (librdkafka's 0081): Kafka's broker configs odradek does not read (SASL/Kerberos login settings, of
# every type) are stored and described with the value set, by both AlterConfigs and IncrementalAlterConfigs;
# a read-only one is refused, a bad value refused by its type, a listener-related one refused at the cluster-wide
# default. Values set here are read by no other scenario (AlterConfigs replaces the broker's whole set, so the
# second scenario leaves the first one's values deleted).
KERBEROS_RELOGIN, KERBEROS_JITTER = "sasl.kerberos.min.time.before.relogin", "sasl.kerberos.ticket.renew.jitter"
KAFKA_ONLY_KEYS = [KERBEROS_RELOGIN, KERBEROS_JITTER, "sasl.login.refresh.buffer.seconds",
                   "sasl.kerberos.service.name", "sasl.kerberos.kinit.cmd", "sasl.jaas.config"]
KAFKA_ONLY_SCENARIOS = [
    S("broker-configs-kafka-only-incremental-then-describe",
      (Call(INCREMENTAL_ALTER_CONFIGS, incremental([(KERBEROS_RELOGIN, SET, "58000"), (KERBEROS_JITTER, SET, "0.06"),
                                                    ("sasl.login.refresh.buffer.seconds", SET, "301")],
                                                   validate_only=False), until=_accepted),
       Call(DESCRIBE_CONFIGS, describe(BROKER, own_id, [KERBEROS_RELOGIN], False), until=_source_is(2))),
      Call(DESCRIBE_CONFIGS, describe(BROKER, own_id, KAFKA_ONLY_KEYS, True)), project=with_types),
    S("broker-configs-kafka-only-alter-configs-then-describe",
      (Call(ALTER_CONFIGS, lambda c: {"resources": [{"resource_type": BROKER, "resource_name": own_id(c), "configs": [
          {"name": KERBEROS_RELOGIN, "value": "59000"}, {"name": "sasl.kerberos.service.name", "value": "kafka"}]}],
          "validate_only": False}, until=_accepted),
       Call(DESCRIBE_CONFIGS, describe(BROKER, own_id, ["sasl.kerberos.service.name"], False),
            until=_source_is(2))),
      Call(DESCRIBE_CONFIGS, describe(BROKER, own_id, KAFKA_ONLY_KEYS, True)), project=with_types),
    # Kafka changes its listener-related configs only per broker
    _set_one("default-kafka-only-per-broker", KERBEROS_RELOGIN, "58000", lambda c: ""),
    _set_one("kafka-only-not-a-long", KERBEROS_RELOGIN, "abc"),
    _set_one("kafka-only-short-overflow", "sasl.login.refresh.buffer.seconds", "70000"),
    _set_one("kafka-only-read-only", "broker.heartbeat.interval.ms", "3000"),
    S("alter-configs-broker-kafka-only", (), Call(ALTER_CONFIGS, legacy({KERBEROS_RELOGIN: "57000"}))),
]

SCENARIOS_CONFIGS = [*BROKER_CONFIG_SCENARIOS, *TOPIC_SYNONYM_SCENARIOS, *ISSUE_40_SCENARIOS, *KAFKA_ONLY_SCENARIOS]
