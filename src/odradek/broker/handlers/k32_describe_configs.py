"""DescribeConfigs (key 32), versions 0-4.

Resources: TOPIC (2) lists every topic config with its effective value — overrides as
DYNAMIC_TOPIC_CONFIG (source 1), values set in server.properties/--set as STATIC_BROKER_CONFIG (4), the
rest DEFAULT_CONFIG (5) — and, with `include_synonyms` (v1+), the broker property behind each default.
BROKER (4) with this node's id (or "" for cluster defaults) lists the broker properties odradek knows;
passwords and JAAS configs (Kafka's PASSWORD type) are named with a null value and `is_sensitive`.
A topic lists Kafka 3.9's whole topic config set, the ones odradek does not act on at Kafka's defaults
(topic_config.py KAFKA_TOPIC_DEFAULTS).
`configuration_keys` filters by name. Unknown topic → UNKNOWN_TOPIC_OR_PARTITION; another node id or an
unsupported resource type → INVALID_REQUEST. Config types are reported from v3, and with
`include_documentation` (v3+) every config carries a `documentation` string: odradek's own sentence or two on
what it does and its unit (config.py, beside each definition), not Kafka's text; null when not asked.
GROUP (32) lists the group configs (coordinator/share_groups.py GROUP_CONFIGS): a value set for the group
as GROUP_CONFIG (source 8), else its default (the broker property behind it) as DEFAULT_CONFIG; a broker
that does not coordinate the group asks the one that does (any broker answers, as in Kafka).
BROKER_LOGGER (8) needs DESCRIBE_CONFIGS on the cluster (CLUSTER_AUTHORIZATION_FAILED) and this node's id as
its name (INVALID_REQUEST with Kafka's message otherwise), and lists the broker's log levels
(broker/broker_loggers.py): the root and every odradek logger, each at its effective level in log4j's
words, as DYNAMIC_BROKER_LOGGER_CONFIG (source 6); `configuration_keys` naming no logger are left out.
"""

from odradek.broker import broker_configs, broker_loggers
from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.broker.topic_configs import forwarded
from odradek.config import BROKER_PROPERTIES, broker_property_doc
from odradek.security.authorizer import CLUSTER_NAME, Operation as Op, ResourceType as Res
from odradek.topic_config import topic_config_doc, topic_config_type
from odradek.coordinator.share_groups import GROUP_CONFIGS
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode

RESOURCE_TOPIC, RESOURCE_BROKER, RESOURCE_GROUP = 2, 4, 32
SOURCE_DYNAMIC_TOPIC, SOURCE_DYNAMIC_BROKER, SOURCE_DYNAMIC_DEFAULT = 1, 2, 3
SOURCE_STATIC_BROKER, SOURCE_DEFAULT, SOURCE_GROUP = 4, 5, 8
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
            result["configs"] = await _broker_configs(ctx, name, resource["configuration_keys"],
                                                      request["include_synonyms"], request["include_documentation"])
        elif kind == RESOURCE_BROKER:
            message = broker_configs.check_name(name, ctx.broker.node_id)
            result.update(error_code=ErrorCode.INVALID_REQUEST, error_message=(
                message[1].replace(", but received", " or empty string, but received") if message else None))
        else:
            result.update(error_code=ErrorCode.INVALID_REQUEST,
                          error_message=f"Unsupported resource type {kind} or name {name!r}")
        results.append(result)
    return {"throttle_time_ms": 0, "results": results}


async def _group_configs(ctx: RequestContext, group_id: str, keys: list[str] | None,
                         include_documentation: bool) -> list[dict]:
    """A group's configs, from its coordinator: this broker, or (asked once, as Kafka answers on any broker)
    the one that coordinates it."""
    share_groups = ctx.broker.coordinator.share_groups
    own = share_groups.group_configs.get(group_id, {})
    if not ctx.broker.coordinator.owns(group_id) and not forwarded(ctx):
        own = await ctx.broker.group_configs_at_coordinator(group_id) or share_groups.remote_configs.get(group_id, {})
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
    out = []
    for name, value in sorted(ctx.broker.effective_configs(topic).items()):
        if not _wanted(keys, name):
            continue
        broker_synonyms = _broker_synonyms(ctx, name)
        if name in topic.configs:
            source = SOURCE_DYNAMIC_TOPIC
        else:
            source = broker_synonyms[0]["source"] if broker_synonyms else SOURCE_DEFAULT
        synonyms = []
        if include_synonyms:
            if name in topic.configs:
                synonyms.append({"name": name, "value": value, "source": SOURCE_DYNAMIC_TOPIC})
            synonyms += broker_synonyms
        out.append(_entry(name, value, source, topic_config_type(name), synonyms,
                          topic_config_doc(name) if include_documentation else None))
    return out


