"""Topic configs under Kafka's topic-level names (CreateTopics, AlterConfigs, DescribeConfigs): each one's check
of a value, what it does and its unit (`TopicConfig.doc`, DescribeConfigs' `documentation`), its
DescribeConfigs type, and how a topic's effective configs become the storage layer's LogConfig. Their
defaults come from the broker properties that supply them (config.py: `BrokerConfig.topic_defaults`, as in
Kafka: `retention.ms` ← `log.retention.ms`), and from Kafka's own defaults for the configs no property sets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from odradek.records.compression import COMPRESSION_TYPES
from odradek.storage.config import LogConfig

LONG_MAX = (1 << 63) - 1


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


@dataclass(frozen=True)
class TopicConfig:
    """A topic-level config: the check of a value (a string), and what the config does and its unit, in a
    sentence or two (DescribeConfigs' `documentation`)."""

    check: Callable[[str], bool]
    doc: str


# Topic-level configs: name -> its check and its documentation.
TOPIC_CONFIGS: dict[str, TopicConfig] = {
    "cleanup.policy": TopicConfig(
        lambda v: v.strip() == "" or set(v.replace(" ", "").split(",")) <= {"delete", "compact"},
        "What becomes of old records: delete drops segments past retention, compact keeps the newest record of "
        "each key; a comma-separated list, both allowed, or empty for neither (every record kept), as Kafka 4 "
        "takes it (an IncrementalAlterConfigs SUBTRACT of the last policy leaves it empty)."),
    # "producer": batches are stored as produced; a codec: batches in another one are recompressed
    "compression.type": TopicConfig(
        lambda v: v == "producer" or v in COMPRESSION_TYPES,
        "Codec batches are stored in: producer keeps each batch as its producer sent it; uncompressed, gzip, "
        "snappy, lz4 or zstd recompresses a batch in any other."),
    "compression.gzip.level": TopicConfig(
        lambda v: v == "-1" or _int_between(1, 9)(v),
        "gzip level for batches the broker recompresses (1 to 9, -1 for the codec's own); odradek keeps the value "
        "but compresses at its own level."),
    "compression.lz4.level": TopicConfig(
        _int_between(1, 17),
        "lz4 level for batches the broker recompresses (1 to 17); odradek keeps the value but compresses at its "
        "own level."),
    "compression.zstd.level": TopicConfig(
        _int_between(-131072, 22),
        "zstd level for batches the broker recompresses (-131072 to 22); odradek keeps the value but compresses at "
        "its own level."),
    "local.retention.bytes": TopicConfig(
        _topic_int(-2),
        "Tiered storage: bytes of a partition kept on local disk, -2 for retention.bytes; odradek has no tiers and "
        "keeps the value only (bytes)."),
    "local.retention.ms": TopicConfig(
        _topic_int(-2),
        "Tiered storage: how long records stay on local disk, -2 for retention.ms; odradek has no tiers and keeps "
        "the value only (milliseconds)."),
    "segment.jitter.ms": TopicConfig(
        _topic_int(0),
        "Most that is taken at random off segment.ms so that partitions do not all roll at once; odradek keeps the "
        "value only (milliseconds)."),
    "message.format.version": TopicConfig(
        lambda v: bool(v) and v[0].isdigit(),
        "Deprecated record format version, accepted for compatibility and without effect (a version such as "
        "3.0-IV1)."),
    # tiered storage is off in odradek, as on a Kafka broker without remote.log.storage.system.enable
    "remote.storage.enable": TopicConfig(
        lambda v: v == "false",
        "Whether the topic uses tiered storage; odradek has none, so only false is accepted (true or false)."),
    "remote.log.copy.disable": TopicConfig(
        lambda v: v in ("true", "false"),
        "Tiered storage: stops copying segments to remote storage; odradek keeps the value only (true or false)."),
    "remote.log.delete.on.disable": TopicConfig(
        lambda v: v in ("true", "false"),
        "Tiered storage: deletes the remote data when tiering is turned off; odradek keeps the value only (true or "
        "false)."),
    "retention.ms": TopicConfig(
        _topic_int(-1),
        "How long records are kept before their segment may be deleted under the delete policy, -1 for ever "
        "(milliseconds)."),
    "retention.bytes": TopicConfig(
        _topic_int(-1),
        "Size a partition may reach before its oldest segments are deleted under the delete policy, -1 for no "
        "limit (bytes)."),
    "segment.bytes": TopicConfig(
        _topic_int(14),
        "Size at which the active segment file is closed and a new one begun (bytes)."),
    "segment.ms": TopicConfig(
        _topic_int(1),
        "Age at which the active segment is closed and a new one begun even when not full (milliseconds)."),
    "segment.index.bytes": TopicConfig(
        _topic_int(4),
        "Size of a segment's offset index file; odradek's indexes grow as needed, so it keeps the value only "
        "(bytes)."),
    "index.interval.bytes": TopicConfig(
        _topic_int(0),
        "Log bytes between two entries of the offset index: smaller makes the index bigger and lookups finer "
        "(bytes)."),
    "max.message.bytes": TopicConfig(
        _topic_int(0),
        "Largest record batch a producer may write to the topic (bytes)."),
    "message.timestamp.type": TopicConfig(
        lambda v: v in ("CreateTime", "LogAppendTime"),
        "CreateTime stores the producer's timestamps; LogAppendTime replaces them with the broker's clock as "
        "batches are appended."),
    "flush.messages": TopicConfig(
        _topic_int(1),
        "Records written after which the partition is forced to disk; the largest long leaves it to the operating "
        "system (a count)."),
    "flush.ms": TopicConfig(
        _topic_int(0),
        "Longest written records wait before the partition is forced to disk; the largest long leaves it to the "
        "operating system (milliseconds)."),
    "min.insync.replicas": TopicConfig(
        _topic_int(1),
        "In-sync replicas needed for a write with acks=all to succeed; with fewer it is refused with "
        "NOT_ENOUGH_REPLICAS (a count)."),
    "delete.retention.ms": TopicConfig(
        _topic_int(0),
        "How long a tombstone (a record with a null value) stays in a compacted log after compaction has reached "
        "it (milliseconds)."),
    "file.delete.delay.ms": TopicConfig(
        _topic_int(0),
        "Wait before a deleted segment's files leave the disk; odradek keeps the value only (milliseconds)."),
    "min.compaction.lag.ms": TopicConfig(
        _topic_int(0),
        "Records younger than this are never compacted away (milliseconds)."),
    "max.compaction.lag.ms": TopicConfig(
        _topic_int(1),
        "Longest a record may wait, once compaction could drop it, before its log is compacted (milliseconds)."),
    "min.cleanable.dirty.ratio": TopicConfig(
        lambda v: _is_ratio(v),
        "Share of a log written since its last compaction above which the cleaner compacts it (a fraction, 0 to 1)."),
    "message.timestamp.difference.max.ms": TopicConfig(
        _topic_int(0),
        "Deprecated: the largest gap allowed between a record's CreateTime and the broker's clock; odradek keeps "
        "the value without checking it (milliseconds)."),
    "message.timestamp.before.max.ms": TopicConfig(
        _topic_int(0),
        "How far behind the broker's clock a record's CreateTime may be; odradek keeps the value without checking "
        "it (milliseconds)."),
    "message.timestamp.after.max.ms": TopicConfig(
        _topic_int(0),
        "How far ahead of the broker's clock a record's CreateTime may be; odradek keeps the value without "
        "checking it (milliseconds)."),
    "preallocate": TopicConfig(
        lambda v: v in ("true", "false"),
        "Whether segment files are created at full size at once; odradek keeps the value only (true or false)."),
    "unclean.leader.election.enable": TopicConfig(
        lambda v: v in ("true", "false"),
        "Whether a replica outside the in-sync set may lead the partition when no in-sync one is left, losing the "
        "records it lacks (true or false)."),
    "message.downconversion.enable": TopicConfig(
        lambda v: v in ("true", "false"),
        "Whether Fetch v0-3 may get records converted down to the older formats; odradek always converts them and "
        "keeps the value only (true or false)."),
    "leader.replication.throttled.replicas": TopicConfig(
        lambda v: _is_throttled_replicas(v),
        "Replicas whose leader sends them data at no more than leader.replication.throttled.rate: PARTITION:BROKER "
        "pairs, comma-separated, or * for all."),
    "follower.replication.throttled.replicas": TopicConfig(
        lambda v: _is_throttled_replicas(v),
        "Replicas a follower fetches at no more than follower.replication.throttled.rate: PARTITION:BROKER pairs, "
        "comma-separated, or * for all."),
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
    spec = TOPIC_CONFIGS.get(name)
    if spec is None:
        return f"Unknown topic config name: {name}"
    if value is None or not spec.check(value):
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


def topic_config_doc(name: str) -> str:
    """DescribeConfigs' `documentation` of a topic config: its `doc`, else a stand-in (never empty)."""
    spec = TOPIC_CONFIGS.get(name)
    return (spec.doc if spec is not None else "") or f"Topic config {name}; no description is written yet."
