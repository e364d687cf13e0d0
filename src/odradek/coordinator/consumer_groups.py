"""ConsumerGroupCoordinator: the consumer group protocol of KIP-848 (ConsumerGroupHeartbeat), its timers.

Groups of this protocol live in the same name space as classic groups (`GroupCoordinator.groups`), so
listing, deletion, offset expiry and coordinator moves treat both alike; a name belongs to one protocol at a
time. An *empty* classic group (one that only holds committed offsets) becomes a consumer group when a
member of the new protocol joins it, and an empty consumer group a classic one when a JoinGroup arrives;
the offsets stay. A live classic group is converted online, as Kafka 4.x does (KIP-848's upgrade path), and
a consumer group whose last consumer-protocol member leaves while classic members remain goes back to the
classic protocol: classic_members.py, which also answers the classic members' JoinGroup, SyncGroup,
Heartbeat and LeaveGroup meanwhile. A live classic group that does not use the consumer embedded protocol
is refused (GROUP_ID_NOT_FOUND).

One heartbeat (`heartbeat`), in Kafka's order:

1. check the request (INVALID_REQUEST with Kafka's messages, UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION);
2. member epoch -1: the member leaves (its partitions are free at once); -2: a static member leaves for now
   (it keeps its assignment until its session times out, and its instance id may take it back);
3. find or create the member: epoch 0 joins (v1: with the id the client generated; v0: the coordinator
   makes one), a static member's instance id takes over a member that left with -2 (UNRELEASED_INSTANCE_ID
   while that one is still there); epoch > 0 must be the member's epoch, or its previous one when the
   heartbeat owns no partition the member may not have (the answer that moved it on was lost); otherwise
   FENCED_MEMBER_EPOCH, and UNKNOWN_MEMBER_ID for a member the group does not know;
4. a changed subscription, a new member, or a change of the subscribed topics (created, more partitions,
   a regex matching new names) bumps the group epoch;
5. group epoch > assignment epoch: the target assignment is computed by the assignor (the one most members
   ask for in `server_assignor`, else the first of `group.consumer.assignors`);
6. the member takes its next reconciliation step (`ConsumerGroup.reconcile`);
7. the answer: member id and epoch, `group.consumer.heartbeat.interval.ms`, and the assignment when the
   member joined, sent a full request, or its assignment changed.

Timers: a member that sends no heartbeat within `group.consumer.session.timeout.ms` (or the group's
`consumer.session.timeout.ms` config; likewise `consumer.heartbeat.interval.ms`) is removed; one that
does not revoke within its rebalance timeout is removed too (fenced), so its partitions move on.

Persistence: whenever a heartbeat, leave or timeout changes a group, its whole state (epochs, members,
subscriptions, assignments, targets) is appended to `__consumer_offsets` as one record (persistence.py,
ConsumerGroupValue), and the coordinator that loads the partition (failover, restart) restores the group
with its members' epochs, so they carry on without rejoining. The answer does not wait for that write: a
crash just after it can lose the latest step, in which case members ahead of the restored state are fenced
(FENCED_MEMBER_EPOCH) and rejoin, never two owners of a partition.

Not thread-safe; owned by the event loop.
"""

from __future__ import annotations

import logging
import re
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from odradek.coordinator.assignors import ASSIGNORS, AssignorMember, TopicId
from odradek.coordinator.classic_members import ClassicMembers
from odradek.coordinator.consumer_group import (
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    flatten,
    grouped,
)
from odradek.coordinator.group import Group
from odradek.coordinator.streams_group import StreamsGroup
from odradek.coordinator.persistence import consumer_group_key, encode_consumer_group_value, group_key
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.cluster.metadata import MetadataCache
    from odradek.coordinator.group_coordinator import GroupCoordinator

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ConsumerGroupConfig:
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    assignors: tuple[str, ...] = ("uniform", "range")
    max_size: int = 0x7FFFFFFF


class HeartbeatError(Exception):
    def __init__(self, error_code: int, message: str | None = None) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


