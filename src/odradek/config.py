"""Broker and topic configuration under Kafka's own property names.

Broker properties come from an optional `server.properties` file and `--set key=value` overrides. Topic
configs (CreateTopics, later AlterConfigs) use the topic-level names, and each falls back to the broker
property that supplies its default, as in Kafka (`retention.ms` ← `log.retention.ms`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from odradek.records.compression import COMPRESSION_TYPES
from odradek.storage.config import LogConfig

log = logging.getLogger(__name__)

LONG_MAX = (1 << 63) - 1
HOUR_MS = 3600 * 1000


class ConfigError(ValueError):
    """A property with a value of the wrong type or out of range."""


def _parse_bool(value: str) -> bool:
    v = value.strip().lower()
    if v in ("true", "false"):
        return v == "true"
    raise ConfigError(f"expected true or false, got {value!r}")


def _parse_int(value: str) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise ConfigError(f"expected an integer, got {value!r}") from None


@dataclass(frozen=True)
class Property:
    name: str
    parse: Callable[[str], object]
    default: object
    check: Callable[[object], bool] = lambda v: True
    doc: str = ""


def _at_least(n: int) -> Callable[[object], bool]:
    return lambda v: isinstance(v, int) and v >= n


def _positive_or_unlimited(v: object) -> bool:
    return isinstance(v, int) and (v > 0 or v == -1)


# Broker properties odradek understands. Others are accepted with a warning, as Kafka does.
BROKER_PROPERTIES: dict[str, Property] = {
    p.name: p
    for p in [
        Property("node.id", _parse_int, 0, _at_least(0)),
        Property("broker.id", _parse_int, -1),
        Property("num.partitions", _parse_int, 1, _at_least(1)),
        Property("default.replication.factor", _parse_int, 1, _at_least(1)),
        Property("auto.create.topics.enable", _parse_bool, True),
        Property("delete.topic.enable", _parse_bool, True),
        Property("message.max.bytes", _parse_int, 1048588, _at_least(0)),
        Property("socket.request.max.bytes", _parse_int, 104857600, _at_least(1)),
        # Upper bound on one Fetch response, whatever the client asks for (Kafka's default is 55 MiB). Large
        # responses cost more to join and to push through asyncio's transport buffer than extra round trips
        # do; see README's performance section. The first batch is returned whatever its size.
        Property("fetch.max.bytes", _parse_int, 4 << 20, _at_least(1024)),
        # incremental fetch sessions (KIP-227, broker/fetch_sessions.py)
        Property("max.incremental.fetch.session.cache.slots", _parse_int, 1000, _at_least(0)),
        Property("min.incremental.fetch.session.eviction.ms", _parse_int, 120000, _at_least(0)),
        Property("log.segment.bytes", _parse_int, 1 << 30, _at_least(14)),
        Property("log.roll.ms", _parse_int, None),
        Property("log.roll.hours", _parse_int, 168, _at_least(1)),
        Property("log.retention.ms", _parse_int, None),
        Property("log.retention.minutes", _parse_int, None),
        Property("log.retention.hours", _parse_int, 168),
        Property("log.retention.bytes", _parse_int, -1),
        Property("log.retention.check.interval.ms", _parse_int, 300000, _at_least(1)),
        Property("log.index.interval.bytes", _parse_int, 4096, _at_least(0)),
        Property("log.flush.interval.messages", _parse_int, LONG_MAX, _at_least(1)),
        Property("log.flush.interval.ms", _parse_int, None),
        Property("log.message.timestamp.type", str, "CreateTime", lambda v: v in ("CreateTime", "LogAppendTime")),
        Property("log.cleanup.policy", str, "delete",
                 lambda v: set(v.replace(" ", "").split(",")) <= {"delete", "compact"} and v != ""),
        # the log cleaner (storage/cleaner.py, docs/compaction.md); Kafka's names and defaults
        Property("log.cleaner.enable", _parse_bool, True),
        Property("log.cleaner.threads", _parse_int, 1, _at_least(1)),
        Property("log.cleaner.dedupe.buffer.size", _parse_int, 134217728, _at_least(1024)),
        Property("log.cleaner.io.max.bytes.per.second", float, 1.7976931348623157e308, lambda v: v > 0),
        Property("log.cleaner.backoff.ms", _parse_int, 15000, _at_least(0)),
        Property("log.cleaner.min.cleanable.ratio", float, 0.5, lambda v: 0.0 <= v <= 1.0),
        Property("log.cleaner.delete.retention.ms", _parse_int, 86400000, _at_least(0)),
        Property("log.cleaner.min.compaction.lag.ms", _parse_int, 0, _at_least(0)),
        Property("log.cleaner.max.compaction.lag.ms", _parse_int, LONG_MAX, _at_least(1)),
        Property("min.insync.replicas", _parse_int, 1, _at_least(1)),
        Property("compression.type", str, "producer", lambda v: v == "producer" or v in COMPRESSION_TYPES),
        Property("group.min.session.timeout.ms", _parse_int, 6000, _at_least(1)),
        Property("group.max.session.timeout.ms", _parse_int, 1800000, _at_least(1)),
        # Kafka's default (3000); a lone member does not wait it out: see group.initial.rebalance.quiet.ms
        Property("group.initial.rebalance.delay.ms", _parse_int, 3000, _at_least(0)),
        # odradek: the initial delay ends once no new member has joined for this long
        Property("group.initial.rebalance.quiet.ms", _parse_int, 250, _at_least(0)),
        Property("group.max.size", _parse_int, 2147483647, _at_least(1)),
        # the consumer group protocol (KIP-848); Kafka's names and defaults
        Property("group.consumer.session.timeout.ms", _parse_int, 45000, _at_least(1)),
        Property("group.consumer.min.session.timeout.ms", _parse_int, 45000, _at_least(1)),
        Property("group.consumer.max.session.timeout.ms", _parse_int, 60000, _at_least(1)),
        Property("group.consumer.heartbeat.interval.ms", _parse_int, 5000, _at_least(1)),
        Property("group.consumer.min.heartbeat.interval.ms", _parse_int, 5000, _at_least(1)),
        Property("group.consumer.max.heartbeat.interval.ms", _parse_int, 15000, _at_least(1)),
        Property("group.consumer.assignors", str, "uniform,range",
                 lambda v: bool(v.strip()) and all(a.strip() in ("uniform", "range") for a in v.split(","))),
        Property("group.consumer.max.size", _parse_int, 2147483647, _at_least(1)),
        Property("offsets.topic.num.partitions", _parse_int, 50, _at_least(1)),
        Property("offsets.retention.minutes", _parse_int, 10080, _at_least(1)),
        Property("offsets.retention.check.interval.ms", _parse_int, 600000, _at_least(1)),
        Property("offset.metadata.max.bytes", _parse_int, 4096, _at_least(0)),
        Property("producer.id.expiration.ms", _parse_int, 86400000, _at_least(1)),
        # Kafka's default is 50; one node gains nothing from sharding the log over 50 partitions, which cost
        # ~0.4 s of directory/segment creation (fsyncs) on a first start and 150 file descriptors.
        Property("transaction.state.log.num.partitions", _parse_int, 1, _at_least(1)),
        Property("transaction.max.timeout.ms", _parse_int, 900000, _at_least(1)),
        Property("transaction.abort.timed.out.transaction.cleanup.interval.ms", _parse_int, 10000, _at_least(1)),
        Property("transactional.id.expiration.ms", _parse_int, 604800000, _at_least(1)),
        # KIP-890: a partition asks the coordinator before a producer's first write of a transaction there
        Property("transaction.partition.verification.enable", _parse_bool, True),
        # -- cluster mode (set zookeeper.connect); Kafka's names and defaults --
        Property("zookeeper.connect", str, ""),
        Property("zookeeper.session.timeout.ms", _parse_int, 18000, _at_least(1000)),
        Property("zookeeper.connection.timeout.ms", _parse_int, None),
        Property("broker.rack", str, None),
        Property("replica.lag.time.max.ms", _parse_int, 30000, _at_least(1)),
        Property("replica.fetch.max.bytes", _parse_int, 1048576, _at_least(1)),
        Property("replica.fetch.min.bytes", _parse_int, 1, _at_least(1)),
        Property("replica.fetch.wait.max.ms", _parse_int, 500, _at_least(0)),
        Property("replica.fetch.response.max.bytes", _parse_int, 10485760, _at_least(1)),
        Property("replica.fetch.backoff.ms", _parse_int, 1000, _at_least(0)),
        Property("replica.high.watermark.checkpoint.interval.ms", _parse_int, 5000, _at_least(1)),
        Property("unclean.leader.election.enable", _parse_bool, False),
        Property("controlled.shutdown.enable", _parse_bool, True),
        Property("controlled.shutdown.max.retries", _parse_int, 3, _at_least(0)),
        Property("controlled.shutdown.retry.backoff.ms", _parse_int, 5000, _at_least(0)),
        Property("controller.socket.timeout.ms", _parse_int, 30000, _at_least(1)),
        # replication throttles (bytes/s) of the partitions the topic configs below name; also dynamic
        # (/config/brokers, set by `odradek cluster reassign --throttle`)
        Property("leader.replication.throttled.rate", _parse_int, LONG_MAX, _at_least(1)),
        Property("follower.replication.throttled.rate", _parse_int, LONG_MAX, _at_least(1)),
        Property("auto.leader.rebalance.enable", _parse_bool, True),
        Property("leader.imbalance.check.interval.seconds", _parse_int, 300, _at_least(1)),
        Property("leader.imbalance.per.broker.percentage", _parse_int, 10, _at_least(0)),
        Property("offsets.topic.replication.factor", _parse_int, 3, _at_least(1)),
        Property("transaction.state.log.replication.factor", _parse_int, 3, _at_least(1)),
        Property("transaction.state.log.min.isr", _parse_int, 2, _at_least(1)),
        # -- listeners (net/listeners.py) and TLS (net/tls.py); `listener.name.<name>.<ssl.*>` overrides a
        # TLS property for one listener --
        Property("listeners", str, ""),
        Property("advertised.listeners", str, ""),
        Property("listener.security.protocol.map", str, ""),
        Property("inter.broker.listener.name", str, ""),
        Property("security.inter.broker.protocol", str, "PLAINTEXT"),
        Property("ssl.keystore.type", str, "PEM"),
        Property("ssl.keystore.location", str, ""),
        Property("ssl.key.password", str, ""),
        Property("ssl.truststore.type", str, "PEM"),
        Property("ssl.truststore.location", str, ""),
        Property("ssl.client.auth", str, "none", lambda v: v in ("none", "requested", "required")),
        Property("ssl.enabled.protocols", str, "TLSv1.2,TLSv1.3"),
        Property("ssl.cipher.suites", str, ""),
        Property("ssl.principal.mapping.rules", str, "DEFAULT"),
        Property("ssl.endpoint.identification.algorithm", str, "https"),
        # SASL (net/sasl.py), also per listener: listener.name.<name>.sasl.enabled.mechanisms, ...
        Property("sasl.enabled.mechanisms", str, "GSSAPI"),
        Property("plain.sasl.jaas.config", str, ""),
        # brokers logging in to each other on a SASL inter-broker listener (net/sasl_client.py): the mechanism,
        # and the broker's own username="..." password="..." in listener.name.<name>.<mechanism>.sasl.jaas.config
        Property("sasl.mechanism.inter.broker.protocol", str, "GSSAPI"),
        Property("scram-sha-256.sasl.jaas.config", str, ""),
        Property("scram-sha-512.sasl.jaas.config", str, ""),
        Property("connections.max.reauth.ms", _parse_int, 0, _at_least(0)),
        Property("connection.failed.authentication.delay.ms", _parse_int, 100, _at_least(0)),
        Property("sasl.oauthbearer.jwks.endpoint.url", str, ""),
        Property("sasl.oauthbearer.jwks.endpoint.refresh.ms", _parse_int, 3600000, _at_least(1000)),
        Property("sasl.oauthbearer.expected.audience", str, ""),
        Property("sasl.oauthbearer.expected.issuer", str, ""),
        Property("sasl.oauthbearer.sub.claim.name", str, "sub"),
        Property("sasl.oauthbearer.clock.skew.seconds", _parse_int, 30, _at_least(0)),
        # connection limits (net/limits.py) and the bytes of requests being read (net/framing.py)
        Property("queued.max.request.bytes", _parse_int, -1, lambda v: isinstance(v, int) and (v == -1 or v > 0)),
        Property("max.connections", _parse_int, 2147483647, _at_least(0)),
        Property("max.connections.per.ip", _parse_int, 2147483647, _at_least(0)),
        Property("max.connections.per.ip.overrides", str, ""),
        # client quotas (broker/quotas.py): the rate is measured over quota.window.num samples of this size
        Property("quota.window.num", _parse_int, 11, _at_least(2)),
        Property("quota.window.size.seconds", _parse_int, 1, _at_least(1)),
        # DescribeTopicPartitions (handlers/k75_describe_topic_partitions.py): partitions in one response at most
        Property("max.request.partition.size.limit", _parse_int, 2000, _at_least(1)),
        # the authorizer (broker/authorizer.py)
        Property("authorizer.class.name", str, ""),
        Property("super.users", str, ""),
        Property("allow.everyone.if.no.acl.found", _parse_bool, False),
    ]
}


def _listener_override(key: str) -> tuple[str, str] | None:
    """(LISTENER, property) of a `listener.name.<listener>.<property>` key, else None."""
    if not key.startswith("listener.name."):
        return None
    listener, _, rest = key[len("listener.name."):].partition(".")
    return (listener.upper(), rest) if listener and rest else None


class BrokerConfig:
    """Resolved broker properties; `get` returns the parsed value or the default."""

    def __init__(self, values: dict[str, str] | None = None) -> None:
        self.raw: dict[str, str] = {}
        self._parsed: dict[str, object] = {}
        self._listener_overrides: dict[tuple[str, str], object] = {}  # (LISTENER, key): value
        for key, value in (values or {}).items():
            self.set(key, value)

    def set(self, key: str, value: str) -> None:
        key = key.strip()
        listener_key = _listener_override(key)
        prop = BROKER_PROPERTIES.get(listener_key[1] if listener_key else key)
        self.raw[key] = value
        if listener_key is not None and prop is not None:
            parsed = prop.parse(value)
            if not prop.check(parsed):
                raise ConfigError(f"invalid value {value!r} for {key}")
            self._listener_overrides[listener_key] = parsed
            return
        if prop is None:
            log.warning("ignoring unknown broker property %s", key)
            return
        parsed = prop.parse(value)
        if not prop.check(parsed):
            raise ConfigError(f"invalid value {value!r} for {key}")
        self._parsed[key] = parsed

    def get(self, key: str) -> object:
        if key in self._parsed:
            return self._parsed[key]
        return BROKER_PROPERTIES[key].default

    def int(self, key: str) -> int:
        return int(self.get(key))  # type: ignore[arg-type]

    def for_listener(self, listener: str, key: str) -> object:
        """``key`` as `listener.name.<listener>.<key>` sets it for that listener, else as set for all."""
        return self._listener_overrides.get((listener.upper(), key), self.get(key))

    @property
    def node_id(self) -> int:
        broker_id = self.int("broker.id")
        return broker_id if broker_id >= 0 else self.int("node.id")

    def retention_ms(self) -> int:
        for key, scale in (("log.retention.ms", 1), ("log.retention.minutes", 60000), ("log.retention.hours", HOUR_MS)):
            value = self.get(key)
            if value is not None:
                return value if value < 0 else value * scale  # type: ignore[operator,return-value]
        return 168 * HOUR_MS

    def roll_ms(self) -> int:
        value = self.get("log.roll.ms")
        return value if value is not None else self.int("log.roll.hours") * HOUR_MS  # type: ignore[return-value]

    def topic_defaults(self) -> dict[str, str]:
        """The default of every topic config, as strings, derived from broker properties."""
        flush_ms = self.get("log.flush.interval.ms")
        return {
            "cleanup.policy": str(self.get("log.cleanup.policy")),
            "compression.type": str(self.get("compression.type")),
            "retention.ms": str(self.retention_ms()),
            "retention.bytes": str(self.int("log.retention.bytes")),
            "segment.bytes": str(self.int("log.segment.bytes")),
            "segment.ms": str(self.roll_ms()),
            "segment.index.bytes": "10485760",
            "index.interval.bytes": str(self.int("log.index.interval.bytes")),
            "max.message.bytes": str(self.int("message.max.bytes")),
            "message.timestamp.type": str(self.get("log.message.timestamp.type")),
            "flush.messages": str(self.int("log.flush.interval.messages")),
            "flush.ms": str(flush_ms if flush_ms is not None else LONG_MAX),
            "min.insync.replicas": str(self.int("min.insync.replicas")),
            "unclean.leader.election.enable": str(self.get("unclean.leader.election.enable")).lower(),
            "delete.retention.ms": str(self.int("log.cleaner.delete.retention.ms")),
            "min.compaction.lag.ms": str(self.int("log.cleaner.min.compaction.lag.ms")),
            "max.compaction.lag.ms": str(self.int("log.cleaner.max.compaction.lag.ms")),
            "min.cleanable.dirty.ratio": str(self.get("log.cleaner.min.cleanable.ratio")),
            # Kafka 3.9's other topic configs, at its defaults: DescribeConfigs lists them and CreateTopics and
            # AlterConfigs take them, as clients and tools expect; STORED_ONLY_TOPIC_CONFIGS says which of them
            # odradek keeps without acting on
            **KAFKA_TOPIC_DEFAULTS,
        }


def _topic_int(minimum: int) -> Callable[[str], bool]:
    def check(value: str) -> bool:
        try:
            return int(value) >= minimum
        except ValueError:
            return False

    return check


# Kafka 3.9's topic configs that no broker property of odradek's sets, at Kafka's defaults.
KAFKA_TOPIC_DEFAULTS: dict[str, str] = {
    "compression.gzip.level": "-1",
    "compression.lz4.level": "9",
    "compression.zstd.level": "3",
    "file.delete.delay.ms": "60000",
    "follower.replication.throttled.replicas": "",
    "leader.replication.throttled.replicas": "",
    "local.retention.bytes": "-2",
    "local.retention.ms": "-2",
    "message.downconversion.enable": "true",
    "message.format.version": "3.0-IV1",
    "message.timestamp.after.max.ms": str(LONG_MAX),
    "message.timestamp.before.max.ms": str(LONG_MAX),
    "message.timestamp.difference.max.ms": str(LONG_MAX),
    "preallocate": "false",
    "remote.log.copy.disable": "false",
    "remote.log.delete.on.disable": "false",
    "remote.storage.enable": "false",
    "segment.jitter.ms": "0",
}
# Accepted and kept, with no effect on odradek (its storage has no tiers, no preallocation;
# message.format.version is deprecated in Kafka 3.x, which ignores it too).
STORED_ONLY_TOPIC_CONFIGS = frozenset({
    "compression.gzip.level", "compression.lz4.level", "compression.zstd.level",
    "file.delete.delay.ms", "local.retention.bytes", "local.retention.ms",
    "message.format.version", "preallocate",
    "remote.log.copy.disable", "remote.log.delete.on.disable", "segment.jitter.ms",
})


def _int_between(low: int, high: int) -> Callable[[str], bool]:
    def check(value: str) -> bool:
        try:
            return low <= int(value) <= high
        except ValueError:
            return False

    return check


# Topic-level configs: name -> validator of the string value.
TOPIC_CONFIGS: dict[str, Callable[[str], bool]] = {
    "cleanup.policy": lambda v: set(v.replace(" ", "").split(",")) <= {"delete", "compact"} and v != "",
    # "producer": batches are stored as produced; a codec: batches in another one are recompressed
    "compression.type": lambda v: v == "producer" or v in COMPRESSION_TYPES,
    "compression.gzip.level": lambda v: v == "-1" or _int_between(1, 9)(v),
    "compression.lz4.level": _int_between(1, 17),
    "compression.zstd.level": _int_between(-131072, 22),
    "local.retention.bytes": _topic_int(-2),
    "local.retention.ms": _topic_int(-2),
    "segment.jitter.ms": _topic_int(0),
    "message.format.version": lambda v: bool(v) and v[0].isdigit(),
    # tiered storage is off in odradek, as on a Kafka broker without remote.log.storage.system.enable
    "remote.storage.enable": lambda v: v == "false",
    "remote.log.copy.disable": lambda v: v in ("true", "false"),
    "remote.log.delete.on.disable": lambda v: v in ("true", "false"),
    "retention.ms": _topic_int(-1),
    "retention.bytes": _topic_int(-1),
    "segment.bytes": _topic_int(14),
    "segment.ms": _topic_int(1),
    "segment.index.bytes": _topic_int(4),
    "index.interval.bytes": _topic_int(0),
    "max.message.bytes": _topic_int(0),
    "message.timestamp.type": lambda v: v in ("CreateTime", "LogAppendTime"),
    "flush.messages": _topic_int(1),
    "flush.ms": _topic_int(0),
    "min.insync.replicas": _topic_int(1),
    "delete.retention.ms": _topic_int(0),
    "file.delete.delay.ms": _topic_int(0),
    "min.compaction.lag.ms": _topic_int(0),
    "max.compaction.lag.ms": _topic_int(1),
    "min.cleanable.dirty.ratio": lambda v: _is_ratio(v),
    "message.timestamp.difference.max.ms": _topic_int(0),
    "message.timestamp.before.max.ms": _topic_int(0),
    "message.timestamp.after.max.ms": _topic_int(0),
    "preallocate": lambda v: v in ("true", "false"),
    "unclean.leader.election.enable": lambda v: v in ("true", "false"),
    "message.downconversion.enable": lambda v: v in ("true", "false"),
    "leader.replication.throttled.replicas": lambda v: _is_throttled_replicas(v),
    "follower.replication.throttled.replicas": lambda v: _is_throttled_replicas(v),
}


def _is_throttled_replicas(value: str) -> bool:
    """Kafka's form: "*", or "PARTITION:BROKER,..." (empty: none)."""
    value = value.replace(" ", "")
    if value in ("", "*"):
        return True
    for entry in value.split(","):
        partition, _, broker = entry.partition(":")
        if not (partition.isdigit() and broker.isdigit()):
            return False
    return True


