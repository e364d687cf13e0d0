"""DescribeConfigs (key 32), versions 0-4.

Resources: TOPIC (2) lists every topic config with its effective value — overrides as
DYNAMIC_TOPIC_CONFIG (source 1), values set in server.properties/--set as STATIC_BROKER_CONFIG (4), the
rest DEFAULT_CONFIG (5) — and, with `include_synonyms` (v1+), the broker property behind each default.
BROKER (4) with this node's id (or "" for cluster defaults) lists the broker properties odradek knows;
passwords and JAAS configs (Kafka's PASSWORD type) are named with a null value and `is_sensitive`.
A topic lists Kafka 3.9's whole topic config set, the ones odradek does not act on at Kafka's defaults
(config.py KAFKA_TOPIC_DEFAULTS).
`configuration_keys` filters by name. Unknown topic → UNKNOWN_TOPIC_OR_PARTITION; another node id or an
unsupported resource type → INVALID_REQUEST. Config types are reported from v3, and with
`include_documentation` (v3+) every config carries a `documentation` string: odradek's own sentence or two on
what it does and its unit (config.py, beside each definition), not Kafka's text; null when not asked.
GROUP (32) lists the group configs (coordinator/share_groups.py GROUP_CONFIGS): a value set for the group
as GROUP_CONFIG (source 8), else its default (the broker property behind it) as DEFAULT_CONFIG. Any broker
answers: the values set are asked of the group's coordinator when that is another broker (as Kafka's brokers
all know them from the controller); when it cannot be reached, what this broker last learnt of them.
BROKER_LOGGER (8) needs DESCRIBE_CONFIGS on the cluster (CLUSTER_AUTHORIZATION_FAILED) and this node's id as
its name (INVALID_REQUEST with Kafka's message otherwise), and lists the broker's log levels
(broker/broker_loggers.py): the root and every odradek logger, each at its effective level in log4j's
words, as DYNAMIC_BROKER_LOGGER_CONFIG (source 6); `configuration_keys` naming no logger are left out.
"""

import asyncio

from odradek.broker import broker_loggers
from odradek.broker.authorizer import CLUSTER_NAME, Operation as Op, ResourceType as Res
from odradek.broker.core import RequestContext
from odradek.broker.registry import handler
from odradek.config import BROKER_PROPERTIES, broker_property_doc, topic_config_doc, topic_config_type
from odradek.coordinator.share_groups import GROUP_CONFIGS
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode

RESOURCE_TOPIC, RESOURCE_BROKER, RESOURCE_GROUP = 2, 4, 32
SOURCE_DYNAMIC_TOPIC, SOURCE_STATIC_BROKER, SOURCE_DEFAULT, SOURCE_GROUP = 1, 4, 5, 8
CONFIG_TYPE_STRING, CONFIG_TYPE_INT = 2, 3

