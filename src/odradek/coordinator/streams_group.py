"""The state of one group of the streams rebalance protocol (KIP-1071): topology, members, tasks, epochs.

A streams group is a consumer-protocol group (`ConsumerGroup`: the same group, assignment and member epochs,
the same name space, offset commits checked against member epochs) whose unit of assignment is a *task*
(subtopology id, partition) instead of a topic partition, in three roles: active, standby and warm-up.

The group's *topology* comes from the first member that joins (its subtopologies with their source topics,
repartition sink and source topics, changelog topics and copartition groups). `configure` turns it, with
the topics the cluster has, into a `ConfiguredTopology`: the number of tasks of each subtopology (the most
partitions among its source and repartition source topics), the partition count each internal topic must
have (Kafka's InternalTopicManager rules: a repartition topic without a count takes the most partitions
among the source topics of the subtopologies writing to it; copartitioned topics get one count; a changelog
topic has one partition per task of its subtopology), the internal topics still to create, and the status
the heartbeat reports while it is not ready (missing source topics, missing internal topics, wrongly
partitioned topics). Tasks are assigned only once it is ready.

Each member reconciles towards its target in steps, as Kafka's streams CurrentAssignmentBuilder does:
tasks it must give up are revoked first (UNREVOKED: same epoch, until a heartbeat no longer reports them);
new tasks are handed out with the assignment epoch, but an active task only once no other member holds it
and a task only once no member of the same process still holds it in another role (UNRELEASED until then).

Group state as Kafka reports it: Empty, NotReady (topology not configured), Assigning, Reconciling, Stable;
Dead once deleted. Not thread-safe; owned by the event loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from odradek.coordinator.consumer_group import ConsumerGroup, MemberState

Task = tuple[str, int]  # (subtopology id, partition)
ROLES = ("active", "standby", "warmup")

# StreamsGroupHeartbeatResponse status codes (Kafka's StreamsGroupHeartbeatResponse.Status)
STALE_TOPOLOGY = 0
MISSING_SOURCE_TOPICS = 1
INCORRECTLY_PARTITIONED_TOPICS = 2
MISSING_INTERNAL_TOPICS = 3
SHUTDOWN_APPLICATION = 4
ASSIGNMENT_DELAYED = 5


class StreamsGroupState(str, Enum):
    EMPTY = "Empty"
    NOT_READY = "NotReady"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(frozen=True)
class TopicInfo:
    name: str
    partitions: int = 0  # 0: decided by the coordinator
    replication_factor: int = 0  # 0: the broker default
    configs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Subtopology:
    subtopology_id: str
    source_topics: tuple[str, ...] = ()
    repartition_sinks: tuple[str, ...] = ()
    changelogs: tuple[TopicInfo, ...] = ()
    repartition_sources: tuple[TopicInfo, ...] = ()
    # each group: indices into source_topics and into repartition_sources
    copartition_groups: tuple[tuple[tuple[int, ...], tuple[int, ...]], ...] = ()


@dataclass(frozen=True)
class Topology:
    epoch: int
    subtopologies: tuple[Subtopology, ...]

    def internal_topics(self) -> set[str]:
        return {t.name for s in self.subtopologies for t in s.repartition_sources + s.changelogs}


class TopologyError(Exception):
    """The topology cannot be configured with the topics the cluster has: a heartbeat status."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


@dataclass(frozen=True)
class ConfiguredTopology:
    tasks: dict[str, int]  # subtopology id -> number of tasks (empty when not configured)
    internal_partitions: dict[str, int]  # internal topic -> the partition count it must have
    to_create: tuple[TopicInfo, ...] = ()  # internal topics missing, with their counts
    status: tuple[int, str] | None = None  # what keeps it from being ready

    @property
    def ready(self) -> bool:
        return self.status is None

    def all_tasks(self) -> list[Task]:
        return [(s, p) for s in sorted(self.tasks) for p in range(self.tasks[s])]


def _summary(names) -> str:
    return "[" + ", ".join(sorted(names)) + "]"