def _is_ratio(value: str) -> bool:
    try:
        return 0.0 <= float(value) <= 1.0
    except ValueError:
        return False


def validate_topic_config(name: str, value: str | None) -> str | None:
    """Return an error message for a bad topic config, or None when it is acceptable."""
    check = TOPIC_CONFIGS.get(name)
    if check is None:
        return f"Unknown topic config name: {name}"
    if value is None or not check(value):
        return f"Invalid value {value} for configuration {name}"
    return None


def log_config_for(effective: dict[str, str]) -> LogConfig:
    """Map a topic's effective configs (defaults merged with overrides) onto the storage layer's LogConfig."""
    flush_messages = int(effective["flush.messages"])
    flush_ms = int(effective["flush.ms"])
    return LogConfig(
        segment_bytes=int(effective["segment.bytes"]),
        segment_ms=int(effective["segment.ms"]),
        index_interval_bytes=int(effective["index.interval.bytes"]),
        retention_ms=int(effective["retention.ms"]),
        retention_bytes=int(effective["retention.bytes"]),
        flush_messages=None if flush_messages >= LONG_MAX else flush_messages,
        flush_ms=None if flush_ms >= LONG_MAX else flush_ms,
    ).with_overrides({name: effective[name] for name in (
        "cleanup.policy", "delete.retention.ms", "min.compaction.lag.ms", "max.compaction.lag.ms",
        "min.cleanable.dirty.ratio") if name in effective})


