"""Committed offsets, in memory: group -> (topic, partition) -> OffsetValue.

The store is only the map and the expiry rule; durability (the records in `__consumer_offsets`) is the
coordinator's job, which writes before it calls `put`.

Expiry (Kafka 2.1+ semantics, KIP-211): offsets of a group expire only while the group is Empty (or has no
membership at all, i.e. "simple" commits), when `now - max(commit_timestamp, time the group became
empty) >= offsets.retention.minutes`; an offset committed with an explicit retention time (OffsetCommit
v2-4) expires at its own `expire_timestamp` instead.

Not thread-safe; owned by the event loop.
"""

from __future__ import annotations

from odradek.coordinator.persistence import OffsetValue

TopicPartition = tuple[str, int]


class OffsetStore:
    def __init__(self) -> None:
        self._groups: dict[str, dict[TopicPartition, OffsetValue]] = {}

    def put(self, group_id: str, tp: TopicPartition, value: OffsetValue) -> None:
        self._groups.setdefault(group_id, {})[tp] = value

    def get(self, group_id: str, tp: TopicPartition) -> OffsetValue | None:
        return self._groups.get(group_id, {}).get(tp)

    def delete(self, group_id: str, tp: TopicPartition) -> bool:
        offsets = self._groups.get(group_id)
        if offsets is None or tp not in offsets:
            return False
        del offsets[tp]
        if not offsets:
            del self._groups[group_id]
        return True

    def delete_group(self, group_id: str) -> list[TopicPartition]:
        return list(self._groups.pop(group_id, {}))

    def partitions(self, group_id: str) -> dict[TopicPartition, OffsetValue]:
        return dict(self._groups.get(group_id, {}))

    def has_offsets(self, group_id: str) -> bool:
        return bool(self._groups.get(group_id))

    def group_ids(self) -> list[str]:
        return list(self._groups)

    def expired(self, group_id: str, now_ms: int, retention_ms: int, empty_since_ms: int) -> list[TopicPartition]:
        """Partitions of ``group_id`` whose offsets have expired (call only for Empty / member-less groups)."""
        out = []
        for tp, v in self._groups.get(group_id, {}).items():
            if v.expire_timestamp >= 0:
                if now_ms >= v.expire_timestamp:
                    out.append(tp)
            elif now_ms - max(v.commit_timestamp, empty_since_ms) >= retention_ms:
                out.append(tp)
        return out