def configure(topology: Topology, partition_count) -> ConfiguredTopology:
    """Kafka's InternalTopicManager.configureTopics; ``partition_count(name)`` is a topic's count or None."""
    try:
        missing = sorted({t for s in topology.subtopologies for t in s.source_topics if partition_count(t) is None})
        if missing:
            raise TopologyError(MISSING_SOURCE_TOPICS, f"Source topics {', '.join(missing)} are missing.")
        decided: dict[str, int] = {}

        def count(name: str) -> int | None:
            found = partition_count(name)
            return found if found is not None else decided.get(name)

        _repartition_counts(topology, count, decided)
        _copartition(topology, count, decided)
        tasks: dict[str, int] = {}
        for s in topology.subtopologies:
            counts = [count(t) for t in s.source_topics] + [count(t.name) for t in s.repartition_sources]
            if not counts or any(c is None for c in counts):
                raise TopologyError(MISSING_SOURCE_TOPICS, f"Subtopology {s.subtopology_id} has no source topics.")
            tasks[s.subtopology_id] = max(counts)  # type: ignore[type-var]
            for t in s.changelogs:
                decided[t.name] = tasks[s.subtopology_id]
        to_create: dict[str, TopicInfo] = {}
        for s in topology.subtopologies:
            for t in s.repartition_sources + s.changelogs:
                want = t.partitions or decided[t.name]
                found = partition_count(t.name)
                if found is None:
                    to_create[t.name] = TopicInfo(t.name, want, t.replication_factor, t.configs)
                elif found != want:
                    raise TopologyError(INCORRECTLY_PARTITIONED_TOPICS,
                                        f"Existing topic {t.name} has different number of partitions: expected "
                                        f"{want}, found {found}")
        internal = {t.name: t.partitions or decided[t.name]
                    for s in topology.subtopologies for t in s.repartition_sources + s.changelogs}
        if to_create:
            return ConfiguredTopology(tasks, internal, tuple(to_create[n] for n in sorted(to_create)),
                                      (MISSING_INTERNAL_TOPICS, f"Internal topics are missing: {_summary(to_create)}"))
        return ConfiguredTopology(tasks, internal)
    except TopologyError as exc:
        return ConfiguredTopology({}, {}, (), (exc.status, exc.detail))


def _repartition_counts(topology: Topology, count, decided: dict[str, int]) -> None:
    """A repartition topic without a count gets the most partitions among the source topics of the
    subtopologies that write to it, repeated until nothing changes (a chain of repartitions)."""
    for s in topology.subtopologies:
        for t in s.repartition_sources:
            if t.partitions:
                decided[t.name] = t.partitions
    open_topics = [t.name for s in topology.subtopologies for t in s.repartition_sources if not t.partitions]
    for _ in range(len(open_topics) + 1):
        progress = False
        for name in open_topics:
            if name in decided:
                continue
            best = None
            for upstream in topology.subtopologies:
                if name not in upstream.repartition_sinks:
                    continue
                for src in list(upstream.source_topics) + [t.name for t in upstream.repartition_sources]:
                    c = count(src)
                    if c is not None and (best is None or c > best):
                        best = c
            if best is not None:
                decided[name] = best
                progress = True
        if not progress:
            break
    undecided = sorted(n for n in open_topics if n not in decided)
    if undecided:
        raise TopologyError(INCORRECTLY_PARTITIONED_TOPICS,
                            f"Failed to compute number of partitions for all repartition topics: {_summary(undecided)}")


def _copartition(topology: Topology, count, decided: dict[str, int]) -> None:
    """Copartitioned topics must agree: source topics must already, flexible repartition topics follow them."""
    for s in topology.subtopologies:
        flexible = {t.name for t in s.repartition_sources if not t.partitions}
        for source_idx, repartition_idx in s.copartition_groups:
            sources = [s.source_topics[i] for i in source_idx]
            repartitions = [s.repartition_sources[i].name for i in repartition_idx]
            source_counts = {t: count(t) for t in sources}
            if len(set(source_counts.values())) > 1:
                raise TopologyError(INCORRECTLY_PARTITIONED_TOPICS,
                                    "Following topics do not have the same number of partitions: "
                                    + _summary(f"{t}={c}" for t, c in source_counts.items()))
            fixed = {t: count(t) for t in repartitions if t not in flexible}
            if source_counts:
                target = next(iter(source_counts.values()))
            elif fixed:
                target = max(c for c in fixed.values() if c is not None)
            else:
                target = max((count(t) or 0) for t in repartitions) if repartitions else 0
            for t, c in fixed.items():
                if c != target:
                    raise TopologyError(INCORRECTLY_PARTITIONED_TOPICS,
                                        f"Number of partitions [{c}] of repartition topic [{t}] doesn't match "
                                        f"number of partitions [{target}] of the source topic.")
            for t in repartitions:
                if t in flexible and target:
                    decided[t] = target


@dataclass
class TaskSets:
    active: set[Task] = field(default_factory=set)
    standby: set[Task] = field(default_factory=set)
    warmup: set[Task] = field(default_factory=set)

    def roles(self) -> tuple[set[Task], set[Task], set[Task]]:
        return self.active, self.standby, self.warmup

    def is_empty(self) -> bool:
        return not (self.active or self.standby or self.warmup)

    def copy(self) -> "TaskSets":
        return TaskSets(set(self.active), set(self.standby), set(self.warmup))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TaskSets) and self.roles() == other.roles()