@dataclass
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_names: list[str] | None = None
    subscribed_regex: str | None = None
    server_assignor: str | None = None
    owned: list[tuple[TopicId, list[int]]] | None = None
    client_id: str = ""
    client_host: str = ""
    version: int = 1


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise HeartbeatError(ErrorCode.INVALID_REQUEST, message)


class ConsumerGroupCoordinator:
    def __init__(self, config: ConsumerGroupConfig, groups: "GroupCoordinator", metadata: "MetadataCache | None") -> None:
        self.config = config
        self.classic = groups
        self.metadata = metadata
        self._regex_cache: dict[str, re.Pattern] = {}
        # a group's own configs (IncrementalAlterConfigs on GROUP resources, kept by the share group
        # coordinator): (group, name) -> value, "" when the group has none
        self.group_config: Callable[[str, str], str] = lambda group_id, name: ""
        self.classic_members = ClassicMembers(self)
        groups.classic_members = self.classic_members

    def _group_ms(self, group_id: str, name: str, default: int) -> int:
        value = self.group_config(group_id, name)
        return int(value) if value else default

    @property
    def groups(self) -> dict:
        return self.classic.groups  # one name space for both protocols

    def _now(self) -> int:
        return self.classic.scheduler.now_ms()

    # ----------------------------------------------------------------------------------------- checks

    def _pattern(self, regex: str) -> re.Pattern:
        pattern = self._regex_cache.get(regex)
        if pattern is None:
            try:
                pattern = re.compile(regex)
            except re.error as exc:
                raise HeartbeatError(ErrorCode.INVALID_REGULAR_EXPRESSION,
                                     f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {exc}.") from None
            if len(self._regex_cache) > 1000:
                self._regex_cache.clear()
            self._regex_cache[regex] = pattern
        return pattern

    def _validate(self, req: HeartbeatRequest) -> None:
        _require(bool(req.group_id), "GroupId can't be empty.")
        _require(req.instance_id is None or bool(req.instance_id), "InstanceId can't be empty.")
        _require(req.rack_id is None or bool(req.rack_id), "RackId can't be empty.")
        if req.version >= 1 or req.member_epoch != 0:
            _require(bool(req.member_id), "MemberId can't be empty.")
        if req.member_epoch == 0:
            _require(req.rebalance_timeout_ms != -1, "RebalanceTimeoutMs must be provided in first request.")
            _require(req.owned is not None and not req.owned, "TopicPartitions must be empty when (re-)joining.")
            _require(req.subscribed_names is not None or req.subscribed_regex is not None,
                     "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
        elif req.member_epoch == STATIC_LEAVE_EPOCH:
            _require(req.instance_id is not None, "InstanceId can't be null.")
        elif req.member_epoch < STATIC_LEAVE_EPOCH:
            _require(False, "MemberEpoch is invalid.")
        if req.server_assignor is not None and req.server_assignor not in self.config.assignors:
            raise HeartbeatError(ErrorCode.UNSUPPORTED_ASSIGNOR,
                                 f"ServerAssignor {req.server_assignor} is not supported. Supported assignors: "
                                 f"{', '.join(self.config.assignors)}.")
        if req.subscribed_regex:
            self._pattern(req.subscribed_regex)

    # ----------------------------------------------------------------------------------------- heartbeat

    def heartbeat(self, req: HeartbeatRequest) -> dict:
        """Answer one ConsumerGroupHeartbeat (the response body without throttle time)."""
        try:
            self._validate(req)
            if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                body = self._leave(req)
            else:
                body = self._heartbeat(req)
            group = self.groups.get(req.group_id)
            if isinstance(group, ConsumerGroup) and not isinstance(group, StreamsGroup):
                self._store(group)
            return body
        except HeartbeatError as exc:
            return {"error_code": exc.error_code, "error_message": exc.message, "member_id": None,
                    "member_epoch": 0, "heartbeat_interval_ms": 0, "assignment": None}

    def _group_for(self, req: HeartbeatRequest) -> ConsumerGroup:
        group = self.groups.get(req.group_id)
        if isinstance(group, StreamsGroup) and (group.members or req.member_epoch != 0):
            raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a consumer group.")
        if isinstance(group, ConsumerGroup) and not isinstance(group, StreamsGroup) and not group.deleted:
            return group
        if isinstance(group, Group) and not group.is_empty:
            upgraded = self.classic_members.upgrade(group) if req.member_epoch == 0 else None
            if upgraded is None:
                raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a consumer group.")
            return upgraded
        if req.member_epoch != 0:
            # Kafka answers GROUP_ID_NOT_FOUND; a member of a group whose last state a crash lost (the write is
            # not awaited) is better told to rejoin
            raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID,
                                 f"Member {req.member_id} is not a member of group {req.group_id}.")
        converted = ConsumerGroup(req.group_id, state_timestamp_ms=self._now(),
                                  replaces_classic=isinstance(group, Group))
        if isinstance(group, StreamsGroup):  # an empty streams group: its record goes
            self.classic.drop_group_record(group)
        if isinstance(group, Group):
            self.classic.discard_empty(group)
            log.info("group %s: empty classic group becomes a consumer group", req.group_id)
        self.groups[req.group_id] = converted
        return converted

    def _member_for(self, group: ConsumerGroup, req: HeartbeatRequest) -> tuple[ConsumerMember, bool]:
        """The member this heartbeat is from (created or taken over on a join); and whether it is new."""
        if req.member_epoch == 0:
            if req.instance_id is not None:
                previous_id = group.static_members.get(req.instance_id)
                if previous_id is not None and previous_id != req.member_id:
                    previous = group.members[previous_id]
                    if previous.member_epoch != STATIC_LEAVE_EPOCH:
                        raise HeartbeatError(
                            ErrorCode.UNRELEASED_INSTANCE_ID,
                            f"Static member {req.member_id or '<new>'} with instance id {req.instance_id} cannot "
                            f"join the group because the instance id is owned by {previous_id} member.")
                    return self._take_over(group, previous, req), False
            member = group.members.get(req.member_id) if req.member_id else None
            if member is not None:  # a known member rejoins (a lost answer): it gets its assignment again
                return member, False
            if len(group.members) >= self.config.max_size:
                raise HeartbeatError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                                     f"The consumer group has reached its maximum capacity of "
                                     f"{self.config.max_size} members.")
            member = ConsumerMember(req.member_id or str(uuid.uuid4()), instance_id=req.instance_id)
            group.add(member)
            return member, True
        member = group.members.get(req.member_id)
        if member is None:
            raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID,
                                 f"Member {req.member_id} is not a member of group {req.group_id}.")
        if req.instance_id is not None and group.static_members.get(req.instance_id) != member.member_id:
            raise HeartbeatError(ErrorCode.FENCED_INSTANCE_ID,
                                 f"Static member {req.member_id} with instance id {req.instance_id} was replaced.")
        if req.member_epoch > member.member_epoch:
            raise HeartbeatError(ErrorCode.FENCED_MEMBER_EPOCH,
                                 f"The consumer group member has a greater member epoch ({req.member_epoch}) than "
                                 f"the one known by the group coordinator ({member.member_epoch}). The member must "
                                 f"abandon all its partitions and rejoin.")
        if req.member_epoch < member.member_epoch:
            owned = self._owned(req)
            if req.member_epoch != member.previous_member_epoch or owned is None or not owned <= member.assigned:
                raise HeartbeatError(ErrorCode.FENCED_MEMBER_EPOCH,
                                     f"The consumer group member has a smaller member epoch ({req.member_epoch}) "
                                     f"than the one known by the group coordinator ({member.member_epoch}). The "
                                     f"member must abandon all its partitions and rejoin.")
        return member, False

    def _take_over(self, group: ConsumerGroup, previous: ConsumerMember, req: HeartbeatRequest) -> ConsumerMember:
        """A static member is back under a new member id: it gets the old one's assignment and epoch."""
        self._cancel_timers(previous)
        group.members.pop(previous.member_id, None)
        target = group.target.pop(previous.member_id, None)
        previous.member_id = req.member_id or str(uuid.uuid4())
        previous.member_epoch = previous.previous_member_epoch if previous.previous_member_epoch >= 0 else 0
        group.add(previous)
        if target is not None:
            group.target[previous.member_id] = target
        log.info("group %s: static member %s is back as %s", group.group_id, req.instance_id, previous.member_id)
        return previous

    @staticmethod
    def _owned(req: HeartbeatRequest) -> set[tuple[TopicId, int]] | None:
        if req.owned is None:
            return None
        return {(t, p) for t, ps in req.owned for p in ps}

    def _heartbeat(self, req: HeartbeatRequest) -> dict:
        group = self._group_for(req)
        member, new = self._member_for(group, req)
        before = set(member.assigned)
        changed = new
        member.client_id, member.client_host = req.client_id, req.client_host
        if req.rack_id is not None:
            member.rack_id = req.rack_id
        if req.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
        if req.subscribed_names is not None and tuple(sorted(req.subscribed_names)) != member.subscribed_names:
            member.subscribed_names = tuple(sorted(req.subscribed_names))
            changed = True
        if req.version >= 1 and req.subscribed_regex is not None:
            regex = req.subscribed_regex or None
            if regex != member.subscribed_regex:
                member.subscribed_regex = regex
                changed = True
        if req.server_assignor is not None and req.server_assignor != member.server_assignor:
            member.server_assignor = req.server_assignor
            changed = True
        if changed:
            group.group_epoch += 1
        self._refresh_topics(group)
        if group.group_epoch > group.assignment_epoch:
            self._assign(group)
        was_unrevoked = member.state is MemberState.UNREVOKED_PARTITIONS
        group.reconcile(member, self._owned(req))
        if member.state is MemberState.UNREVOKED_PARTITIONS and not was_unrevoked:
            self._arm_rebalance_timeout(group, member)
        elif member.state is not MemberState.UNREVOKED_PARTITIONS and member.rebalance_timer is not None:
            member.rebalance_timer.cancel()  # type: ignore[attr-defined]
            member.rebalance_timer = None
        self._touch(group, member)
        full = (req.rebalance_timeout_ms != -1 and req.owned is not None
                and (req.subscribed_names is not None or req.subscribed_regex is not None))
        body = {"error_code": 0, "error_message": None, "member_id": member.member_id,
                "member_epoch": member.member_epoch, "heartbeat_interval_ms": self._group_ms(
                    group.group_id, "consumer.heartbeat.interval.ms", self.config.heartbeat_interval_ms),
                "assignment": None}
        if req.member_epoch == 0 or full or member.assigned != before:
            body["assignment"] = {"topic_partitions": [
                {"topic_id": t, "partitions": sorted(ps)} for t, ps in sorted(grouped(member.assigned).items())]}
        return body

    def _leave(self, req: HeartbeatRequest) -> dict:
        group = self.groups.get(req.group_id)
        if not isinstance(group, ConsumerGroup) or group.deleted:
            raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID,
                                 f"Member {req.member_id} is not a member of group {req.group_id}.")
        member = group.members.get(req.member_id)
        if req.instance_id is not None:
            known = group.static_members.get(req.instance_id)
            if known is None:
                raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID,
                                     f"Instance id {req.instance_id} is unknown.")
            if known != req.member_id:
                raise HeartbeatError(ErrorCode.FENCED_INSTANCE_ID,
                                     f"Static member {req.member_id} with instance id {req.instance_id} was replaced.")
        if member is None:
            raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID,
                                 f"Member {req.member_id} is not a member of group {req.group_id}.")
        if req.member_epoch == STATIC_LEAVE_EPOCH:
            # it keeps its assignment for its instance id, until its session times out
            if member.member_epoch >= 0:
                member.previous_member_epoch = member.member_epoch
            member.member_epoch = STATIC_LEAVE_EPOCH
            log.info("group %s: static member %s left for now", group.group_id, member.member_id)
        else:
            log.info("group %s: member %s left", group.group_id, member.member_id)
            self._remove(group, member)
        return {"error_code": 0, "error_message": None, "member_id": req.member_id, "member_epoch": req.member_epoch,
                "heartbeat_interval_ms": 0, "assignment": None}

    # ----------------------------------------------------------------------------------------- assignment

    def _topic_index(self) -> dict[str, tuple[TopicId, int]]:
        if self.metadata is None:
            return {}
        return {t.name: (t.topic_id, t.partitions) for t in self.metadata.all_topics() if not t.is_internal}

    def _refresh_topics(self, group: ConsumerGroup) -> None:
        """Bump the group epoch when a subscribed topic appeared, went or changed its partition count."""
        names: set[str] = set()
        regexes = set()
        for m in group.members.values():
            names.update(m.subscribed_names)
            if m.subscribed_regex:
                regexes.add(m.subscribed_regex)
        version = getattr(self.metadata, "version", None)
        key = (version, frozenset(names), frozenset(regexes))
        if version is not None and key == group.topics_key:
            return  # neither the topics nor the subscriptions changed since the last look
        group.topics_key = key
        # a subscribed name that is no topic yet counts too (None), as in Kafka: its creation bumps the epoch
        metadata: dict[str, tuple[TopicId, int] | None] = dict.fromkeys(names)
        if regexes:
            index = self._topic_index()
            patterns = [self._pattern(r) for r in regexes]
            for name, info in index.items():
                if name in metadata or any(p.fullmatch(name) for p in patterns):
                    metadata[name] = info
        elif self.metadata is not None:
            for name in names:
                topic = self.metadata.topic(name)
                if topic is not None:
                    metadata[name] = (topic.topic_id, topic.partitions)
        if metadata != group.subscription_metadata:
            group.subscription_metadata = metadata
            group.group_epoch += 1

    def _subscribed_ids(self, group: ConsumerGroup, member: ConsumerMember) -> frozenset[TopicId]:
        pattern = self._pattern(member.subscribed_regex) if member.subscribed_regex else None
        return frozenset(info[0] for name, info in group.subscription_metadata.items() if info is not None and (
            name in member.subscribed_names or (pattern is not None and pattern.fullmatch(name))))

    def assignor_for(self, group: ConsumerGroup) -> str:
        asked = Counter(m.server_assignor for m in group.members.values() if m.server_assignor)
        if asked:
            return max(sorted(asked), key=lambda name: asked[name])
        return self.config.assignors[0]

    def _assign(self, group: ConsumerGroup) -> None:
        topics = {info[0]: info[1] for info in group.subscription_metadata.values() if info is not None}
        specs = {mid: AssignorMember(self._subscribed_ids(group, m), grouped(group.target.get(mid, set())))
                 for mid, m in group.members.items()}
        name = self.assignor_for(group)
        result = ASSIGNORS[name](specs, topics)
        group.target = {mid: flatten(result.get(mid, {})) for mid in group.members}
        group.assignment_epoch = group.group_epoch
        log.info("group %s: target assignment of epoch %d by %s for %d members", group.group_id,
                 group.assignment_epoch, name, len(group.members))

    # ----------------------------------------------------------------------------------------- members

    def _release(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        member.assigned = set()
        member.pending_revocation = set()
        member.state = MemberState.STABLE
        if member.rebalance_timer is not None:
            member.rebalance_timer.cancel()  # type: ignore[attr-defined]
            member.rebalance_timer = None

    def _cancel_timers(self, member: ConsumerMember) -> None:
        for name in ("session_timer", "rebalance_timer"):
            timer = getattr(member, name)
            if timer is not None:
                timer.cancel()
                setattr(member, name, None)

    def _remove(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        self._cancel_timers(member)
        group.remove(member.member_id)
        group.group_epoch += 1
        if not group.members:  # nothing left to assign: the (empty) target is current, as in Kafka
            group.assignment_epoch = group.group_epoch
            group.state_timestamp_ms = self._now()
        elif member.classic is None:  # the last consumer-protocol member gone: maybe classic again
            self.classic_members.maybe_downgrade(group)

    def _touch(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()  # type: ignore[attr-defined]
        timeout_ms = member.classic.session_timeout_ms if member.classic is not None else \
            self._group_ms(group.group_id, "consumer.session.timeout.ms", self.config.session_timeout_ms)
        member.session_timer = self.classic.scheduler.call_later(
            timeout_ms, lambda: self._expire(group, member, "session timeout"))

    def _arm_rebalance_timeout(self, group: ConsumerGroup, member: ConsumerMember) -> None:
        if member.rebalance_timer is not None:
            member.rebalance_timer.cancel()  # type: ignore[attr-defined]
        epoch = member.member_epoch
        member.rebalance_timer = self.classic.scheduler.call_later(
            member.rebalance_timeout_ms,
            lambda: self._expire(group, member, "rebalance timeout") if (
                member.state is MemberState.UNREVOKED_PARTITIONS and member.member_epoch == epoch) else None)

    def _expire(self, group: ConsumerGroup, member: ConsumerMember, why: str) -> None:
        if group.members.get(member.member_id) is not member or self.groups.get(group.group_id) is not group:
            return
        log.info("group %s: member %s removed (%s)", group.group_id, member.member_id, why)
        self._remove(group, member)
        self._store(group)

    # ----------------------------------------------------------------------------------------- persistence

    def _store(self, group: ConsumerGroup) -> None:
        """Append the group's state to `__consumer_offsets` if it changed since the last write."""
        if self.groups.get(group.group_id) is not group:
            return  # converted back to a classic group meanwhile (classic_members.py)
        value = encode_consumer_group_value(group)
        if value == group.stored:
            return
        records: list[tuple[bytes, bytes | None]] = [(consumer_group_key(group.group_id), value)]
        if group.replaces_classic:
            records.insert(0, (group_key(group.group_id), None))
        try:
            self.classic._persist(group.group_id, records)
        except Exception as exc:  # the partition moved or storage failed: the next change writes it all again
            log.warning("group %s: cannot store its state: %s", group.group_id, exc)
            return
        group.stored = value
        group.replaces_classic = False

    def restore(self, group: ConsumerGroup) -> None:
        """A group read back from `__consumer_offsets` (coordinator load): its members' timers start now."""
        group.stored = encode_consumer_group_value(group)
        self.groups[group.group_id] = group
        for member in group.members.values():
            if member.instance_id is not None:
                group.static_members[member.instance_id] = member.member_id
            self._touch(group, member)
            if member.state is MemberState.UNREVOKED_PARTITIONS:
                self._arm_rebalance_timeout(group, member)

    # ----------------------------------------------------------------------------------------- offsets

    @staticmethod
    def check_commit(group: ConsumerGroup, member_id: str, member_epoch: int, api_version: int | None,
                     transactional: bool = False) -> int:
        """Kafka's check of an offset commit against a consumer group (OffsetCommit v9+, TxnOffsetCommit)."""
        if member_epoch < 0 and not group.members:
            return 0
        if transactional and member_epoch < 0 and not member_id:
            return 0
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if member.classic is not None:  # a classic member commits with its epoch as its generation
            return ErrorCode.ILLEGAL_GENERATION if member_epoch != member.member_epoch else 0
        if not transactional and api_version is not None and api_version < 9:
            return ErrorCode.UNSUPPORTED_VERSION
        if member_epoch != member.member_epoch:
            return ErrorCode.STALE_MEMBER_EPOCH
        return 0

    def stop(self, group: ConsumerGroup) -> None:
        for member in group.members.values():
            self._cancel_timers(member)
