"""Per-partition log settings: Kafka's topic-level ``segment.*``, ``index.*``, ``retention.*`` and ``flush.*``.

The broker builds one default ``LogConfig`` from its ``log.*`` properties and derives a topic's config from it
with ``with_overrides`` (topic-level names). Instances are plain values: the log never mutates the one it is
given, so a default shared by many logs is safe; change a log's settings with ``PartitionLog.update_config``.

Concurrency: immutable in practice (nothing in storage/ assigns to its fields); safe to share between threads.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping

INT32_MAX = (1 << 31) - 1
LONG_MAX = (1 << 63) - 1
_WEEK_MS = 7 * 24 * 3600 * 1000
# Kafka's lower bound for segment.bytes (the size of the smallest legacy message).
MIN_SEGMENT_BYTES = 14

# topic-level config name -> LogConfig field
TOPIC_CONFIG_FIELDS: dict[str, str] = {
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "index.interval.bytes": "index_interval_bytes",
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "flush.messages": "flush_messages",
    "flush.ms": "flush_ms",
    "delete.retention.ms": "delete_retention_ms",
    "min.compaction.lag.ms": "min_compaction_lag_ms",
    "max.compaction.lag.ms": "max_compaction_lag_ms",
}
_FLOAT_FIELDS = {"min.cleanable.dirty.ratio": "min_cleanable_dirty_ratio"}


@dataclass
class LogConfig:
    """Settings of one partition log (defaults are Kafka's). Not mutated by storage/; safe to share."""

    segment_bytes: int = 1 << 30  # log.segment.bytes / segment.bytes
    segment_ms: int = _WEEK_MS  # log.roll.ms / segment.ms
    index_interval_bytes: int = 4096  # log.index.interval.bytes / index.interval.bytes
    retention_ms: int = _WEEK_MS  # log.retention.ms / retention.ms; negative = unlimited
    retention_bytes: int = -1  # log.retention.bytes / retention.bytes; negative = unlimited
    flush_messages: int | None = None  # log.flush.interval.messages (None = leave it to the OS)
    flush_ms: int | None = None  # log.flush.interval.ms (None = leave it to the OS)
    # cleanup.policy: "delete" (retention), "compact" (the log cleaner, cleaner.py), or both
    compact: bool = False
    delete: bool = True
    delete_retention_ms: int = 86_400_000  # log.cleaner.delete.retention.ms / delete.retention.ms
    min_compaction_lag_ms: int = 0  # log.cleaner.min.compaction.lag.ms / min.compaction.lag.ms
    max_compaction_lag_ms: int = LONG_MAX  # log.cleaner.max.compaction.lag.ms / max.compaction.lag.ms
    min_cleanable_dirty_ratio: float = 0.5  # log.cleaner.min.cleanable.ratio / min.cleanable.dirty.ratio

    def __post_init__(self) -> None:
        if self.segment_bytes < MIN_SEGMENT_BYTES:
            raise ValueError(f"segment.bytes must be at least {MIN_SEGMENT_BYTES}, got {self.segment_bytes}")
        if self.segment_ms < 1:
            raise ValueError(f"segment.ms must be at least 1, got {self.segment_ms}")
        if self.index_interval_bytes < 0:
            raise ValueError(f"index.interval.bytes must be >= 0, got {self.index_interval_bytes}")
        if self.flush_messages is not None and self.flush_messages < 1:
            raise ValueError(f"flush.messages must be >= 1, got {self.flush_messages}")
        if self.flush_ms is not None and self.flush_ms < 0:
            raise ValueError(f"flush.ms must be >= 0, got {self.flush_ms}")

    @property
    def max_segment_bytes(self) -> int:
        """segment.bytes capped so every position in a segment fits the index's int32."""
        return min(self.segment_bytes, INT32_MAX)

    def with_overrides(self, overrides: Mapping[str, str | int | None]) -> "LogConfig":
        """A copy with topic-level settings applied (``{"retention.ms": "60000"}``); other names are ignored.

        A value of None removes nothing (the default stays); Kafka's "never" for the flush settings
        (Long.MAX_VALUE) becomes None.
        """
        changes: dict[str, object] = {}
        for name, value in overrides.items():
            if name == "cleanup.policy" and value is not None:
                policies = set(str(value).replace(" ", "").split(","))
                changes["compact"] = "compact" in policies
                changes["delete"] = "delete" in policies
                continue
            if name in _FLOAT_FIELDS and value is not None:
                changes[_FLOAT_FIELDS[name]] = float(value)
                continue
            field_name = TOPIC_CONFIG_FIELDS.get(name)
            if field_name is None or value is None:
                continue
            number = int(value)
            if field_name in ("flush_messages", "flush_ms") and number >= LONG_MAX:
                changes[field_name] = None
            else:
                changes[field_name] = number
        return replace(self, **changes) if changes else self  # type: ignore[arg-type]
