"""OffsetManager: OffsetCommit / OffsetFetch / OffsetDelete / DeleteGroups semantics and offset expiry.

Commit validation follows Kafka's classic coordinator:

* unknown group: generation < 0 is a "simple" commit (the group is created, Empty, without members);
  otherwise ILLEGAL_GENERATION;
* known group: FENCED_INSTANCE_ID for a stale static member; generation < 0 on an Empty group is a simple
  commit; CompletingRebalance answers REBALANCE_IN_PROGRESS; an unknown member UNKNOWN_MEMBER_ID; a wrong
  generation ILLEGAL_GENERATION; otherwise the commit is accepted (also while PreparingRebalance) and
  counts as a heartbeat;
* per partition: UNKNOWN_TOPIC_OR_PARTITION, OFFSET_METADATA_TOO_LARGE (`offset.metadata.max.bytes`).

A group of the consumer protocol (KIP-848) checks the member epoch instead of the generation (Kafka's
rule): epoch < 0 commits while the group has no members; otherwise UNKNOWN_MEMBER_ID, UNSUPPORTED_VERSION
for an OffsetCommit below v9, STALE_MEMBER_EPOCH for any epoch but the member's current one
(`ConsumerGroupCoordinator.check_commit`).

Accepted commits are appended to `__consumer_offsets` before they enter the in-memory store; `commit` also
returns the future of their fsync (on the log flusher) and replication (every in-sync replica of the
partition has them), and OffsetCommit answers when it is done. Deletions (OffsetDelete, DeleteGroups,
expiry) are coroutines that wait for their tombstones the same way before they change the store.

Not thread-safe; owned by the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import Future
from typing import Callable

from odradek.cluster.partition import ReplicationError
from odradek.coordinator.consumer_group import ConsumerGroup
from odradek.coordinator.consumer_groups import ConsumerGroupCoordinator
from odradek.coordinator.group import Group, GroupState
from odradek.coordinator.group_coordinator import GroupCoordinator
from odradek.coordinator.offsets import OffsetStore
from odradek.coordinator.persistence import (
    OffsetValue,
    consumer_group_key,
    streams_group_key,
    encode_offset_value,
    group_key,
    offset_key,
)
from odradek.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

E = GroupState
# (partition, offset, leader_epoch, metadata, commit_timestamp)
CommitPartition = tuple[int, int, int, str | None, int]


def _write_error(exc: BaseException) -> int:
    """What a client is told when a write to `__consumer_offsets` failed: the partition's leadership moved
    (another broker coordinates the group now), or storage failed."""
    return ErrorCode.NOT_COORDINATOR if isinstance(exc, ReplicationError) else ErrorCode.COORDINATOR_NOT_AVAILABLE


class OffsetManager:
    def __init__(self, groups: GroupCoordinator, store: OffsetStore,
                 persist: Callable[[str, list[tuple[bytes, bytes | None]]], Future],
                 partition_exists: Callable[[str, int], bool], metadata_max_bytes: int, retention_ms: int,
                 without_offsets: Callable[[str], bool] = lambda group_id: False) -> None:
        self.groups = groups
        # the id belongs to a group that has no committed offsets (a share group): commits under it answer
        # GROUP_ID_NOT_FOUND, transactional or not, as Kafka 4.4 does
        self._without_offsets = without_offsets
        self.store = store
        self._persist = persist
        self._partition_exists = partition_exists
        self.metadata_max_bytes = metadata_max_bytes
        self.retention_ms = retention_ms

    def _now(self) -> int:
        return self.groups.scheduler.now_ms()

    # ----------------------------------------------------------------------------------------- commit

    def _check_member(self, group_id: str, generation: int, member_id: str, instance: str | None,
                      api_version: int | None = None) -> int:
        if self._without_offsets(group_id):
            return ErrorCode.GROUP_ID_NOT_FOUND
        group = self.groups.groups.get(group_id)
        if group is None or group.is_(E.DEAD):
            return 0 if generation < 0 else ErrorCode.ILLEGAL_GENERATION
        if isinstance(group, ConsumerGroup):  # `generation` is the member epoch
            return ConsumerGroupCoordinator.check_commit(group, member_id, generation, api_version)
        if instance is not None and group.static_members.get(instance, member_id) != member_id:
            return ErrorCode.FENCED_INSTANCE_ID
        if generation < 0 and group.is_(E.EMPTY):
            return 0
        if group.is_(E.COMPLETING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        self.groups.touch_member(group, member)
        return 0

    def check_txn_member(self, group_id: str, generation: int, member_id: str, instance: str | None) -> int:
        """Kafka's rule for transactional offset commits (it is laxer than OffsetCommit's)."""
        if self._without_offsets(group_id):
            return ErrorCode.GROUP_ID_NOT_FOUND
        group = self.groups.groups.get(group_id)
        if group is None:
            return 0
        if group.is_(E.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if isinstance(group, ConsumerGroup):
            return ConsumerGroupCoordinator.check_commit(group, member_id, generation, None, transactional=True)
        if instance is not None and group.static_members.get(instance, member_id) != member_id:
            return ErrorCode.FENCED_INSTANCE_ID
        if member_id and member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation >= 0 and generation != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        return 0

    def check_offset(self, topic: str, partition: int, metadata: str) -> int:
        if not self._partition_exists(topic, partition):
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if len(metadata.encode()) > self.metadata_max_bytes:
            return ErrorCode.OFFSET_METADATA_TOO_LARGE
        return 0

    def commit(self, group_id: str, generation: int, member_id: str, instance: str | None, retention_ms: int,
               topics: list[tuple[str, list[CommitPartition]]], api_version: int | None = None
               ) -> tuple[dict[tuple[str, int], int], Future | None]:
        """An error code per (topic, partition), and the fsync of the accepted offsets (None if none)."""
        keys = [(t, p[0]) for t, parts in topics for p in parts]
        if not group_id:
            return {k: ErrorCode.INVALID_GROUP_ID for k in keys}, None
        error = self._check_member(group_id, generation, member_id, instance, api_version)
        if error:
            return {k: error for k in keys}, None
        now = self._now()
        result: dict[tuple[str, int], int] = {}
        accepted: list[tuple[tuple[str, int], OffsetValue]] = []
        for topic, parts in topics:
            for partition, offset, epoch, metadata, commit_ts in parts:
                tp = (topic, partition)
                metadata = metadata or ""
                result[tp] = self.check_offset(topic, partition, metadata)
                if not result[tp]:
                    ts = commit_ts if commit_ts >= 0 else now
                    expire = ts + retention_ms if retention_ms >= 0 else -1
                    accepted.append((tp, OffsetValue(offset, epoch, metadata, ts, expire)))
        if not accepted:
            return result, None
        records = [(offset_key(group_id, t, p), encode_offset_value(v)) for (t, p), v in accepted]
        try:
            durable = self._persist(group_id, records)
        except Exception:
            log.exception("cannot persist offsets of group %s", group_id)
            for tp, _ in accepted:
                result[tp] = ErrorCode.COORDINATOR_NOT_AVAILABLE
            return result, None
        self.groups.get_or_create(group_id)
        for tp, v in accepted:
            self.store.put(group_id, tp, v)
        return result, durable

    # ----------------------------------------------------------------------------------------- fetch

    def fetch(self, group_id: str, topics: list[tuple[str, list[int]]] | None
              ) -> list[tuple[str, list[tuple[int, OffsetValue | None]]]]:
        """Committed offsets of the named partitions (None for "none committed"), or of all when None."""
        if topics is None:
            by_topic: dict[str, list[tuple[int, OffsetValue | None]]] = {}
            for (t, p), v in sorted(self.store.partitions(group_id).items()):
                by_topic.setdefault(t, []).append((p, v))
            return list(by_topic.items())
        return [(t, [(p, self.store.get(group_id, (t, p))) for p in parts]) for t, parts in topics]

    # ----------------------------------------------------------------------------------------- deletes

    async def _write(self, group_id: str, records: list[tuple[bytes, bytes | None]]) -> None:
        await asyncio.wrap_future(self._persist(group_id, records))

    async def delete_offsets(self, group_id: str, topics: list[tuple[str, list[int]]]) -> tuple[int, dict[tuple[str, int], int]]:
        group = self.groups.groups.get(group_id)
        if group is None or group.is_(E.DEAD):
            return ErrorCode.GROUP_ID_NOT_FOUND, {}
        subscribed: set[str] = set()
        if not group.is_(E.EMPTY):
            topics_in_use = group.subscribed_topics()
            if topics_in_use is None:
                return ErrorCode.NON_EMPTY_GROUP, {}
            subscribed = topics_in_use
        result: dict[tuple[str, int], int] = {}
        doomed = []
        for topic, parts in topics:
            for p in parts:
                if topic in subscribed:
                    result[(topic, p)] = ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
                elif not self._partition_exists(topic, p):
                    result[(topic, p)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                else:
                    result[(topic, p)] = 0
                    if self.store.get(group_id, (topic, p)) is not None:
                        doomed.append((topic, p))
        if doomed:
            try:
                await self._write(group_id, [(offset_key(group_id, t, p), None) for t, p in doomed])
            except Exception as exc:
                log.error("group %s: cannot write offset tombstones: %s", group_id, exc)
                return _write_error(exc), {}
            for tp in doomed:
                self.store.delete(group_id, tp)
        return 0, result

    async def delete_groups(self, names: list[str]) -> list[tuple[str, int]]:
        out = []
        for name in names:
            group = self.groups.groups.get(name)
            if not name:
                out.append((name, ErrorCode.INVALID_GROUP_ID))
            elif group is None or group.is_(E.DEAD):
                out.append((name, ErrorCode.GROUP_ID_NOT_FOUND))
            elif not group.is_(E.EMPTY) or group.members:
                out.append((name, ErrorCode.NON_EMPTY_GROUP))
            else:
                try:
                    await self._drop_group(group)
                except Exception as exc:
                    log.error("group %s: cannot write its tombstones: %s", name, exc)
                    out.append((name, _write_error(exc)))
                    continue
                out.append((name, 0))
        return out

    async def _drop_group(self, group: Group) -> None:
        gid = group.group_id
        tombstones: list[tuple[bytes, bytes | None]] = [
            (offset_key(gid, t, p), None) for t, p in self.store.partitions(gid)]
        if isinstance(group, ConsumerGroup):
            key = streams_group_key(gid) if group.protocol_type == "streams" else consumer_group_key(gid)
        else:
            key = group_key(gid)
        tombstones.append((key, None))
        await self._write(gid, tombstones)
        self.store.delete_group(gid)
        group.transition(E.DEAD, self._now())
        if self.groups.groups.get(gid) is group:
            del self.groups.groups[gid]

    # ----------------------------------------------------------------------------------------- expiry

    async def expire(self) -> int:
        """Drop expired offsets of Empty groups, then Empty groups with no offsets left; returns #offsets."""
        now = self._now()
        removed = 0
        for gid, group in list(self.groups.groups.items()):
            if not group.is_(E.EMPTY) or group.members:
                continue
            expired = self.store.expired(gid, now, self.retention_ms, group.state_timestamp_ms)
            if expired:
                await self._write(gid, [(offset_key(gid, t, p), None) for t, p in expired])
                for tp in expired:
                    self.store.delete(gid, tp)
                removed += len(expired)
                log.info("group %s: %d committed offsets expired", gid, len(expired))
            if not self.store.has_offsets(gid) and not group.pending_members:
                await self._drop_group(group)
        return removed
