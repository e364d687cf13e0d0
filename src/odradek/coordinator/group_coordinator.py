"""GroupCoordinator: classic group membership (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) and its timers.

JoinGroup and SyncGroup are long polls: `join` and `sync` return an asyncio Future that the handler awaits;
it completes when the rebalance round completes (join) or the leader hands in the assignment (sync), and
every pending future is completed when its member is removed, so no handler waits forever.

Rebalance rules (Kafka's classic protocol):

* v4+ joins without a member id get a generated id and MEMBER_ID_REQUIRED; the id is "pending" until the
  member rejoins with it (or its session timeout passes). Static members (group.instance.id) skip that.
* A round completes when every known member has rejoined and no pending member is outstanding, or when the
  largest rebalance timeout passes (members that did not rejoin are then removed).
* Initial delay: when a group leaves Empty, the round waits up to `group.initial.rebalance.delay.ms` for
  more members, but ends as soon as no new member has joined for `group.initial.rebalance.quiet.ms`
  (odradek's addition, default 250 ms), so a lone consumer gets its assignment well within a second while
  members that start together still land in one generation.
* Static membership: a known group.instance.id joining with an empty member id takes over the old member
  (new member id, the old id is fenced with FENCED_INSTANCE_ID); in a Stable group with unchanged protocol
  metadata this causes no rebalance, and the member gets its previous assignment back from SyncGroup.
* After a round completes, members that do not send SyncGroup within the rebalance timeout (a leader
  that never hands in the assignment included) are removed, and the group rebalances again.
* Session timeouts: each member's deadline moves on every join, sync, heartbeat and offset commit; a member
  with a pending join or sync is kept alive. Expiry removes the member and starts a rebalance.

Group metadata is written to `__consumer_offsets` when the leader hands in the assignment and when a group
becomes Empty; offsets are handled by `OffsetManager` (offset_manager.py). The fsync runs on the log
flusher, not on the loop: the group stays CompletingRebalance until the assignment is on disk, and only
then becomes Stable and answers the SyncGroups, so no member acts on an assignment a crash could forget. If
the write fails, the pending SyncGroups get COORDINATOR_NOT_AVAILABLE and the group rebalances (as Kafka's
coordinator does when it cannot store a group).

Not thread-safe; owned by the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Callable

from odradek.coordinator.consumer_group import ConsumerGroup
from odradek.coordinator.group import Group, GroupState, Member
from odradek.coordinator.persistence import (
    GroupValue,
    MemberValue,
    consumer_group_key,
    streams_group_key,
    encode_group_value,
    group_key,
)
from odradek.coordinator.timers import Scheduler
from odradek.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

E = GroupState


@dataclass(frozen=True)
class GroupConfig:
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1_800_000
    initial_rebalance_delay_ms: int = 3000
    initial_rebalance_quiet_ms: int = 250
    max_size: int = 0x7FFFFFFF


@dataclass
class JoinRequest:
    group_id: str
    member_id: str
    group_instance_id: str | None
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    client_id: str = ""
    client_host: str = ""
    require_known_member: bool = True  # JoinGroup v4+


def _done(loop: asyncio.AbstractEventLoop, value: dict) -> asyncio.Future:
    fut = loop.create_future()
    fut.set_result(value)
    return fut


def _resolve(fut: asyncio.Future | None, value: dict) -> None:
    if fut is not None and not fut.done():
        fut.set_result(value)


def join_error(error: int, member_id: str = "") -> dict:
    return {"error_code": error, "generation_id": -1, "protocol_type": None, "protocol_name": None,
            "leader": "", "member_id": member_id, "members": [], "skip_assignment": False}


def sync_result(error: int, group: Group | None = None, assignment: bytes = b"") -> dict:
    return {"error_code": error, "protocol_type": group.protocol_type if group else None,
            "protocol_name": group.protocol_name if group else None, "assignment": assignment}


def takes_classic_members(group: object) -> bool:
    """Whether classic requests (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) for ``group`` go to its classic
    members (classic_members.py): a live consumer group's, never a streams group's (Kafka Streams' members
    speak only StreamsGroupHeartbeat)."""
    return isinstance(group, ConsumerGroup) and not group.deleted and group.protocol_type != "streams"


class GroupCoordinator:
    def __init__(self, config: GroupConfig, scheduler: Scheduler,
                 persist: Callable[[str, list[tuple[bytes, bytes | None]]], Future]) -> None:
        """`persist(group_id, records)` appends to `__consumer_offsets` and returns the flusher future of
        their fsync (OffsetsTopicLog.append)."""
        self.config = config
        self.scheduler = scheduler
        self._persist = persist
        # both protocols' groups: classic `Group`s and KIP-848 `ConsumerGroup`s (consumer_groups.py)
        self.groups: dict[str, Group | ConsumerGroup] = {}
        # classic members of consumer groups (classic_members.ClassicMembers), set by ConsumerGroupCoordinator
        self.classic_members = None  # type: ignore[var-annotated]

    # ----------------------------------------------------------------------------------------- helpers

    def _now(self) -> int:
        return self.scheduler.now_ms()

    def get_or_create(self, group_id: str) -> Group | ConsumerGroup:
        group = self.groups.get(group_id)
        if group is None:
            group = Group(group_id, state_timestamp_ms=self._now())
            self.groups[group_id] = group
        return group

    def _touch(self, group: Group, member: Member) -> None:
        """Heartbeat: push the member's session deadline out, (re)arming its timer if needed."""
        member.session_deadline_ms = self._now() + member.session_timeout_ms
        if member.session_timer is None:
            self._arm_session(group, member, member.session_timeout_ms)

    def _arm_session(self, group: Group, member: Member, delay_ms: int) -> None:
        member.session_timer = self.scheduler.call_later(delay_ms, lambda: self._on_session_timer(group, member))

    def _on_session_timer(self, group: Group, member: Member) -> None:
        member.session_timer = None
        if group.members.get(member.member_id) is not member:
            return
        now = self._now()
        if member.awaiting_join or (member.sync_future is not None and not member.sync_future.done()):
            member.session_deadline_ms = now + member.session_timeout_ms
        if now < member.session_deadline_ms:
            self._arm_session(group, member, member.session_deadline_ms - now)
            return
        log.info("group %s: member %s session expired", group.group_id, member.member_id)
        self._remove_member(group, member, ErrorCode.UNKNOWN_MEMBER_ID)
        self._membership_changed(group, "session timeout")

    def _remove_member(self, group: Group, member: Member, error: int) -> None:
        group.remove(member.member_id)
        if member.session_timer is not None:
            member.session_timer.cancel()  # type: ignore[attr-defined]
            member.session_timer = None
        _resolve(member.join_future, join_error(error, member.member_id))
        _resolve(member.sync_future, sync_result(error, group))
        member.join_future = member.sync_future = None

    def _membership_changed(self, group: Group, reason: str) -> None:
        if group.is_(E.STABLE, E.COMPLETING_REBALANCE):
            self._prepare_rebalance(group, reason)
        elif group.is_(E.PREPARING_REBALANCE):
            self._try_complete_join(group)

    def _new_member_id(self, prefix: str) -> str:
        return f"{prefix or 'member'}-{uuid.uuid4()}"

    # ----------------------------------------------------------------------------------------- rebalance

    def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_(E.COMPLETING_REBALANCE):
            for m in group.members.values():
                _resolve(m.sync_future, sync_result(ErrorCode.REBALANCE_IN_PROGRESS, group))
                m.sync_future = None
        from_empty = group.is_(E.EMPTY)
        now = self._now()
        group.transition(E.PREPARING_REBALANCE, now)
        log.info("group %s: preparing rebalance (generation %d): %s", group.group_id, group.generation, reason)
        rebalance_timeout = max((m.rebalance_timeout_ms for m in group.members.values()), default=0)
        delay = min(self.config.initial_rebalance_delay_ms, rebalance_timeout)
        if from_empty and delay > 0:
            group.initial_delay_until_ms = now + delay
            group.last_join_ms = now
            self._arm_rebalance(group, min(delay, self.config.initial_rebalance_quiet_ms), self._on_initial_delay)
        else:
            group.initial_delay_until_ms = 0
            group.rebalance_deadline_ms = now + rebalance_timeout
            self._arm_rebalance(group, rebalance_timeout, self._on_rebalance_timeout)
            self._try_complete_join(group)

    def _arm_rebalance(self, group: Group, delay_ms: int, fn: Callable[[Group], None]) -> None:
        if group.rebalance_timer is not None:
            group.rebalance_timer.cancel()  # type: ignore[attr-defined]
        group.rebalance_timer = self.scheduler.call_later(delay_ms, lambda: fn(group))

    def _on_initial_delay(self, group: Group) -> None:
        group.rebalance_timer = None
        if not group.is_(E.PREPARING_REBALANCE) or group.initial_delay_until_ms == 0:
            return
        now = self._now()
        due = min(group.initial_delay_until_ms, group.last_join_ms + self.config.initial_rebalance_quiet_ms)
        if now < due:
            self._arm_rebalance(group, due - now, self._on_initial_delay)
            return
        group.initial_delay_until_ms = 0
        rebalance_timeout = max((m.rebalance_timeout_ms for m in group.members.values()), default=0)
        group.rebalance_deadline_ms = now + rebalance_timeout
        if group.all_members_joined() or not group.members:
            self._complete_join(group)
        else:
            self._arm_rebalance(group, rebalance_timeout, self._on_rebalance_timeout)

    def _on_rebalance_timeout(self, group: Group) -> None:
        group.rebalance_timer = None
        if group.is_(E.PREPARING_REBALANCE):
            self._complete_join(group)

    def _try_complete_join(self, group: Group) -> None:
        if not group.is_(E.PREPARING_REBALANCE) or group.initial_delay_until_ms:
            return
        if not group.members or group.all_members_joined():
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        if group.rebalance_timer is not None:
            group.rebalance_timer.cancel()  # type: ignore[attr-defined]
            group.rebalance_timer = None
        group.initial_delay_until_ms = 0
        for member in [m for m in group.members.values() if not m.awaiting_join]:
            log.info("group %s: member %s did not rejoin in time", group.group_id, member.member_id)
            self._remove_member(group, member, ErrorCode.UNKNOWN_MEMBER_ID)
        group.pending_members.clear()
        now = self._now()
        group.generation += 1
        if not group.members:
            group.protocol_name = None
            group.leader_id = None
            group.transition(E.EMPTY, now)
            self._store_group(group, lambda error: self._log_store_error(group, error))
            return
        group.protocol_name = group.select_protocol()
        if group.leader_id not in group.members:
            group.leader_id = next(iter(group.members))
        group.transition(E.COMPLETING_REBALANCE, now)
        rebalance_timeout = max(m.rebalance_timeout_ms for m in group.members.values())
        self._arm_rebalance(group, rebalance_timeout, self._on_sync_timeout)
        log.info("group %s: generation %d with %d members, protocol %s", group.group_id, group.generation,
                 len(group.members), group.protocol_name)
        for member in group.members.values():
            fut, member.join_future = member.join_future, None
            member.assignment = b""
            _resolve(fut, self._join_response(group, member))
            self._touch(group, member)

    def _on_sync_timeout(self, group: Group) -> None:
        """Members that never sent SyncGroup within the rebalance timeout are removed (the leader too)."""
        group.rebalance_timer = None
        if not group.is_(E.COMPLETING_REBALANCE):
            return
        late = [m for m in group.members.values() if m.synced_generation != group.generation]
        for member in late:
            log.info("group %s: member %s did not sync in time", group.group_id, member.member_id)
            self._remove_member(group, member, ErrorCode.REBALANCE_IN_PROGRESS)
        if late:
            self._membership_changed(group, "members did not sync")

    def _join_response(self, group: Group, member: Member, skip_assignment: bool = False) -> dict:
        is_leader = member.member_id == group.leader_id
        members = []
        if is_leader:
            members = [{"member_id": m.member_id, "group_instance_id": m.group_instance_id,
                        "metadata": m.metadata_for(group.protocol_name)} for m in group.members.values()]
        return {"error_code": 0, "generation_id": group.generation, "protocol_type": group.protocol_type,
                "protocol_name": group.protocol_name, "leader": group.leader_id or "",
                "member_id": member.member_id, "members": members, "skip_assignment": skip_assignment and is_leader}

    def _store_group(self, group: Group, then: Callable[[BaseException | None], None]) -> None:
        """Write the group's metadata; `then(error)` runs once it is on disk (error None) or has failed: at
        once if the write is already done (a synchronous flusher), else from the loop."""
        try:
            durable = self._write_group(group)
        except Exception as exc:  # the append itself failed (a log whose fsync failed refuses appends)
            then(exc)
            return
        if durable.done():
            then(durable.exception())
            return
        waiter = asyncio.wrap_future(durable)
        waiter.add_done_callback(lambda f: then(f.exception() if not f.cancelled() else asyncio.CancelledError()))

    def _write_group(self, group: Group) -> Future:
        members = [MemberValue(m.member_id, m.group_instance_id, m.client_id, m.client_host, m.rebalance_timeout_ms,
                               m.session_timeout_ms, m.metadata_for(group.protocol_name), m.assignment)
                   for m in group.members.values()]
        value = GroupValue(group.protocol_type or "", group.generation, group.protocol_name, group.leader_id,
                           group.state_timestamp_ms, members)
        return self._persist(group.group_id, [(group_key(group.group_id), encode_group_value(value))])

    # ----------------------------------------------------------------------------------------- JoinGroup

    def join(self, req: JoinRequest) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        if not req.group_id:
            return _done(loop, join_error(ErrorCode.INVALID_GROUP_ID, req.member_id))
        cfg = self.config
        if not cfg.min_session_timeout_ms <= req.session_timeout_ms <= cfg.max_session_timeout_ms:
            return _done(loop, join_error(ErrorCode.INVALID_SESSION_TIMEOUT, req.member_id))
        group = self.groups.get(req.group_id)
        if isinstance(group, ConsumerGroup):
            if group.members and not takes_classic_members(group):
                return _done(loop, join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, req.member_id))
            if group.members:  # a classic member of a consumer group (classic_members.py)
                return _done(loop, self.classic_members.join(group, req))
            # an empty consumer (or streams) group (committed offsets only) becomes a classic group
            del self.groups[req.group_id]
            self.drop_group_record(group)
            group = None
            log.info("group %s: empty consumer group becomes a classic group", req.group_id)
        if group is None and req.member_id:
            return _done(loop, join_error(ErrorCode.UNKNOWN_MEMBER_ID, req.member_id))
        if group is not None and group.is_(E.DEAD):
            return _done(loop, join_error(ErrorCode.COORDINATOR_NOT_AVAILABLE, req.member_id))
        if group is not None and not group.supports_protocols(req.protocol_type, [n for n, _ in req.protocols]):
            return _done(loop, join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, req.member_id))
        if not req.protocol_type or not req.protocols:
            return _done(loop, join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, req.member_id))
        group = group or self.get_or_create(req.group_id)
        fut = loop.create_future()
        if req.member_id and req.member_id not in group.pending_members:
            self._join_known(group, req, fut)
        else:
            self._join_new(group, req, fut)
        return fut

    def _join_new(self, group: Group, req: JoinRequest, fut: asyncio.Future) -> None:
        instance = req.group_instance_id
        if instance is not None and instance in group.static_members:
            self._replace_static(group, group.members[group.static_members[instance]], req, fut)
            return
        if len(group.members) >= self.config.max_size:
            fut.set_result(join_error(ErrorCode.GROUP_MAX_SIZE_REACHED, req.member_id))
            return
        now = self._now()
        if not req.member_id and req.require_known_member and instance is None:
            member_id = self._new_member_id(req.client_id)
            group.pending_members[member_id] = now + req.session_timeout_ms
            self.scheduler.call_later(req.session_timeout_ms, lambda: self._expire_pending(group, member_id))
            fut.set_result(join_error(ErrorCode.MEMBER_ID_REQUIRED, member_id))
            return
        member_id = req.member_id or self._new_member_id(instance or req.client_id)
        group.pending_members.pop(member_id, None)
        member = Member(member_id, instance, req.client_id, req.client_host, req.session_timeout_ms,
                        req.rebalance_timeout_ms, req.protocol_type, list(req.protocols), join_future=fut)
        group.add(member)
        group.last_join_ms = now
        self._touch(group, member)
        if group.is_(E.PREPARING_REBALANCE):
            self._try_complete_join(group)
        else:
            self._prepare_rebalance(group, f"new member {member_id} joined")

    def _expire_pending(self, group: Group, member_id: str) -> None:
        if group.pending_members.pop(member_id, None) is not None:
            self._try_complete_join(group)

    def _update(self, member: Member, req: JoinRequest) -> None:
        member.session_timeout_ms = req.session_timeout_ms
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.client_id = req.client_id
        member.client_host = req.client_host
        member.protocols = list(req.protocols)

    def _await_join(self, group: Group, member: Member, fut: asyncio.Future) -> None:
        if member.join_future is not None and member.join_future is not fut:
            _resolve(member.join_future, join_error(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
        member.join_future = fut
        group.last_join_ms = self._now()

    def _replace_static(self, group: Group, member: Member, req: JoinRequest, fut: asyncio.Future) -> None:
        old_id = member.member_id
        _resolve(member.join_future, join_error(ErrorCode.FENCED_INSTANCE_ID, old_id))
        _resolve(member.sync_future, sync_result(ErrorCode.FENCED_INSTANCE_ID, group))
        member.join_future = member.sync_future = None
        group.replace_member_id(member, self._new_member_id(req.group_instance_id or req.client_id))
        unchanged = member.same_protocols(req.protocols)
        self._update(member, req)
        self._touch(group, member)
        log.info("group %s: static member %s replaced %s", group.group_id, member.member_id, old_id)
        if group.is_(E.STABLE) and unchanged:
            generation = group.generation

            def stored(error: BaseException | None) -> None:
                if fut.done():
                    return
                if error is None and group.generation == generation and member.member_id in group.members:
                    fut.set_result(self._join_response(group, member, skip_assignment=True))
                    return
                self._log_store_error(group, error)
                fut.set_result(join_error(ErrorCode.COORDINATOR_NOT_AVAILABLE if error is not None
                                          else ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
                if error is not None and group.is_(E.STABLE):
                    self._prepare_rebalance(group, "group metadata could not be stored")

            self._store_group(group, stored)
            return
        self._await_join(group, member, fut)
        if group.is_(E.PREPARING_REBALANCE):
            self._try_complete_join(group)
        else:
            self._prepare_rebalance(group, f"static member {member.member_id} rejoined")

    def _join_known(self, group: Group, req: JoinRequest, fut: asyncio.Future) -> None:
        instance = req.group_instance_id
        if instance is not None and group.static_members.get(instance, req.member_id) != req.member_id:
            fut.set_result(join_error(ErrorCode.FENCED_INSTANCE_ID, req.member_id))
            return
        member = group.members.get(req.member_id)
        if member is None or group.is_(E.EMPTY, E.DEAD):
            fut.set_result(join_error(ErrorCode.UNKNOWN_MEMBER_ID, req.member_id))
            return
        unchanged = member.same_protocols(req.protocols)
        self._update(member, req)
        self._touch(group, member)
        if group.is_(E.PREPARING_REBALANCE):
            self._await_join(group, member, fut)
            self._try_complete_join(group)
        elif group.is_(E.COMPLETING_REBALANCE) and unchanged:
            fut.set_result(self._join_response(group, member))  # it lost the previous response
        elif group.is_(E.STABLE) and unchanged and member.member_id != group.leader_id:
            fut.set_result(self._join_response(group, member))
        else:
            self._await_join(group, member, fut)
            self._prepare_rebalance(group, f"member {member.member_id} rejoined with new metadata")

    # ----------------------------------------------------------------------------------------- SyncGroup

    def _find_member(self, group: Group | ConsumerGroup | None, member_id: str,
                     instance: str | None) -> tuple[int, Member | None]:
        if not isinstance(group, Group) or group.is_(E.DEAD):
            return ErrorCode.UNKNOWN_MEMBER_ID, None
        if instance is not None and group.static_members.get(instance, member_id) != member_id:
            return ErrorCode.FENCED_INSTANCE_ID, None
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID, None
        return 0, member

    def sync(self, group_id: str, generation: int, member_id: str, instance: str | None,
             protocol_type: str | None, protocol_name: str | None,
             assignments: list[tuple[str, bytes]]) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        group = self.groups.get(group_id)
        if takes_classic_members(group):
            return _done(loop, self.classic_members.sync(group, generation, member_id, instance, protocol_type,
                                                         protocol_name))
        error, member = self._find_member(group, member_id, instance)
        if member is None or group is None:
            return _done(loop, sync_result(error))
        if generation != group.generation:
            return _done(loop, sync_result(ErrorCode.ILLEGAL_GENERATION))
        if (protocol_type is not None and protocol_type != group.protocol_type) or \
                (protocol_name is not None and protocol_name != group.protocol_name):
            return _done(loop, sync_result(ErrorCode.INCONSISTENT_GROUP_PROTOCOL))
        if group.is_(E.EMPTY):
            return _done(loop, sync_result(ErrorCode.UNKNOWN_MEMBER_ID))
        if group.is_(E.PREPARING_REBALANCE):
            return _done(loop, sync_result(ErrorCode.REBALANCE_IN_PROGRESS, group))
        self._touch(group, member)
        if group.is_(E.STABLE):
            return _done(loop, sync_result(0, group, member.assignment))
        fut = loop.create_future()
        _resolve(member.sync_future, sync_result(ErrorCode.REBALANCE_IN_PROGRESS, group))
        member.sync_future = fut
        member.synced_generation = group.generation
        if member_id == group.leader_id:
            if group.rebalance_timer is not None:
                group.rebalance_timer.cancel()  # type: ignore[attr-defined]
                group.rebalance_timer = None
            given = {mid: bytes(a) for mid, a in assignments}
            for m in group.members.values():
                m.assignment = given.get(m.member_id, b"")
            generation = group.generation
            self._store_group(group, lambda error: self._assignment_stored(group, generation, error))
        return fut

    def _assignment_stored(self, group: Group, generation: int, error: BaseException | None) -> None:
        """The leader's assignment is on disk (or failed to get there): answer the pending SyncGroups."""
        if group.generation != generation or not group.is_(E.COMPLETING_REBALANCE):
            return  # a later rebalance has answered them already
        if error is not None:
            self._log_store_error(group, error)
            for m in group.members.values():
                pending, m.sync_future = m.sync_future, None
                _resolve(pending, sync_result(ErrorCode.COORDINATOR_NOT_AVAILABLE))
            self._prepare_rebalance(group, "group metadata could not be stored")
            return
        group.transition(E.STABLE, self._now())
        for m in group.members.values():
            pending, m.sync_future = m.sync_future, None
            _resolve(pending, sync_result(0, group, m.assignment))
        log.info("group %s: stable at generation %d", group.group_id, group.generation)

    @staticmethod
    def _log_store_error(group: Group, error: BaseException | None) -> None:
        if error is not None:
            log.error("group %s: could not store the group metadata: %s", group.group_id, error)

    # ----------------------------------------------------------------------------------------- Heartbeat

    def heartbeat(self, group_id: str, generation: int, member_id: str, instance: str | None) -> int:
        group = self.groups.get(group_id)
        if takes_classic_members(group):
            return self.classic_members.heartbeat(group, generation, member_id, instance)
        error, member = self._find_member(group, member_id, instance)
        if member is None or group is None:
            return error
        if group.is_(E.EMPTY):
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation != group.generation:
            return ErrorCode.ILLEGAL_GENERATION
        self._touch(group, member)
        return ErrorCode.REBALANCE_IN_PROGRESS if group.is_(E.PREPARING_REBALANCE) else 0

    # ----------------------------------------------------------------------------------------- LeaveGroup

    def leave(self, group_id: str, members: list[tuple[str, str | None]]) -> list[int]:
        """Remove each (member_id, group_instance_id); returns one error code per entry."""
        group = self.groups.get(group_id)
        if takes_classic_members(group):
            return self.classic_members.leave(group, members)
        errors = []
        changed = False
        for member_id, instance in members:
            if not isinstance(group, Group) or group.is_(E.DEAD):
                errors.append(ErrorCode.UNKNOWN_MEMBER_ID)
                continue
            if instance is not None:
                known = group.static_members.get(instance)
                if known is None:
                    errors.append(ErrorCode.UNKNOWN_MEMBER_ID)
                    continue
                if member_id and member_id != known:
                    errors.append(ErrorCode.FENCED_INSTANCE_ID)
                    continue
                member_id = known
            member = group.members.get(member_id)
            if member is None:
                if group.pending_members.pop(member_id, None) is not None:
                    errors.append(0)
                    changed = True
                else:
                    errors.append(ErrorCode.UNKNOWN_MEMBER_ID)
                continue
            log.info("group %s: member %s left", group_id, member_id)
            self._remove_member(group, member, ErrorCode.UNKNOWN_MEMBER_ID)
            errors.append(0)
            changed = True
        if changed and isinstance(group, Group):
            self._membership_changed(group, "member left")
        return errors

    def touch_member(self, group: Group, member: Member) -> None:
        self._touch(group, member)

    # ----------------------------------------------------------------------------------------- restore

    def restore(self, group_id: str, value: GroupValue) -> Group:
        """Rebuild a group from its last persisted metadata (at start-up, before any client talks to us)."""
        group = self.get_or_create(group_id)
        group.generation = value.generation
        group.protocol_type = value.protocol_type or None
        group.protocol_name = value.protocol
        group.state_timestamp_ms = value.current_state_timestamp
        for mv in value.members:
            member = Member(mv.member_id, mv.group_instance_id, mv.client_id, mv.client_host, mv.session_timeout_ms,
                            mv.rebalance_timeout_ms, value.protocol_type, [(value.protocol or "", mv.subscription)],
                            assignment=mv.assignment)
            group.add(member)
            self._touch(group, member)
        group.leader_id = value.leader if value.leader in group.members else next(iter(group.members), None)
        group.protocol_type = value.protocol_type or None
        group.state = E.STABLE if group.members else E.EMPTY
        return group

    def close(self) -> None:
        """Cancel timers and answer every pending long poll (the broker is going away)."""
        for group in self.groups.values():
            self._stop(group, ErrorCode.COORDINATOR_NOT_AVAILABLE)

    def unload(self, group_ids: list[str]) -> None:
        """Forget these groups: another broker coordinates them now (pending long polls: NOT_COORDINATOR)."""
        for group_id in group_ids:
            group = self.groups.pop(group_id, None)
            if group is not None:
                self._stop(group, ErrorCode.NOT_COORDINATOR)

    def drop_group_record(self, group: ConsumerGroup) -> None:
        """Tombstone the stored state of an empty consumer or streams group whose name goes to another protocol."""
        key = streams_group_key(group.group_id) if group.protocol_type == "streams" else consumer_group_key(
            group.group_id)
        try:
            self._persist(group.group_id, [(key, None)])
        except Exception as exc:
            log.warning("group %s: cannot remove its %s group record: %s", group.group_id, group.protocol_type, exc)

    def discard_empty(self, group: Group) -> None:
        """An empty classic group turns into a consumer group: forget it (its offsets stay)."""
        self._stop(group, ErrorCode.UNKNOWN_MEMBER_ID)
        if self.groups.get(group.group_id) is group:
            del self.groups[group.group_id]

    def _stop(self, group: Group | ConsumerGroup, error: int) -> None:
        if isinstance(group, ConsumerGroup):
            for m in group.members.values():
                for timer in (m.session_timer, m.rebalance_timer):
                    if timer is not None:
                        timer.cancel()  # type: ignore[attr-defined]
            return
        if group.rebalance_timer is not None:
            group.rebalance_timer.cancel()  # type: ignore[attr-defined]
        for m in group.members.values():
            if m.session_timer is not None:
                m.session_timer.cancel()  # type: ignore[attr-defined]
            _resolve(m.join_future, join_error(error, m.member_id))
            _resolve(m.sync_future, sync_result(error))
