"""The state of one group of the consumer group protocol (KIP-848): epochs, members, target assignment.

Three epochs drive it:

* the *group epoch* goes up on every change that can alter the assignment: a member joins or leaves, a
  subscription changes, a subscribed topic appears or gains partitions;
* the *assignment epoch* is the group epoch the *target assignment* was computed at (by the assignor, on
  the first heartbeat after the group epoch moved);
* each member's *member epoch* is the assignment epoch it has caught up with.

A member moves towards its target in steps, each answered in a heartbeat (Kafka's CurrentAssignmentBuilder):

    STABLE --target moved--> (partitions to give up?) --yes--> UNREVOKED_PARTITIONS: assigned = kept
                                                                  | (epoch unchanged) until a heartbeat
                                                                  | reports none of them owned
                               --no--> assigned = kept + new free partitions, epoch = assignment epoch:
                                       UNRELEASED_PARTITIONS while some new ones are still owned by
                                       another member (rechecked on every heartbeat), else STABLE

so a partition is never owned by two members at once: it is handed out only after its previous owner
reported it revoked (or left). Members that keep their partitions are not interrupted by a rebalance.

Group state (as Kafka reports it): Empty (no members), Assigning (group epoch > assignment epoch),
Reconciling (some member not yet at the assignment epoch or not STABLE), Stable; Dead once deleted.

This module holds state and computes steps; `ConsumerGroupCoordinator` applies them, runs the timers and
answers the heartbeats. Not thread-safe; owned by the event loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from odradek.coordinator.assignors import Assignment, TopicId

TopicPartition = tuple[TopicId, int]


class ConsumerGroupState(str, Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class MemberState(str, Enum):
    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


LEAVE_EPOCH = -1  # a member leaving for good
STATIC_LEAVE_EPOCH = -2  # a static member going away for now: its assignment waits for its return


def flatten(assignment: Assignment) -> set[TopicPartition]:
    return {(t, p) for t, ps in assignment.items() for p in ps}


def grouped(partitions: set[TopicPartition]) -> Assignment:
    out: dict[TopicId, set[int]] = {}
    for t, p in partitions:
        out.setdefault(t, set()).add(p)
    return {t: frozenset(ps) for t, ps in out.items()}


@dataclass(eq=False)
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 300_000
    subscribed_names: tuple[str, ...] = ()
    subscribed_regex: str | None = None
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: set[TopicPartition] = field(default_factory=set)
    pending_revocation: set[TopicPartition] = field(default_factory=set)
    session_timer: object | None = None
    rebalance_timer: object | None = None
    # a member that uses the classic protocol (JoinGroup): its classic_members.ClassicMetadata, else None
    classic: object | None = None

    @property
    def owned(self) -> set[TopicPartition]:
        """What nobody else may be given yet: the assigned partitions and those it has still to revoke."""
        return self.assigned | self.pending_revocation


@dataclass(eq=False)
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    target: dict[str, set[TopicPartition]] = field(default_factory=dict)  # member id -> target partitions
    # topic name -> (id, partitions) of every topic some member subscribes to (None: no such topic yet)
    subscription_metadata: dict[str, tuple[TopicId, int] | None] = field(default_factory=dict)
    deleted: bool = False
    state_timestamp_ms: int = -1
    stored: bytes | None = None  # the value last written to __consumer_offsets (persistence.py)
    topics_key: tuple | None = None  # (metadata version, names, regexes) subscription_metadata was made from
    replaces_classic: bool = False  # it took the name of an empty classic group, whose record must go
    # classic-group look-alike fields read by code shared with classic groups (offsets, listing, expiry)
    protocol_type: str = "consumer"
    pending_members: dict[str, int] = field(default_factory=dict)

    @property
    def state(self) -> ConsumerGroupState:
        if self.deleted:
            return ConsumerGroupState.DEAD
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for m in self.members.values():
            if m.member_epoch != self.assignment_epoch or m.state is not MemberState.STABLE:
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def is_(self, *states: str) -> bool:
        value = self.state.value
        return any(getattr(s, "value", s) == value for s in states)

    def transition(self, state: str, now_ms: int) -> None:
        """Only Dead is set from outside (the group was deleted); the others follow from the epochs."""
        if getattr(state, "value", state) == ConsumerGroupState.DEAD.value:
            self.deleted = True
        self.state_timestamp_ms = now_ms

    @property
    def generation(self) -> int:
        return self.group_epoch

    def owner(self, tp: TopicPartition, other_than: ConsumerMember) -> ConsumerMember | None:
        for m in self.members.values():
            if m is not other_than and tp in m.owned:
                return m
        return None

    def owned_by_others(self, member: ConsumerMember) -> set[TopicPartition]:
        out: set[TopicPartition] = set()
        for m in self.members.values():
            if m is not member:
                out |= m.owned
        return out

    def subscribed_topics(self) -> set[str]:
        """Topic names some member subscribes to (regexes resolved at the last target computation)."""
        names: set[str] = set()
        for m in self.members.values():
            names.update(m.subscribed_names)
        names.update(self.subscription_metadata)
        return names

    def add(self, member: ConsumerMember) -> None:
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id

    def remove(self, member_id: str) -> ConsumerMember | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        self.target.pop(member_id, None)
        return member

    def reconcile(self, member: ConsumerMember, owned: set[TopicPartition] | None) -> None:
        """One step of `member` towards its target; ``owned`` is what its heartbeat says it holds (None:
        the heartbeat did not say)."""
        target = self.target.get(member.member_id, set())
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            if owned is None or owned & member.pending_revocation:
                return  # still revoking
            member.pending_revocation = set()
            member.state = MemberState.STABLE  # then take the next step below, from the kept partitions
        if member.member_epoch == self.assignment_epoch and member.state is MemberState.STABLE:
            return
        revoke = member.assigned - target
        kept = member.assigned & target
        if revoke:
            member.assigned = kept
            member.pending_revocation = revoke
            member.state = MemberState.UNREVOKED_PARTITIONS
            return
        others = self.owned_by_others(member)
        wanted = target - kept
        free = wanted - others
        member.assigned = kept | free
        if member.member_epoch != self.assignment_epoch:
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = self.assignment_epoch
        member.state = MemberState.UNRELEASED_PARTITIONS if wanted - free else MemberState.STABLE