def _broker_synonyms(ctx: RequestContext, topic_config: str) -> list[dict]:
    """Kafka's synonyms of a topic config at broker level: its broker property as set dynamically for this broker,
    then for every broker, then statically, then that
    property's default when Kafka's definition has one (a topic's broker synonyms show the BROKER's value).
    Kafka drops the synonyms listed before its first, primary, property: `retention.ms` has none unless
    `log.retention.ms` is set (`log.retention.hours`' default comes after a missing primary), and so on."""
    synonym = TOPIC_SYNONYMS.get(topic_config)
    if synonym is None:
        return []
    raw = ctx.broker.config.raw
    defaults, own = ctx.broker.dynamic_broker_configs  # applied, hence in force (broker/dynamic_configs.py)
    out = []
    if synonym in own:
        out.append({"name": synonym, "value": own[synonym], "source": SOURCE_DYNAMIC_BROKER})
    if synonym in defaults:
        out.append({"name": synonym, "value": defaults[synonym], "source": SOURCE_DYNAMIC_DEFAULT})
    if synonym in raw:
        out.append({"name": synonym, "value": raw[synonym], "source": SOURCE_STATIC_BROKER})
    secondary = SECONDARY_SYNONYMS.get(synonym, ())
    if out:
        out += [{"name": s, "value": raw[s], "source": SOURCE_STATIC_BROKER} for s in secondary if s in raw]
    default = _property_default(synonym, ctx.broker.topic_defaults.get(topic_config))
    if default is not None:
        out.append({"name": synonym, "value": default, "source": SOURCE_DEFAULT})
    if out:
        out += [{"name": s, "value": d, "source": SOURCE_DEFAULT} for s in secondary
                if (d := _property_default(s, None)) is not None]
    return out


# Kafka's broker properties after the primary one of a topic config, in its order of precedence
SECONDARY_SYNONYMS = {"log.retention.ms": ("log.retention.minutes", "log.retention.hours"),
                      "log.roll.ms": ("log.roll.hours",), "log.roll.jitter.ms": ("log.roll.jitter.hours",),
                      "log.flush.interval.ms": ("log.flush.scheduler.interval.ms",)}
# the broker properties behind topic configs whose Kafka definition has no default (null)
NULL_DEFAULTS = frozenset({"log.retention.ms", "log.retention.minutes", "log.roll.ms", "log.roll.jitter.ms",
                           "log.flush.interval.ms"})
SECONDARY_DEFAULTS = {"log.retention.hours": "168", "log.roll.hours": "168", "log.roll.jitter.hours": "0",
                      "log.flush.scheduler.interval.ms": "9223372036854775807"}


def _property_default(name: str, topic_default: str | None) -> str | None:
    """Kafka's default of a broker property behind a topic config (None: it has none)."""
    if name in NULL_DEFAULTS:
        return None
    if name in SECONDARY_DEFAULTS:
        return SECONDARY_DEFAULTS[name]
    prop = BROKER_PROPERTIES.get(name)
    if prop is not None and prop.default is not None:
        value = prop.default
        return str(value).lower() if isinstance(value, bool) else str(value)
    return broker_configs.kafka_default(name) or topic_default