# The broker property each topic config falls back to (reported as its synonym).
TOPIC_SYNONYMS = {
    "cleanup.policy": "log.cleanup.policy",
    "compression.type": "compression.type",
    "retention.ms": "log.retention.ms",
    "retention.bytes": "log.retention.bytes",
    "segment.bytes": "log.segment.bytes",
    "segment.ms": "log.roll.ms",
    "index.interval.bytes": "log.index.interval.bytes",
    "max.message.bytes": "message.max.bytes",
    "message.timestamp.type": "log.message.timestamp.type",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "min.insync.replicas": "min.insync.replicas",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    # Kafka's broker properties behind the configs odradek keeps at Kafka's defaults (config.py)
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "preallocate": "log.preallocate",
    "segment.index.bytes": "log.index.size.max.bytes",
    "segment.jitter.ms": "log.roll.jitter.ms",
    "message.downconversion.enable": "log.message.downconversion.enable",
    "message.format.version": "log.message.format.version",
    "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
    "message.timestamp.difference.max.ms": "log.message.timestamp.difference.max.ms",
    "local.retention.bytes": "log.local.retention.bytes",
    "local.retention.ms": "log.local.retention.ms",
    "compression.gzip.level": "compression.gzip.level",
    "compression.lz4.level": "compression.lz4.level",
    "compression.zstd.level": "compression.zstd.level",
}
CONFIG_TYPE_PASSWORD = 9
# Of the broker properties odradek lists, those Kafka can change at run time (its "per-broker" and
# "cluster-wide" update modes): DescribeConfigs reports every other one read-only, as Kafka does. odradek
# itself changes only the replication throttles at run time (topic_configs.py).
KAFKA_DYNAMIC_BROKER_CONFIGS = frozenset({
    "advertised.listeners", "listeners", "listener.security.protocol.map", "compression.type",
    "log.cleanup.policy", "log.flush.interval.messages", "log.flush.interval.ms", "log.index.interval.bytes",
    "log.message.timestamp.type", "log.retention.bytes", "log.retention.ms", "log.roll.ms", "log.segment.bytes",
    "max.connections", "max.connections.per.ip", "max.connections.per.ip.overrides", "message.max.bytes",
    "min.insync.replicas", "unclean.leader.election.enable", "producer.id.expiration.ms",
    "sasl.enabled.mechanisms", "sasl.mechanism.inter.broker.protocol", "plain.sasl.jaas.config",
    "scram-sha-256.sasl.jaas.config", "scram-sha-512.sasl.jaas.config", "ssl.keystore.location",
    "ssl.keystore.type", "ssl.key.password", "ssl.truststore.location", "ssl.truststore.type", "ssl.client.auth",
    "ssl.cipher.suites", "ssl.enabled.protocols", "ssl.endpoint.identification.algorithm",
    "leader.replication.throttled.rate", "follower.replication.throttled.rate",
})


def is_sensitive(name: str) -> bool:
    """Kafka's PASSWORD configs: DescribeConfigs names them but never gives their values."""
    return name.endswith("sasl.jaas.config") or name.endswith(".password")


@handler(ApiKey.DESCRIBE_CONFIGS, 0, 4)
async def describe_configs(ctx: RequestContext, request: dict) -> dict:
    results = []
    for resource in request["resources"]:
        kind, name = resource["resource_type"], resource["resource_name"]
        result = {"error_code": 0, "error_message": None, "resource_type": kind, "resource_name": name, "configs": []}
        if kind == RESOURCE_TOPIC and not ctx.allowed(Op.DESCRIBE_CONFIGS, Res.TOPIC, name):
            result.update(error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, error_message="Authorization failed.")
        elif kind == RESOURCE_BROKER and not ctx.allowed(Op.DESCRIBE_CONFIGS, Res.CLUSTER, CLUSTER_NAME):
            result.update(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED, error_message="Authorization failed.")
        elif kind == broker_loggers.RESOURCE_BROKER_LOGGER:
            if not ctx.allowed(Op.DESCRIBE_CONFIGS, Res.CLUSTER, CLUSTER_NAME):
                result.update(error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                              error_message="Cluster authorization failed.")
            else:
                error, message, configs = broker_loggers.describe(ctx.broker.node_id, name,
                                                                  resource["configuration_keys"])
                result.update(error_code=error, error_message=message, configs=configs)
        elif kind == RESOURCE_TOPIC:
            topic = ctx.broker.metadata.topic(name)
            if topic is None:
                result.update(error_code=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                              error_message=f"Topic {name} does not exist")
            else:
                result["configs"] = _topic_configs(ctx, topic, resource["configuration_keys"],
                                                   request["include_synonyms"], request["include_documentation"])
        elif kind == RESOURCE_GROUP and not ctx.allowed(Op.DESCRIBE_CONFIGS, Res.GROUP, name):
            result.update(error_code=ErrorCode.GROUP_AUTHORIZATION_FAILED, error_message="Authorization failed.")
        elif kind == RESOURCE_GROUP and name:
            result["configs"] = await _group_configs(ctx, name, resource["configuration_keys"],
                                               request["include_documentation"])
        elif kind == RESOURCE_BROKER and name in ("", str(ctx.broker.node_id)):
            result["configs"] = _broker_configs(ctx, resource["configuration_keys"], request["include_documentation"])
        else:
            result.update(error_code=ErrorCode.INVALID_REQUEST,
                          error_message=f"Unsupported resource type {kind} or name {name!r}")
        results.append(result)
    return {"throttle_time_ms": 0, "results": results}