@dataclass(eq=False)
class StreamsMember:
    member_id: str
    process_id: str = ""
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 300_000
    topology_epoch: int = -1
    user_endpoint: tuple[str, int] | None = None
    client_tags: dict[str, str] = field(default_factory=dict)
    task_offsets: list[tuple[str, int, int]] = field(default_factory=list)
    task_end_offsets: list[tuple[str, int, int]] = field(default_factory=list)
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: TaskSets = field(default_factory=TaskSets)
    pending_revocation: TaskSets = field(default_factory=TaskSets)
    session_timer: object | None = None
    rebalance_timer: object | None = None
    classic: None = None  # what code shared with consumer groups asks; a streams group has no classic member


@dataclass(eq=False)
class StreamsGroup(ConsumerGroup):
    """``target`` maps member id -> TaskSets here; ``members`` holds StreamsMembers."""

    topology: Topology | None = None
    configured: ConfiguredTopology | None = None
    configured_key: tuple | None = None  # (metadata version, topology epoch) `configured` was made from
    shutdown_requested_by: str | None = None
    standby_replicas: int = -1  # the `streams.num.standby.replicas` the target was computed with
    # while set (a clock in ms): the group's first assignment waits for `streams.initial.rebalance.delay.ms`,
    # every member's target is empty and the heartbeats say ASSIGNMENT_DELAYED, as in Kafka
    assignment_delayed_until_ms: int | None = None
    # moves when a member's endpoint (`application.server`) or the tasks behind one change; in memory only,
    # as in Kafka: after a restore members see a new epoch 0 and ask again
    endpoint_information_epoch: int = 0
    protocol_type: str = "streams"

    @property
    def state(self) -> StreamsGroupState:  # type: ignore[override]
        if self.deleted:
            return StreamsGroupState.DEAD
        if not self.members:
            return StreamsGroupState.EMPTY
        if self.topology is None or self.configured is None or not self.configured.ready:
            return StreamsGroupState.NOT_READY
        if self.group_epoch > self.assignment_epoch:
            return StreamsGroupState.ASSIGNING
        for m in self.members.values():
            if m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE:
                return StreamsGroupState.RECONCILING
        return StreamsGroupState.STABLE

    def subscribed_topics(self) -> set[str]:
        if self.topology is None:
            return set()
        return {t for s in self.topology.subtopologies for t in s.source_topics} | self.topology.internal_topics()

    def reconcile(self, member: StreamsMember, owned: TaskSets | None) -> None:  # type: ignore[override]
        """One step of ``member`` towards its target (``owned``: what its heartbeat reports, None if not)."""
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            if owned is None or _overlaps(owned, member.pending_revocation):
                return
        elif member.state is MemberState.STABLE and member.member_epoch == self.assignment_epoch:
            return
        target = self.target.get(member.member_id) or TaskSets()
        current = member.assigned  # what it was told to revoke is gone (or was never asked for)
        kept, revoke, add = TaskSets(), TaskSets(), TaskSets()
        unreleased = False
        for i, role in enumerate(ROLES):
            cur, want = current.roles()[i], target.roles()[i]
            kept.roles()[i].update(cur & want)
            revoke.roles()[i].update(cur - want)
            for task in want - cur:
                if self._unreleased(member, role, task):
                    unreleased = True
                else:
                    add.roles()[i].add(task)
        if not revoke.is_empty() and (owned is None or _overlaps(owned, revoke)):
            member.assigned, member.pending_revocation = kept, revoke
            member.state = MemberState.UNREVOKED_PARTITIONS
            return
        member.assigned = TaskSets(kept.active | add.active, kept.standby | add.standby, kept.warmup | add.warmup)
        member.pending_revocation = TaskSets()
        if member.member_epoch != self.assignment_epoch:
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = self.assignment_epoch
        member.state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE

    def _unreleased(self, member: StreamsMember, role: str, task: Task) -> bool:
        """Kafka's rule: an active task waits for any other owner to release it; any task waits until no
        member of this member's process holds it in another role."""
        for other in self.members.values():
            if other is member:
                continue
            same_process = other.process_id == member.process_id
            for i, other_role in enumerate(ROLES):
                held = task in other.assigned.roles()[i] or task in other.pending_revocation.roles()[i]
                if not held:
                    continue
                if role == "active" and other_role == "active":
                    return True
                if same_process:
                    return True
        return False


def _overlaps(a: TaskSets, b: TaskSets) -> bool:
    return any(x & y for x, y in zip(a.roles(), b.roles()))
