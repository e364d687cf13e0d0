"""Option parsing for `format("odradek")`: the option names and meanings of Spark's Kafka source and sink.

Everything here is plain Python (no Spark, no client): options arrive as a case-insensitive mapping of
strings and are turned into small immutable values that pickle cleanly to executors.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

# Special offsets inside per-partition JSON, as in Spark's Kafka source.
EARLIEST = -2
LATEST = -1

TopicPartitionKey = tuple[str, int]


class OptionError(ValueError):
    """An invalid or inconsistent option; the message names the option."""


def _get(options: Mapping[str, str], name: str) -> str | None:
    """Case-insensitive lookup (Spark passes a CaseInsensitiveDict, tests may pass a plain dict)."""
    if name in options:
        return options[name]
    lowered = name.lower()
    for key, value in options.items():
        if key.lower() == lowered:
            return value
    return None


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = _get(options, name)
    if raw is None:
        return default
    value = str(raw).strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise OptionError(f"option {name!r} must be true or false, got {raw!r}")


def _int(options: Mapping[str, str], name: str, default: int | None, minimum: int | None = None) -> int | None:
    raw = _get(options, name)
    if raw is None:
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise OptionError(f"option {name!r} must be an integer, got {raw!r}") from None
    if minimum is not None and value < minimum:
        raise OptionError(f"option {name!r} must be >= {minimum}, got {value}")
    return value


# ---------------------------------------------------------------------------------------------------
# Subscription
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Subscription:
    """Exactly one of `subscribe` (topic list), `subscribePattern` (regex) or `assign` (partitions)."""

    kind: str  # "subscribe" | "pattern" | "assign"
    topics: tuple[str, ...] = ()
    pattern: str | None = None
    partitions: tuple[TopicPartitionKey, ...] = ()

    def select(self, cluster: Mapping[str, int]) -> list[TopicPartitionKey]:
        """The partitions this subscription covers, given `cluster` = {topic: partition count}."""
        if self.kind == "assign":
            return list(self.partitions)
        if self.kind == "subscribe":
            names = [t for t in self.topics if t in cluster]
        else:
            regex = re.compile(self.pattern or "")
            names = sorted(t for t in cluster if regex.fullmatch(t) and not t.startswith("__"))
        return [(t, p) for t in names for p in range(cluster[t])]

    def describe(self) -> str:
        if self.kind == "assign":
            return "assign " + json.dumps(partitions_to_json(self.partitions))
        if self.kind == "subscribe":
            return "subscribe " + ",".join(self.topics)
        return f"subscribePattern {self.pattern}"


def partitions_to_json(partitions: Any) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for t, p in partitions:
        out.setdefault(t, []).append(p)
    return out


def parse_subscription(options: Mapping[str, str]) -> Subscription:
    given = {name: _get(options, name) for name in ("subscribe", "subscribePattern", "assign")}
    present = [name for name, value in given.items() if value is not None]
    if len(present) != 1:
        raise OptionError(
            "exactly one of the options 'subscribe', 'subscribePattern' or 'assign' must be given"
            + (f" (got {', '.join(present)})" if present else "")
        )
    name = present[0]
    raw = str(given[name])
    if name == "subscribe":
        topics = tuple(t.strip() for t in raw.split(",") if t.strip())
        if not topics:
            raise OptionError("option 'subscribe' names no topic")
        return Subscription("subscribe", topics=topics)
    if name == "subscribePattern":
        if not raw.strip():
            raise OptionError("option 'subscribePattern' is empty")
        try:
            re.compile(raw)
        except re.error as exc:
            raise OptionError(f"option 'subscribePattern' is not a valid regex: {exc}") from None
        return Subscription("pattern", pattern=raw)
    try:
        spec = json.loads(raw)
        parts = tuple(sorted((str(t), int(p)) for t, ps in spec.items() for p in ps))
    except (ValueError, TypeError, AttributeError):
        raise OptionError(f'option \'assign\' must be JSON like {{"topicA":[0,1]}}, got {raw!r}') from None
    if not parts:
        raise OptionError("option 'assign' names no partition")
    return Subscription("assign", partitions=parts)


# ---------------------------------------------------------------------------------------------------
# Offset specifications
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OffsetSpec:
    """Where a read starts or ends.

    kind: "earliest" | "latest" | "offsets" (per-partition, -2/-1 allowed) | "timestamp" (one for all
    partitions) | "timestamps" (per-partition). `per_partition` maps (topic, partition) to an offset or a
    timestamp in ms.
    """

    kind: str
    per_partition: tuple[tuple[TopicPartitionKey, int], ...] = ()
    timestamp: int | None = None

    def mapping(self) -> dict[TopicPartitionKey, int]:
        return dict(self.per_partition)


def _per_partition_json(name: str, raw: str) -> tuple[tuple[TopicPartitionKey, int], ...]:
    try:
        spec = json.loads(raw)
        items = tuple(sorted(((str(t), int(p)), int(v)) for t, ps in spec.items() for p, v in ps.items()))
    except (ValueError, TypeError, AttributeError):
        raise OptionError(
            f'option {name!r} must be "earliest", "latest" or JSON like {{"topicA":{{"0":23,"1":-1}}}}, got {raw!r}'
        ) from None
    return items


def parse_offset_spec(options: Mapping[str, str], which: str, streaming: bool) -> OffsetSpec:
    """`which` is "starting" or "ending". Precedence as in Spark: timestamp > byTimestamp > offsets."""
    ts = _get(options, f"{which}Timestamp")
    if ts is not None:
        try:
            return OffsetSpec("timestamp", timestamp=int(ts))
        except ValueError:
            raise OptionError(f"option '{which}Timestamp' must be milliseconds since the epoch, got {ts!r}") from None
    by_ts = _get(options, f"{which}OffsetsByTimestamp")
    if by_ts is not None:
        return OffsetSpec("timestamps", per_partition=_per_partition_json(f"{which}OffsetsByTimestamp", by_ts))
    raw = _get(options, f"{which}Offsets")
    default = "latest" if (which == "ending" or streaming) else "earliest"
    value = (raw if raw is not None else default).strip()
    if value.lower() in ("earliest", "latest"):
        spec = OffsetSpec(value.lower())
    else:
        spec = OffsetSpec("offsets", per_partition=_per_partition_json(f"{which}Offsets", value))
    if which == "starting" and not streaming and spec.kind == "latest":
        raise OptionError("option 'startingOffsets' cannot be 'latest' for a batch query")
    if which == "ending" and spec.kind == "earliest":
        raise OptionError("option 'endingOffsets' cannot be 'earliest'")
    if which == "ending" and spec.kind == "offsets" and any(v == EARLIEST for _, v in spec.per_partition):
        raise OptionError("option 'endingOffsets' cannot use -2 (earliest) for a partition")
    if which == "starting" and spec.kind == "offsets" and any(v < EARLIEST for _, v in spec.per_partition):
        raise OptionError("option 'startingOffsets' has an offset below -2")
    return spec


# ---------------------------------------------------------------------------------------------------
# Client configuration
# ---------------------------------------------------------------------------------------------------

# Options Spark's Kafka source refuses because the connector manages them itself.
_REJECTED_CLIENT_OPTIONS = {
    "auto.offset.reset": "set 'startingOffsets' instead",
    "enable.auto.commit": "the connector never commits consumer offsets",
    "key.deserializer": "keys are always returned as binary",
    "value.deserializer": "values are always returned as binary",
    "key.serializer": "keys are written as binary or string columns",
    "value.serializer": "values are written as binary or string columns",
}


def client_options(options: Mapping[str, str]) -> dict[str, str]:
    """`kafka.*` options with the prefix removed, for the confluent-kafka client."""
    out = {key[len("kafka."):]: str(value) for key, value in options.items() if key.lower().startswith("kafka.")}
    if not out.get("bootstrap.servers"):
        raise OptionError("option 'kafka.bootstrap.servers' is required")
    for key in out:
        if key in _REJECTED_CLIENT_OPTIONS:
            raise OptionError(f"Kafka option 'kafka.{key}' is not supported: {_REJECTED_CLIENT_OPTIONS[key]}")
    return out


# ---------------------------------------------------------------------------------------------------
# Read and write options as a whole
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReadOptions:
    subscription: Subscription
    starting: OffsetSpec
    ending: OffsetSpec | None
    client: dict[str, str] = field(hash=False)
    include_headers: bool = False
    fail_on_data_loss: bool = True
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    poll_timeout_ms: int = 120_000
    max_records_per_arrow_batch: int = 10_000
    by_timestamp_strategy: str = "error"
    registry: "RegistryFormatOptions | None" = None


# valueFormat / keyFormat values decoded through a schema registry, each reading one schemaType.
REGISTRY_FORMATS = ("avro", "json", "protobuf")
# The option giving FAILFAST / PERMISSIVE, and the name it had when Avro was the only format (still read).
MODE_OPTIONS = ("registry.mode", "avro.mode")


@dataclass(frozen=True)
class RegistryColumnOptions:
    """One column (key or value) read through the registry."""

    column: str  # "key" | "value"
    format: str  # one of REGISTRY_FORMATS
    subject: str
    # Protobuf: the full name of the message the column holds (None: the first message of the schema)
    message: str | None = None


@dataclass(frozen=True)
class RegistryFormatOptions:
    """`valueFormat` / `keyFormat` avro, json or protobuf: decode Confluent-framed records through a schema
    registry. A column not in `columns` stays binary."""

    registry_url: str
    columns: tuple[RegistryColumnOptions, ...]
    mode: str = "FAILFAST"  # FAILFAST | PERMISSIVE

    def subject_of(self, column: str) -> str | None:
        return next((c.subject for c in self.columns if c.column == column), None)

    @property
    def value_subject(self) -> str | None:
        return self.subject_of("value")

    @property
    def key_subject(self) -> str | None:
        return self.subject_of("key")


def _format(options: Mapping[str, str], name: str) -> str:
    value = (_get(options, name) or "binary").strip().lower()
    if value != "binary" and value not in REGISTRY_FORMATS:
        raise OptionError(f"option {name!r} must be 'binary', {', '.join(repr(f) for f in REGISTRY_FORMATS[:-1])} "
                          f"or {REGISTRY_FORMATS[-1]!r}, got {value!r}")
    return value


def wants_registry(options: Mapping[str, str]) -> bool:
    """Whether a column is decoded through the registry (checked before anything else, so writes and plain
    reads never parse the registry options)."""
    return _format(options, "valueFormat") != "binary" or _format(options, "keyFormat") != "binary"


def _mode(options: Mapping[str, str]) -> str:
    given = [(name, _get(options, name)) for name in MODE_OPTIONS]
    given = [(name, value.strip().upper()) for name, value in given if value is not None]
    if len({value for _, value in given}) > 1:
        raise OptionError(f"options {' and '.join(repr(n) for n, _ in given)} disagree")
    name, mode = given[0] if given else (MODE_OPTIONS[0], "FAILFAST")
    if mode not in ("FAILFAST", "PERMISSIVE"):
        raise OptionError(f"option {name!r} must be FAILFAST or PERMISSIVE, got {mode!r}")
    return mode


def parse_registry_options(options: Mapping[str, str], subscription: Subscription) -> RegistryFormatOptions | None:
    """None unless a column is decoded through the registry. Subjects default to TopicNameStrategy
    (`<topic>-value`, `<topic>-key`), which only names one subject when the read covers exactly one topic."""
    formats = {"value": _format(options, "valueFormat"), "key": _format(options, "keyFormat")}
    if all(f == "binary" for f in formats.values()):
        return None
    url = (_get(options, "schema.registry.url") or "").strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise OptionError("option 'schema.registry.url' (http://host:port) is required with valueFormat/keyFormat "
                          + "/".join(REGISTRY_FORMATS))
    topics = sorted({t for t, _ in subscription.partitions} if subscription.kind == "assign" else subscription.topics)
    columns = []
    for column, fmt in formats.items():
        if fmt == "binary":
            continue
        name = f"{column}Subject"
        given = _get(options, name)
        if given and given.strip():
            subject = given.strip()
        elif subscription.kind != "pattern" and len(topics) == 1:
            subject = f"{topics[0]}-{column}"
        else:
            raise OptionError(f"option {name!r} is required when the read covers more than one topic "
                              f"({subscription.describe()})")
        message = (_get(options, f"{column}Message") or "").strip() or None
        if message is not None and fmt != "protobuf":
            raise OptionError(f"option '{column}Message' applies to {column}Format protobuf only")
        columns.append(RegistryColumnOptions(column, fmt, subject, message))
    return RegistryFormatOptions(url, tuple(columns), _mode(options))


def parse_read_options(options: Mapping[str, str], streaming: bool) -> ReadOptions:
    if streaming and (_get(options, "endingOffsets") is not None or _get(options, "endingTimestamp") is not None
                      or _get(options, "endingOffsetsByTimestamp") is not None):
        raise OptionError("ending offsets ('endingOffsets', 'endingTimestamp', ...) apply only to batch queries")
    strategy = (_get(options, "startingOffsetsByTimestampStrategy") or "error").strip().lower()
    if strategy not in ("error", "latest"):
        raise OptionError("option 'startingOffsetsByTimestampStrategy' must be 'error' or 'latest'")
    subscription = parse_subscription(options)
    return ReadOptions(
        subscription=subscription,
        starting=parse_offset_spec(options, "starting", streaming),
        ending=None if streaming else parse_offset_spec(options, "ending", streaming),
        client=client_options(options),
        include_headers=_bool(options, "includeHeaders", False),
        fail_on_data_loss=_bool(options, "failOnDataLoss", True),
        max_offsets_per_trigger=_int(options, "maxOffsetsPerTrigger", None, minimum=1),
        min_partitions=_int(options, "minPartitions", None, minimum=1),
        poll_timeout_ms=_int(options, "kafkaConsumer.pollTimeoutMs", 120_000, minimum=1) or 120_000,
        max_records_per_arrow_batch=_int(options, "arrowBatchSize", 10_000, minimum=1) or 10_000,
        by_timestamp_strategy=strategy,
        registry=parse_registry_options(options, subscription),
    )


@dataclass(frozen=True)
class WriteOptions:
    client: dict[str, str] = field(hash=False)
    topic: str | None = None
    exactly_once: str = "false"  # "true" | "false" | "auto"
    transactional_id_prefix: str = "odradek-spark-"
    marker_topic: str = "odradek-spark-sink-commits"
    timeout_s: float = 60.0


def parse_write_options(options: Mapping[str, str], streaming: bool) -> WriteOptions:
    raw = _get(options, "exactlyOnce")
    mode = (raw if raw is not None else ("true" if streaming else "false")).strip().lower()
    if mode not in ("true", "false", "auto"):
        raise OptionError(f"option 'exactlyOnce' must be true, false or auto, got {raw!r}")
    if mode != "false" and not streaming:
        raise OptionError("option 'exactlyOnce' applies to streaming writes only (a batch job re-run writes again)")
    topic = _get(options, "topic")
    return WriteOptions(
        client=client_options(options),
        topic=topic.strip() if topic and topic.strip() else None,
        exactly_once=mode,
        transactional_id_prefix=_get(options, "transactionalIdPrefix") or "odradek-spark-",
        marker_topic=_get(options, "exactlyOnce.markerTopic") or "odradek-spark-sink-commits",
        timeout_s=(_int(options, "kafkaProducer.timeoutMs", 60_000, minimum=1) or 60_000) / 1000.0,
    )