async def _group_configs(ctx: RequestContext, group_id: str, keys: list[str] | None,
                         include_documentation: bool) -> list[dict]:
    share_groups = ctx.broker.coordinator.share_groups
    own = await _set_for_group(ctx, group_id)
    out = []
    for name in sorted(GROUP_CONFIGS):
        if not _wanted(keys, name):
            continue
        kind = CONFIG_TYPE_INT if name.endswith(".ms") else CONFIG_TYPE_STRING
        value = own[name] if name in own else share_groups.config.defaults.get(name, "")
        out.append(_entry(name, value,
                          SOURCE_GROUP if name in own else SOURCE_DEFAULT, kind, [],
                          GROUP_CONFIGS[name][2] if include_documentation else None))
    return out


def _wanted(request_keys: list[str] | None, name: str) -> bool:
    return request_keys is None or not request_keys or name in request_keys


def _topic_configs(ctx: RequestContext, topic, keys: list[str] | None, include_synonyms: bool,
                   include_documentation: bool) -> list[dict]:
    broker_raw = ctx.broker.config.raw
    out = []
    for name, value in sorted(ctx.broker.effective_configs(topic).items()):
        if not _wanted(keys, name):
            continue
        synonym = TOPIC_SYNONYMS.get(name)
        if name in topic.configs:
            source = SOURCE_DYNAMIC_TOPIC
        elif synonym in broker_raw:
            source = SOURCE_STATIC_BROKER
        else:
            source = SOURCE_DEFAULT
        synonyms = []
        if include_synonyms:
            if name in topic.configs:
                synonyms.append({"name": name, "value": value, "source": SOURCE_DYNAMIC_TOPIC})
            if synonym is not None:
                synonyms.append({"name": synonym, "value": broker_raw.get(synonym, value),
                                 "source": SOURCE_STATIC_BROKER if synonym in broker_raw else SOURCE_DEFAULT})
        out.append(_entry(name, value, source, topic_config_type(name), synonyms,
                          topic_config_doc(name) if include_documentation else None))
    return out


def _broker_configs(ctx: RequestContext, keys: list[str] | None, include_documentation: bool) -> list[dict]:
    config = ctx.broker.config
    out = []
    for name in sorted(BROKER_PROPERTIES):
        if not _wanted(keys, name):
            continue
        value = config.get(name)
        doc = broker_property_doc(name) if include_documentation else None
        text = None if value is None else str(value).lower() if isinstance(value, bool) else str(value)
        source = SOURCE_STATIC_BROKER if name in config.raw else SOURCE_DEFAULT
        if is_sensitive(name):
            entry = {**_entry(name, None, source, CONFIG_TYPE_PASSWORD, [], doc), "is_sensitive": True}
        else:
            entry = _entry(name, text, source, 2, [], doc)
        entry["read_only"] = name not in KAFKA_DYNAMIC_BROKER_CONFIGS
        out.append(entry)
    return out


def _entry(name: str, value: str | None, source: int, config_type: int, synonyms: list[dict],
           documentation: str | None) -> dict:
    return {
        "name": name,
        "value": value,
        "read_only": False,
        "config_source": source,
        "is_default": source == SOURCE_DEFAULT,
        "is_sensitive": False,
        "synonyms": synonyms,
        "config_type": config_type,
        "documentation": documentation,
    }


async def _set_for_group(ctx: RequestContext, group_id: str) -> dict[str, str]:
    """The configs set for a group, from its coordinator (this broker, or asked over DescribeConfigs)."""
    share_groups = ctx.broker.coordinator.share_groups
    if ctx.broker.coordinator.owns(group_id):
        return share_groups.group_configs.get(group_id, {})
    if (ctx.client_id or "").endswith("-group-configs"):  # asked by a broker: answer, never ask on (one hop)
        return {}
    asked = await asyncio.wrap_future(ctx.broker.group_configs_at_coordinator(group_id))
    return asked if asked is not None else share_groups.remote_configs.get(group_id, {})