def read_properties(path: Path) -> dict[str, str]:
    """Parse a Java-style .properties file (key=value or key: value, # and ! comments)."""
    out: dict[str, str] = {}
    for lineno, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if sep < 0:
            raise ConfigError(f"{path}:{lineno}: expected key=value")
        out[line[:sep].strip()] = line[sep + 1:].strip()
    return out


# DescribeConfigs v3+ config types: 1 BOOLEAN, 2 STRING, 3 INT, 5 LONG, 6 DOUBLE, 7 LIST.
CONFIG_TYPE_BOOLEAN, CONFIG_TYPE_STRING, CONFIG_TYPE_INT, CONFIG_TYPE_LONG, CONFIG_TYPE_DOUBLE, CONFIG_TYPE_LIST = 1, 2, 3, 5, 6, 7
TOPIC_CONFIG_TYPES: dict[str, int] = {
    "cleanup.policy": CONFIG_TYPE_LIST,
    "compression.type": CONFIG_TYPE_STRING,
    "message.timestamp.type": CONFIG_TYPE_STRING,
    "segment.bytes": CONFIG_TYPE_INT,
    "segment.index.bytes": CONFIG_TYPE_INT,
    "index.interval.bytes": CONFIG_TYPE_INT,
    "max.message.bytes": CONFIG_TYPE_INT,
    "min.insync.replicas": CONFIG_TYPE_INT,
    "min.cleanable.dirty.ratio": CONFIG_TYPE_DOUBLE,
    "preallocate": CONFIG_TYPE_BOOLEAN,
    "unclean.leader.election.enable": CONFIG_TYPE_BOOLEAN,
    "message.downconversion.enable": CONFIG_TYPE_BOOLEAN,
    "remote.storage.enable": CONFIG_TYPE_BOOLEAN,
    "remote.log.copy.disable": CONFIG_TYPE_BOOLEAN,
    "remote.log.delete.on.disable": CONFIG_TYPE_BOOLEAN,
    "message.format.version": CONFIG_TYPE_STRING,
    "compression.gzip.level": CONFIG_TYPE_INT,
    "compression.lz4.level": CONFIG_TYPE_INT,
    "compression.zstd.level": CONFIG_TYPE_INT,
    "leader.replication.throttled.replicas": CONFIG_TYPE_LIST,
    "follower.replication.throttled.replicas": CONFIG_TYPE_LIST,
}  # every other topic config is a LONG


def topic_config_type(name: str) -> int:
    return TOPIC_CONFIG_TYPES.get(name, CONFIG_TYPE_LONG)
