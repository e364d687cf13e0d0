"""StreamsGroupCoordinator: the streams rebalance protocol of KIP-1071 (StreamsGroupHeartbeat), its timers.

Streams groups share the name space of classic and consumer groups (`GroupCoordinator.groups`); an empty
group of another protocol (one that only holds committed offsets) becomes a streams group when a streams
member joins, a non-empty one is refused (GROUP_ID_NOT_FOUND, "not a streams group").

One heartbeat (`heartbeat`), in Kafka's order (GroupMetadataManager.streamsGroupHeartbeat):

1. the request checks of Kafka's GroupCoordinatorService (INVALID_REQUEST with Kafka's messages;
   STREAMS_INVALID_TOPOLOGY for a topology Kafka refuses) — done by `validate`;
2. member epoch -1: the member leaves (its tasks are free at once); -2: a static member leaves for now: it
   stays, epoch -2, with its tasks and target, without a new group epoch, until its session times out;
3. the group: created by a joining member (epoch 0), else GROUP_ID_NOT_FOUND; the member: created on epoch 0,
   else it must be known (UNKNOWN_MEMBER_ID) with its epoch, or its previous one when the tasks it reports
   are all still its own (FENCED_MEMBER_EPOCH otherwise). A static member (instance id): a join with an
   instance id whose member left with -2 takes that member over under the new member id (epoch 0, its
   tasks and target kept; the group epoch moves only if its metadata differs), one whose member has not
   left is UNRELEASED_INSTANCE_ID; a heartbeat or leave naming an instance id nobody holds is
   UNKNOWN_MEMBER_ID, one held by another member id FENCED_INSTANCE_ID (Kafka's messages);
4. the topology: the first member's becomes the group's; a later member with an older epoch is told
   STALE_TOPOLOGY, one with the same epoch but a different topology INVALID_REQUEST ("Topology updates are
   not supported yet.", as Kafka); the topology is configured against the cluster's topics whenever those
   changed (`streams_group.configure`), and internal topics it lacks are returned for the handler to create;
5. a new member, changed member metadata, a newly configured topology or a changed task count bumps the group
   epoch; group epoch > assignment epoch: a new target (`streams_assignor.assign`, with the group config
   `streams.num.standby.replicas`), empty for everyone while the topology is not ready (as in Kafka);
6. the member takes its next reconciliation step (`StreamsGroup.reconcile`);
7. the answer: member id and epoch, heartbeat interval, the tasks when the member joined or its tasks changed,
   and the status (missing source or internal topics, stale topology, shutdown requested); the group's
   endpoint information epoch (moved when a member's `application.server` endpoint changes or the tasks of
   a member with one do), and, to a member that reports an older one, every endpoint with the partitions of
   its members' active and standby tasks (`partitions_by_user_endpoint`, Kafka's EndpointToPartitionsManager).

Timers and persistence as for consumer groups (consumer_groups.py): a member silent for
`streams.session.timeout.ms` is removed, one that does not revoke within its rebalance timeout too; the whole
group state is appended to `__consumer_offsets` when it changed (streams_persistence.py) and restored with
the coordinator, members keeping their epochs.

Not thread-safe; owned by the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from odradek.coordinator.consumer_group import LEAVE_EPOCH, STATIC_LEAVE_EPOCH, ConsumerGroup, MemberState
from odradek.coordinator.consumer_groups import HeartbeatError
from odradek.coordinator.group import Group
from odradek.coordinator.persistence import group_key, streams_group_key
from odradek.coordinator.streams_assignor import assign
from odradek.coordinator.streams_group import (
    ASSIGNMENT_DELAYED, SHUTDOWN_APPLICATION, STALE_TOPOLOGY, StreamsGroup, StreamsMember, TaskSets, TopicInfo, Topology, configure)
from odradek.coordinator.streams_persistence import encode_streams_group_value
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.cluster.metadata import MetadataCache
    from odradek.coordinator.group_coordinator import GroupCoordinator

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StreamsGroupConfig:
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    num_standby_replicas: int = 0
    max_size: int = 0x7FFFFFFF
    initial_rebalance_delay_ms: int = 3_000
    task_offset_interval_ms: int = 60_000
    acceptable_recovery_lag: int = 10_000


@dataclass
class StreamsHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    endpoint_information_epoch: int = 0
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    topology: Topology | None = None
    owned: TaskSets | None = None
    process_id: str | None = None
    user_endpoint: tuple[str, int] | None = None
    client_tags: dict[str, str] | None = None
    task_offsets: list[tuple[str, int, int]] | None = None
    task_end_offsets: list[tuple[str, int, int]] | None = None
    shutdown_application: bool = False
    client_id: str = ""
    client_host: str = ""


@dataclass
class StreamsHeartbeatResult:
    body: dict
    to_create: tuple[TopicInfo, ...] = ()


def _task_ids(tasks: set) -> list[dict]:
    by_sub: dict[str, list[int]] = {}
    for s, p in tasks:
        by_sub.setdefault(s, []).append(p)
    return [{"subtopology_id": s, "partitions": sorted(ps)} for s, ps in sorted(by_sub.items())]


class StreamsGroupCoordinator:
    def __init__(self, config: StreamsGroupConfig, groups: "GroupCoordinator",
                 metadata: "MetadataCache | None") -> None:
        self.config = config
        self.classic = groups
        self.metadata = metadata
        self.creating: dict[str, asyncio.Task] = {}  # internal topic -> its creation (k88; strong references)
        # a group's own configs (the share group coordinator keeps them): (group, name) -> value or ""
        self.group_config: Callable[[str, str], str] = lambda group_id, name: ""

    @property
    def groups(self) -> dict:
        return self.classic.groups

    def _now(self) -> int:
        return self.classic.scheduler.now_ms()

    def _group_int(self, group_id: str, name: str, default: int) -> int:
        value = self.group_config(group_id, name)
        return int(value) if value else default

    # ----------------------------------------------------------------------------------------- heartbeat

    def heartbeat(self, req: StreamsHeartbeatRequest) -> StreamsHeartbeatResult:
        """Answer one StreamsGroupHeartbeat whose request checks passed (the body without throttle time)."""
        try:
            if req.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                result = StreamsHeartbeatResult(self._leave(req))
            else:
                result = self._heartbeat(req)
            group = self.groups.get(req.group_id)
            if isinstance(group, StreamsGroup):
                self._store(group)
            return result
        except HeartbeatError as exc:
            return StreamsHeartbeatResult(error_body(exc.error_code, exc.message))

    def _group_for(self, req: StreamsHeartbeatRequest) -> StreamsGroup:
        group = self.groups.get(req.group_id)
        if isinstance(group, StreamsGroup) and not group.deleted:
            return group
        if (isinstance(group, Group) and not group.is_empty) or (isinstance(group, ConsumerGroup) and group.members):
            raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {req.group_id} is not a streams group.")
        if req.member_epoch != 0:
            raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Streams group {req.group_id} not found.")
        created = StreamsGroup(req.group_id, state_timestamp_ms=self._now(), replaces_classic=isinstance(group, Group))
        if isinstance(group, Group):
            self.classic.discard_empty(group)
        elif isinstance(group, ConsumerGroup):  # an empty consumer group: its record goes
            self.classic.drop_group_record(group)
        if group is not None:
            log.info("group %s: empty %s group becomes a streams group", req.group_id, group.protocol_type)
        self.groups[req.group_id] = created
        return created

    def _member_for(self, group: StreamsGroup, req: StreamsHeartbeatRequest) -> tuple[StreamsMember, bool]:
        """The member this heartbeat is from (created, or a static member's taken over, on a join); whether new."""
        if req.instance_id is not None:
            static = self._static_member(group, req.instance_id)
            if req.member_epoch == 0 and static is not None:
                if static.member_epoch != STATIC_LEAVE_EPOCH:
                    raise HeartbeatError(ErrorCode.UNRELEASED_INSTANCE_ID,
                                         f"Static member {req.member_id} with instance id {req.instance_id} cannot "
                                         f"join the group because the instance id is owned by {static.member_id} "
                                         f"member.")
                return self._take_over(group, static, req), False
            if req.member_epoch != 0:
                self._check_static(req, static)
        member = group.members.get(req.member_id)
        if req.member_epoch == 0:
            if member is not None:
                if req.instance_id is not None and member.instance_id is None:
                    member.instance_id = req.instance_id  # a known member rejoins as a static one (Kafka)
                    group.static_members[req.instance_id] = member.member_id
                return member, False
            if len(group.members) >= self.config.max_size:
                raise HeartbeatError(ErrorCode.GROUP_MAX_SIZE_REACHED,
                                     f"The streams group has reached its maximum capacity of "
                                     f"{self.config.max_size} members.")
            member = StreamsMember(req.member_id, instance_id=req.instance_id)
            group.add(member)  # type: ignore[arg-type]
            return member, True
        if member is None:
            raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID,
                                 f"Member {req.member_id} is not a member of group {req.group_id}.")
        if req.member_epoch > member.member_epoch:
            raise HeartbeatError(ErrorCode.FENCED_MEMBER_EPOCH,
                                 f"The streams group member has a greater member epoch ({req.member_epoch}) than "
                                 f"the one known by the group coordinator ({member.member_epoch}). The member must "
                                 f"abandon all its partitions and rejoin.")
        if req.member_epoch < member.member_epoch:
            owned = req.owned
            if req.member_epoch != member.previous_member_epoch or (owned is not None and not all(
                    o <= a for o, a in zip(owned.roles(), member.assigned.roles()))):
                raise HeartbeatError(ErrorCode.FENCED_MEMBER_EPOCH,
                                     f"The streams group member has a smaller member epoch ({req.member_epoch}) "
                                     f"than the one known by the group coordinator ({member.member_epoch}). The "
                                     f"member must abandon all its partitions and rejoin.")
        return member, False

    @staticmethod
    def _static_member(group: StreamsGroup, instance_id: str) -> StreamsMember | None:
        member_id = group.static_members.get(instance_id)
        return group.members.get(member_id) if member_id is not None else None  # type: ignore[return-value]

    @staticmethod
    def _check_static(req: StreamsHeartbeatRequest, static: StreamsMember | None) -> None:
        """A heartbeat (or leave) naming an instance id must come from the member that holds it."""
        if static is None:
            raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
        if static.member_id != req.member_id:
            raise HeartbeatError(ErrorCode.FENCED_INSTANCE_ID,
                                 f"Static member {req.member_id} with instance id {req.instance_id} was fenced by "
                                 f"member {static.member_id}.")

    def _take_over(self, group: StreamsGroup, previous: StreamsMember, req: StreamsHeartbeatRequest) -> StreamsMember:
        """A static member that left with epoch -2 is back (under any member id): as in Kafka, it keeps its
        tasks and its target, starts again from epoch 0 and reconciles to the current assignment epoch; the
        group epoch moves only if its metadata changed, so the other members keep what they have."""
        if req.member_id != previous.member_id and req.member_id in group.members:
            # another member had that id: it is replaced, and its tasks are assigned anew
            self._remove(group, group.members[req.member_id])
        self._cancel_timers(previous)
        target = group.target.pop(previous.member_id, None)
        group.members.pop(previous.member_id, None)
        log.info("group %s: static member %s with instance id %s rejoins as %s", group.group_id,
                 previous.member_id, req.instance_id, req.member_id)
        previous.member_id = req.member_id
        previous.member_epoch = previous.previous_member_epoch = 0
        group.add(previous)  # type: ignore[arg-type]
        if target is not None:
            group.target[previous.member_id] = target
        return previous

    def _heartbeat(self, req: StreamsHeartbeatRequest) -> StreamsHeartbeatResult:
        created = not isinstance(self.groups.get(req.group_id), StreamsGroup)
        group = self._group_for(req)
        member, new = self._member_for(group, req)
        before = member.assigned.copy()
        endpoint_before = member.user_endpoint
        status: list[dict] = []
        changed = new
        member.client_id, member.client_host = req.client_id, req.client_host
        for attr, value in (("rack_id", req.rack_id), ("process_id", req.process_id),
                            ("user_endpoint", req.user_endpoint), ("client_tags", req.client_tags)):
            if value is not None and getattr(member, attr) != value:
                setattr(member, attr, value)
                changed = True
        if req.member_epoch == 0 and req.user_endpoint is None and member.user_endpoint is not None:
            member.user_endpoint = None  # a join sets the endpoint, also to none (Kafka)
            changed = True
        if req.rebalance_timeout_ms != -1 and req.rebalance_timeout_ms != member.rebalance_timeout_ms:
            member.rebalance_timeout_ms = req.rebalance_timeout_ms
            changed = True
        if req.topology is not None:
            if member.topology_epoch != req.topology.epoch:
                member.topology_epoch = req.topology.epoch
                changed = True
            if group.topology is None:
                log.info("group %s: member %s initialized the topology with epoch %d", group.group_id,
                         member.member_id, req.topology.epoch)
                group.topology = req.topology
                group.configured_key = None
            elif group.topology.epoch <= req.topology.epoch and group.topology != req.topology:
                if new:
                    self._remove(group, member, bump=False)
                raise HeartbeatError(ErrorCode.INVALID_REQUEST, "Topology updates are not supported yet.")
        if req.task_offsets is not None:
            member.task_offsets = req.task_offsets
        if req.task_end_offsets is not None:
            member.task_end_offsets = req.task_end_offsets
        if group.topology is not None and member.topology_epoch < group.topology.epoch:
            status.append({"status_code": STALE_TOPOLOGY, "status_detail":
                           f"The member's topology epoch {member.topology_epoch} is behind the group's topology "
                           f"epoch {group.topology.epoch}."})
        if self._reconfigure(group):
            changed = True
        if req.owned is not None and group.configured is not None and group.configured.ready:
            self._check_tasks(group, req.owned)
        num_standby = self._group_int(group.group_id, "streams.num.standby.replicas", self.config.num_standby_replicas)
        if group.standby_replicas != num_standby:
            group.standby_replicas = num_standby
            changed = True
        if group.assignment_delayed_until_ms is not None and self._now() >= group.assignment_delayed_until_ms:
            group.assignment_delayed_until_ms = None  # the initial delay is over: now the real assignment
            changed = True
        if changed:
            group.group_epoch += 1
        if group.group_epoch > group.assignment_epoch:
            if group.assignment_epoch == 0 and not group.target:
                delay = self._group_int(group.group_id, "streams.initial.rebalance.delay.ms",
                                        self.config.initial_rebalance_delay_ms)
                if delay > 0:
                    group.assignment_delayed_until_ms = self._now() + delay
            self._assign(group, num_standby)
        was_unrevoked = member.state is MemberState.UNREVOKED_PARTITIONS
        group.reconcile(member, req.owned)
        if member.state is MemberState.UNREVOKED_PARTITIONS and not was_unrevoked:
            self._arm_rebalance_timeout(group, member)
        elif member.state is not MemberState.UNREVOKED_PARTITIONS and member.rebalance_timer is not None:
            member.rebalance_timer.cancel()  # type: ignore[attr-defined]
            member.rebalance_timer = None
        self._touch(group, member)
        if req.shutdown_application:
            group.shutdown_requested_by = member.member_id
        recovery_lag = self._group_int(group.group_id, "streams.acceptable.recovery.lag",
                                       self.config.acceptable_recovery_lag)
        body = {"error_code": 0, "error_message": None, "member_id": member.member_id,
                "member_epoch": member.member_epoch,
                "heartbeat_interval_ms": self._group_int(group.group_id, "streams.heartbeat.interval.ms",
                                                         self.config.heartbeat_interval_ms),
                # v0's field is an int32: a larger lag is sent as the largest it can hold
                "acceptable_recovery_lag_legacy": min(recovery_lag, 0x7FFFFFFF),
                "acceptable_recovery_lag": recovery_lag,
                "task_offset_interval_ms": self.config.task_offset_interval_ms,
                "status": [], "active_tasks": None, "standby_tasks": None, "warmup_tasks": None,
                "topology_description_required": False, "endpoint_information_epoch": 0,
                "partitions_by_user_endpoint": None}
        if req.member_epoch == 0 or member.assigned != before:
            body["active_tasks"] = _task_ids(member.assigned.active)
            body["standby_tasks"] = _task_ids(member.assigned.standby)
            body["warmup_tasks"] = _task_ids(member.assigned.warmup)
        # interactive queries (KIP-1071): the group's endpoint epoch moves when a member's endpoint changes or
        # the tasks of a member with one do; a member that has not seen the current epoch gets every endpoint
        # with the partitions behind it
        if member.user_endpoint != endpoint_before or (member.assigned != before and member.user_endpoint):
            group.endpoint_information_epoch += 1
        if group.endpoint_information_epoch != req.endpoint_information_epoch:
            body["partitions_by_user_endpoint"] = self._partitions_by_endpoint(group)
        if created:
            # Kafka 4.4 answers the heartbeat that created the group from a copy of it: the endpoint epoch
            # that join moved is not kept, and the answer says 0 (the endpoints are sent all the same)
            group.endpoint_information_epoch = 0
        body["endpoint_information_epoch"] = group.endpoint_information_epoch
        to_create: tuple[TopicInfo, ...] = ()
        if group.configured is not None and group.configured.status is not None:
            code, detail = group.configured.status
            status.append({"status_code": code, "status_detail": detail})
            to_create = group.configured.to_create
        if group.shutdown_requested_by is not None:
            status.append({"status_code": SHUTDOWN_APPLICATION, "status_detail":
                           f"Streams group member {group.shutdown_requested_by} encountered a fatal error and "
                           f"requested a shutdown for the entire application."})
        if group.assignment_delayed_until_ms is not None:
            status.append({"status_code": ASSIGNMENT_DELAYED,
                           "status_detail": "Assignment delayed due to the configured initial rebalance delay."})
        body["status"] = status
        return StreamsHeartbeatResult(body, to_create)

    def _partitions_by_endpoint(self, group: StreamsGroup) -> list[dict]:
        """Kafka's EndpointToPartitionsManager: per member with an endpoint, the partitions of the source and
        repartition source topics of its current active tasks, and of its standby and warm-up tasks."""
        topics_of = {s.subtopology_id: list(s.source_topics) + [t.name for t in s.repartition_sources]
                     for s in (group.topology.subtopologies if group.topology is not None else ())}

        def partitions(tasks: set) -> list[dict]:
            by_topic: dict[str, set[int]] = {}
            for sub, p in tasks:
                for topic in topics_of.get(sub, ()):
                    count = self._partition_count(topic)
                    if count is not None and p < count:
                        by_topic.setdefault(topic, set()).add(p)
            return [{"topic": t, "partitions": sorted(ps)} for t, ps in sorted(by_topic.items())]

        out = []
        for m in sorted(group.members.values(), key=lambda m: m.member_id):
            if m.user_endpoint is None:
                continue
            out.append({"user_endpoint": {"host": m.user_endpoint[0], "port": m.user_endpoint[1]},
                        "active_partitions": partitions(m.assigned.active),
                        "standby_partitions": partitions(m.assigned.standby | m.assigned.warmup)})
        return out

    def _check_tasks(self, group: StreamsGroup, owned: TaskSets) -> None:
        tasks = group.configured.tasks  # type: ignore[union-attr]
        for role in owned.roles():
            for sub, p in sorted(role):
                if sub not in tasks:
                    raise HeartbeatError(ErrorCode.INVALID_REQUEST, f"Subtopology {sub} does not exist in the topology.")
                if not 0 <= p < tasks[sub]:
                    raise HeartbeatError(ErrorCode.INVALID_REQUEST,
                                         f"Task {p} for subtopology {sub} is invalid. Number of tasks for this "
                                         f"subtopology: {tasks[sub]}")

    def _reconfigure(self, group: StreamsGroup) -> bool:
        """Configure the topology again when the cluster's topics changed; True if the tasks or readiness did."""
        if group.topology is None:
            return False
        version = getattr(self.metadata, "version", None)
        key = (version, group.topology.epoch)
        if version is not None and key == group.configured_key and group.configured is not None:
            return False
        group.configured_key = key
        before = group.configured
        group.configured = configure(group.topology, self._partition_count)
        after = group.configured
        if before is None:
            return True
        return (before.ready, before.tasks) != (after.ready, after.tasks)

    def _partition_count(self, name: str) -> int | None:
        if self.metadata is None:
            return None
        topic = self.metadata.topic(name)
        return topic.partitions if topic is not None else None

    def _assign(self, group: StreamsGroup, num_standby: int) -> None:
        # as Kafka: a topology that is not ready yet (topics missing) gives every member an empty target
        ready = group.configured is not None and group.configured.ready and group.assignment_delayed_until_ms is None
        tasks = group.configured.all_tasks() if ready else []  # type: ignore[union-attr]
        group.target = assign(group.members, tasks, dict(group.target), num_standby)  # type: ignore[arg-type]
        group.assignment_epoch = group.group_epoch
        log.info("group %s: target assignment of epoch %d: %d tasks, %d standby replicas, %d members",
                 group.group_id, group.assignment_epoch, len(tasks), num_standby, len(group.members))

    def _leave(self, req: StreamsHeartbeatRequest) -> dict:
        group = self.groups.get(req.group_id)
        if not isinstance(group, StreamsGroup) or group.deleted:
            raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Streams group {req.group_id} not found.")
        if req.instance_id is not None:
            member = self._static_member(group, req.instance_id)
            self._check_static(req, member)
        else:
            member = group.members.get(req.member_id)
        if member is None:
            raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID,
                                 f"Member {req.member_id} is not a member of group {req.group_id}.")
        if req.shutdown_application:
            group.shutdown_requested_by = member.member_id
        if req.member_epoch == STATIC_LEAVE_EPOCH:
            # Kafka keeps a static member that leaves for now, with its tasks, until its session times out,
            # without a new group epoch: whoever rejoins with its instance id takes it over (`_take_over`)
            log.info("group %s: static member %s with instance id %s left for now", group.group_id,
                     member.member_id, req.instance_id)
            if member.rebalance_timer is not None:
                member.rebalance_timer.cancel()  # type: ignore[attr-defined]
                member.rebalance_timer = None
            member.member_epoch = STATIC_LEAVE_EPOCH
            member.pending_revocation = TaskSets()
            member.state = MemberState.STABLE
        else:
            log.info("group %s: member %s left", group.group_id, member.member_id)
            self._remove(group, member)
        body = error_body(0, None)
        body.update(member_id=req.member_id, member_epoch=req.member_epoch)
        return body

    # ----------------------------------------------------------------------------------------- members

    def _cancel_timers(self, member: StreamsMember) -> None:
        for name in ("session_timer", "rebalance_timer"):
            timer = getattr(member, name)
            if timer is not None:
                timer.cancel()  # type: ignore[attr-defined]
                setattr(member, name, None)

    def _remove(self, group: StreamsGroup, member: StreamsMember, bump: bool = True) -> None:
        self._cancel_timers(member)
        group.remove(member.member_id)
        if group.shutdown_requested_by == member.member_id and not group.members:
            group.shutdown_requested_by = None
        if bump:
            group.group_epoch += 1
        if not group.members:
            group.assignment_epoch = group.group_epoch
            group.shutdown_requested_by = None
            group.assignment_delayed_until_ms = None
            group.state_timestamp_ms = self._now()

    def _touch(self, group: StreamsGroup, member: StreamsMember) -> None:
        if member.session_timer is not None:
            member.session_timer.cancel()  # type: ignore[attr-defined]
        member.session_timer = self.classic.scheduler.call_later(
            self._group_int(group.group_id, "streams.session.timeout.ms", self.config.session_timeout_ms),
            lambda: self._expire(group, member, "session timeout"))

    def _arm_rebalance_timeout(self, group: StreamsGroup, member: StreamsMember) -> None:
        if member.rebalance_timer is not None:
            member.rebalance_timer.cancel()  # type: ignore[attr-defined]
        epoch = member.member_epoch
        member.rebalance_timer = self.classic.scheduler.call_later(
            member.rebalance_timeout_ms,
            lambda: self._expire(group, member, "rebalance timeout") if (
                member.state is MemberState.UNREVOKED_PARTITIONS and member.member_epoch == epoch) else None)

    def _expire(self, group: StreamsGroup, member: StreamsMember, why: str) -> None:
        if group.members.get(member.member_id) is not member or self.groups.get(group.group_id) is not group:
            return
        log.info("group %s: member %s removed (%s)", group.group_id, member.member_id, why)
        self._remove(group, member)
        self._store(group)

    # ----------------------------------------------------------------------------------------- persistence

    def _store(self, group: StreamsGroup) -> None:
        value = encode_streams_group_value(group)
        if value == group.stored:
            return
        records: list[tuple[bytes, bytes | None]] = [(streams_group_key(group.group_id), value)]
        if group.replaces_classic:
            records.insert(0, (group_key(group.group_id), None))
        try:
            self.classic._persist(group.group_id, records)
        except Exception as exc:  # the partition moved or storage failed: the next change writes it all again
            log.warning("group %s: cannot store its state: %s", group.group_id, exc)
            return
        group.stored = value
        group.replaces_classic = False

    def restore(self, group: StreamsGroup) -> None:
        """A group read back from `__consumer_offsets`: its members' timers start now."""
        group.stored = encode_streams_group_value(group)
        self.groups[group.group_id] = group
        for member in group.members.values():
            self._touch(group, member)
            if member.state is MemberState.UNREVOKED_PARTITIONS:
                self._arm_rebalance_timeout(group, member)
        self._reconfigure(group)


def error_body(code: int, message: str | None) -> dict:
    return {"error_code": code, "error_message": message, "member_id": "", "member_epoch": 0,
            "heartbeat_interval_ms": 0, "acceptable_recovery_lag_legacy": 0, "acceptable_recovery_lag": -1,
            "task_offset_interval_ms": 0, "status": [], "active_tasks": None, "standby_tasks": None,
            "warmup_tasks": None, "topology_description_required": False, "endpoint_information_epoch": 0,
            "partitions_by_user_endpoint": None}