async def _broker_configs(ctx: RequestContext, resource_name: str, keys: list[str] | None, include_synonyms: bool,
                          include_documentation: bool) -> list[dict]:
    """This broker's properties (resource: its id), or the cluster-wide dynamic defaults only (resource ""), as
    Kafka lists them: a dynamic value as DYNAMIC_BROKER_CONFIG (2) / DYNAMIC_DEFAULT_BROKER_CONFIG (3); a
    stored name Kafka does not know as a broker config with a null value, read-only."""
    config = ctx.broker.config
    defaults = await ctx.broker.admin.dynamic_broker_configs(None)
    own = {} if resource_name == "" else await ctx.broker.admin.dynamic_broker_configs(ctx.broker.node_id)
    names = set(defaults) | set(own) | (set(BROKER_PROPERTIES) if resource_name else set())
    if resource_name and keys:  # Kafka's configs odradek does not read: listed when asked for by name
        names |= {key for key in keys if key in broker_configs.KAFKA_ONLY}
    out = []
    for name in sorted(names):
        if not _wanted(keys, name):
            continue
        doc = broker_property_doc(name) if include_documentation and name in BROKER_PROPERTIES else None
        synonyms = []
        if name in own:
            synonyms.append({"name": name, "value": own[name], "source": SOURCE_DYNAMIC_BROKER})
        if name in defaults:
            synonyms.append({"name": name, "value": defaults[name], "source": SOURCE_DYNAMIC_DEFAULT})
        if resource_name:
            if name in config.raw:
                synonyms.append({"name": name, "value": config.raw[name], "source": SOURCE_STATIC_BROKER})
            default = BROKER_PROPERTIES[name].default if name in BROKER_PROPERTIES else \
                broker_configs.kafka_default(name)
            if default is not None and name not in NULL_DEFAULTS and name not in broker_configs.NO_LISTED_DEFAULT:
                text = str(default).lower() if isinstance(default, bool) else str(default)
                synonyms.append({"name": name, "value": text, "source": SOURCE_DEFAULT})
            if synonyms:  # Kafka's lower-precedence properties of the same setting follow (log.retention.hours)
                synonyms += [{"name": s, "value": config.raw[s], "source": SOURCE_STATIC_BROKER}
                             for s in SECONDARY_SYNONYMS.get(name, ()) if s in config.raw]
                synonyms += [{"name": s, "value": SECONDARY_DEFAULTS[s], "source": SOURCE_DEFAULT}
                             for s in SECONDARY_SYNONYMS.get(name, ()) if s in SECONDARY_DEFAULTS]
        if name in LISTENER_CONFIGS and resource_name and name not in own and name not in defaults:
            synonyms = _listener_synonyms(ctx, name)
        source = synonyms[0]["source"] if synonyms else SOURCE_DEFAULT  # a property with no default: null
        known = broker_configs.known_value(name)
        if not known:  # a name Kafka does not know as a broker config: stored, its value never shown (as a secret)
            synonyms = [{**s, "value": None} for s in synonyms]
        value = synonyms[0]["value"] if known and synonyms else None
        if name in BROKER_PROPERTIES and source in (SOURCE_STATIC_BROKER, SOURCE_DEFAULT) \
                and name not in LISTENER_CONFIGS:
            parsed = config.get(name)
            value = None if parsed is None else str(parsed).lower() if isinstance(parsed, bool) else str(parsed)
        kafka_type = broker_configs.kafka_only_type(name)
        if is_sensitive(name) or not known or kafka_type == CONFIG_TYPE_PASSWORD:
            # Kafka takes a config of unknown type for a secret
            entry = {**_entry(name, None, source, CONFIG_TYPE_PASSWORD if known else 2, [], doc), "is_sensitive": True}
            synonyms = [{**s, "value": None} for s in synonyms]
        else:
            entry = _entry(name, value, source, kafka_type or 2, [], doc)
        entry["read_only"] = not known or name in broker_configs.READ_ONLY
        if include_synonyms:
            entry["synonyms"] = synonyms
        out.append(entry)
    return out


LISTENER_CONFIGS = ("listeners", "advertised.listeners")
KAFKA_DEFAULT_LISTENERS = "PLAINTEXT://:9092"


def _listener_synonyms(ctx: RequestContext, name: str) -> list[dict]:
    """`listeners` / `advertised.listeners` as in force: a static broker config when the operator gave them (the
    properties, or --listen / --advertise), else the default, as Kafka lists them; never empty."""
    setup = ctx.broker.listeners
    raw = ctx.broker.config.raw
    if name in raw and str(raw[name]).strip():
        value = str(raw[name])
    else:
        chosen = setup.bind + setup.legacy07 if name == "listeners" else setup.advertised
        value = ",".join(str(listener) for listener in chosen)
    default = [{"name": name, "value": KAFKA_DEFAULT_LISTENERS, "source": SOURCE_DEFAULT}] \
        if name == "listeners" else []
    if name in setup.given:
        return [{"name": name, "value": value, "source": SOURCE_STATIC_BROKER}, *default]
    return [{"name": name, "value": value, "source": SOURCE_DEFAULT}]


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
