"""Classic members of consumer groups: KIP-848's online migration between the two group protocols.

Kafka 4.x (`group.consumer.migration.policy`, bidirectional by default) lets a running group change protocol
without stopping it, and so does odradek:

* Upgrade: a ConsumerGroupHeartbeat joining a live classic group whose members use the consumer embedded
  protocol (`protocol_type` "consumer") turns it into a consumer group (`upgrade`). Every classic member
  becomes a consumer group member that keeps the classic protocol: its epoch is the classic generation, its
  assignment and target the partitions the classic leader gave it, its subscription the one in its JoinGroup
  metadata. The group epoch is the generation, so the joining member's subscription bumps it and a target
  assignment for everyone is computed. Pending JoinGroup/SyncGroup answers get REBALANCE_IN_PROGRESS. A
  group that does not use the consumer protocol, or whose metadata does not decode, stays classic: the
  heartbeat gets GROUP_ID_NOT_FOUND, as in Kafka.
* While the group is a consumer group, its classic members go on with JoinGroup, SyncGroup, Heartbeat and
  LeaveGroup, answered from the consumer group's state as Kafka does: JoinGroup updates the member's
  subscription and takes a reconciliation step with the partitions its metadata says it owns, and is
  answered at once (the member's epoch as generation, no leader, no member list: the coordinator assigns);
  SyncGroup returns the member's assigned partitions (ConsumerProtocolAssignment, in the version of its
  metadata); Heartbeat answers REBALANCE_IN_PROGRESS when the member must rejoin (its epoch is behind the
  group's, it has partitions to revoke, or partitions it waited for are free). Their sessions use the
  session timeout of their JoinGroup. Their offset commits are checked against their epoch as a generation
  (ILLEGAL_GENERATION), consumer_groups.check_commit.
* Downgrade: when the last member using the consumer protocol leaves (or is removed) and classic members
  remain, the group becomes a classic group again (`downgrade`): generation = group epoch, each member's
  assignment encoded as the classic leader would have, then a rebalance is prepared so that the members
  rejoin through the classic protocol.

Gaps: a classic member's protocol metadata is not in the stored consumer group record (persistence.py), so
after a coordinator move or restart a classic member of a consumer group is unknown and rejoins; a static
classic member that comes back under a new member id is treated as a new member (its instance id taken over).

Not thread-safe; owned by the event loop.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from odradek.coordinator.consumer_group import ConsumerGroup, ConsumerMember, MemberState
from odradek.coordinator.group import Group, GroupState, Member
from odradek.coordinator.persistence import consumer_group_key
from odradek.protocol import codec
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.coordinator.consumer_groups import ConsumerGroupCoordinator
    from odradek.coordinator.group_coordinator import JoinRequest

log = logging.getLogger(__name__)

CONSUMER_PROTOCOL = "consumer"
TopicPartition = tuple[bytes, int]


@dataclass
class ClassicMetadata:
    """What a member using the classic protocol gave in its JoinGroup."""

    session_timeout_ms: int
    protocols: list[tuple[str, bytes]]  # (name, metadata), in the member's order of preference


def _version(raw: bytes) -> int:
    if len(raw) < 2:
        raise ValueError("no version")
    return int.from_bytes(raw[:2], "big", signed=True)


def decode_subscription(raw: bytes) -> dict:
    """ConsumerProtocolSubscription (int16 version, then the struct); ValueError when it does not decode."""
    version = _version(raw)
    if version < 0:
        raise ValueError(f"version {version}")
    try:
        return codec.decode_struct("ConsumerProtocolSubscription", min(version, 3), memoryview(raw)[2:])
    except codec.ProtocolError as exc:
        raise ValueError(str(exc)) from None


def decode_assignment(raw: bytes) -> list[tuple[str, list[int]]]:
    """(topic, partitions) of a ConsumerProtocolAssignment; an empty assignment is no partitions."""
    if len(raw) < 2:
        return []
    version = _version(raw)
    if version < 0:
        raise ValueError(f"version {version}")
    try:
        value = codec.decode_struct("ConsumerProtocolAssignment", min(version, 3), memoryview(raw)[2:])
    except codec.ProtocolError as exc:
        raise ValueError(str(exc)) from None
    return [(tp["topic"], list(tp["partitions"])) for tp in value["assigned_partitions"]]


def encode_assignment(version: int, partitions: dict[str, list[int]]) -> bytes:
    version = max(0, min(version, 3))
    body = codec.encode_struct("ConsumerProtocolAssignment", version, {
        "assigned_partitions": [{"topic": t, "partitions": sorted(ps)} for t, ps in sorted(partitions.items())],
        "user_data": None})
    return version.to_bytes(2, "big", signed=True) + body


def _join_answer(error: int, member_id: str = "", generation: int = -1, protocol: str | None = None) -> dict:
    return {"error_code": error, "generation_id": generation, "protocol_type": CONSUMER_PROTOCOL if protocol else None,
            "protocol_name": protocol, "leader": "", "member_id": member_id, "members": [], "skip_assignment": False}


def _sync_answer(error: int, protocol: str | None = None, assignment: bytes = b"") -> dict:
    return {"error_code": error, "protocol_type": CONSUMER_PROTOCOL if protocol else None, "protocol_name": protocol,
            "assignment": assignment}


class ClassicMembers:
    """Answers classic-protocol requests of consumer groups' classic members, and converts groups between the
    protocols (see the module docstring)."""

    def __init__(self, consumer: "ConsumerGroupCoordinator") -> None:
        self.consumer = consumer

    @property
    def classic(self):
        return self.consumer.classic

    # ----------------------------------------------------------------------------------------- topics

    def _ids(self, partitions) -> set[TopicPartition]:
        """(topic id, partition) of (topic name, partitions) pairs; unknown topics are left out."""
        out: set[TopicPartition] = set()
        metadata = self.consumer.metadata
        for name, parts in partitions:
            topic = metadata.topic(name) if metadata is not None else None
            if topic is not None:
                out.update((topic.topic_id, p) for p in parts)
        return out

    def _names(self, partitions: set[TopicPartition]) -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        metadata = self.consumer.metadata
        for topic_id, p in partitions:
            topic = metadata.topic_by_id(topic_id) if metadata is not None else None
            if topic is not None:
                out.setdefault(topic.name, []).append(p)
        return out

    def _assignment(self, member: ConsumerMember) -> bytes:
        assert member.classic is not None
        try:
            version = _version(member.classic.protocols[0][1])
        except ValueError:
            version = 0
        return encode_assignment(version, self._names(member.assigned))

    # ----------------------------------------------------------------------------------------- upgrade

    def upgrade(self, group: Group) -> ConsumerGroup | None:
        """The live classic ``group`` as a consumer group (put in its place), or None when it cannot be."""
        if group.protocol_type != CONSUMER_PROTOCOL or len(group.members) > self.consumer.config.max_size:
            return None
        converted = ConsumerGroup(group.group_id, group_epoch=group.generation, assignment_epoch=group.generation,
                                  state_timestamp_ms=self.consumer._now(), replaces_classic=True)
        try:
            for m in group.members.values():
                raw = m.metadata_for(group.protocol_name) if group.protocol_name else m.protocols[0][1]
                subscription = decode_subscription(raw)
                assigned = self._ids(decode_assignment(m.assignment))
                member = ConsumerMember(m.member_id, instance_id=m.group_instance_id, client_id=m.client_id,
                                        client_host=m.client_host, rebalance_timeout_ms=m.rebalance_timeout_ms,
                                        subscribed_names=tuple(sorted(subscription["topics"])),
                                        member_epoch=group.generation, previous_member_epoch=group.generation,
                                        assigned=assigned)
                member.classic = ClassicMetadata(m.session_timeout_ms, list(m.protocols))
                converted.add(member)
                converted.target[member.member_id] = set(assigned)
        except (ValueError, IndexError) as exc:
            log.info("group %s: cannot upgrade the classic group: its consumer protocol is malformed (%s)",
                     group.group_id, exc)
            return None
        self.consumer._refresh_topics(converted)  # the subscriptions' topics, as of the classic generation
        converted.group_epoch = group.generation
        self.classic._stop(group, ErrorCode.REBALANCE_IN_PROGRESS)  # pending joins and syncs: rejoin
        self.classic.groups[group.group_id] = converted
        for member in converted.members.values():
            self.consumer._touch(converted, member)
        log.info("group %s: live classic group of %d members becomes a consumer group (generation %d)",
                 group.group_id, len(converted.members), group.generation)
        return converted

    # ----------------------------------------------------------------------------------------- downgrade

    def maybe_downgrade(self, group: ConsumerGroup) -> bool:
        """After a member left: when only classic members remain, the group becomes classic again."""
        if not group.members or any(m.classic is None for m in group.members.values()):
            return False
        if len(group.members) > self.classic.config.max_size or self.classic.groups.get(group.group_id) is not group:
            return False
        classic = Group(group.group_id, generation=group.group_epoch, protocol_type=CONSUMER_PROTOCOL)
        for m in group.members.values():
            assert m.classic is not None
            self.consumer._cancel_timers(m)
            classic.add(Member(m.member_id, m.instance_id, m.client_id, m.client_host, m.classic.session_timeout_ms,
                               m.rebalance_timeout_ms, CONSUMER_PROTOCOL, list(m.classic.protocols),
                               assignment=self._assignment(m)))
        classic.protocol_name = classic.select_protocol()
        now = self.consumer._now()
        classic.transition(GroupState.STABLE, now)
        self.classic.groups[group.group_id] = classic
        try:
            self.classic._persist(group.group_id, [(consumer_group_key(group.group_id), None)])
            self.classic._write_group(classic)
        except Exception as exc:  # the partition moved or storage failed: the rebalance writes it again
            log.warning("group %s: cannot store its downgrade: %s", group.group_id, exc)
        for member in classic.members.values():
            self.classic.touch_member(classic, member)
        log.info("group %s: the last consumer-protocol member left; classic group again (generation %d)",
                 group.group_id, classic.generation)
        self.classic._prepare_rebalance(classic, f"Downgrade group {group.group_id} from consumer to classic.")
        return True

    # ----------------------------------------------------------------------------------------- requests

    def _member(self, group: ConsumerGroup, member_id: str, instance: str | None) -> tuple[int, ConsumerMember | None]:
        if instance is not None:
            known = group.static_members.get(instance)
            if known is None:
                return ErrorCode.UNKNOWN_MEMBER_ID, None
            if member_id and known != member_id:
                return ErrorCode.FENCED_INSTANCE_ID, None
            member_id = known
        member = group.members.get(member_id)
        if member is None or member.classic is None:  # Kafka: "does not use the classic protocol"
            return ErrorCode.UNKNOWN_MEMBER_ID, None
        return 0, member

    def must_rejoin(self, group: ConsumerGroup, member: ConsumerMember) -> bool:
        """Kafka's condition for REBALANCE_IN_PROGRESS to a classic member's heartbeat."""
        if member.member_epoch < group.group_epoch or member.state is MemberState.UNREVOKED_PARTITIONS:
            return True
        if member.state is MemberState.UNRELEASED_PARTITIONS:
            missing = group.target.get(member.member_id, set()) - member.assigned
            return not missing & group.owned_by_others(member)  # what it waited for is free now
        return False

    def join(self, group: ConsumerGroup, req: "JoinRequest") -> dict:
        """A classic member's JoinGroup to a consumer group, answered at once."""
        if req.protocol_type != CONSUMER_PROTOCOL or not req.protocols:
            return _join_answer(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, req.member_id)
        names = {n for n, _ in req.protocols}
        for other in group.members.values():
            if other.classic is not None and other.member_id != req.member_id \
                    and not names & {n for n, _ in other.classic.protocols}:
                return _join_answer(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, req.member_id)
        try:
            subscription = decode_subscription(req.protocols[0][1])
        except ValueError:
            return _join_answer(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, req.member_id)
        member_id = req.member_id
        if not member_id:
            member_id = str(uuid.uuid4())
            if req.require_known_member and req.group_instance_id is None:
                return _join_answer(ErrorCode.MEMBER_ID_REQUIRED, member_id)
        member = group.members.get(member_id)
        new = False
        if req.group_instance_id is not None:
            known = group.static_members.get(req.group_instance_id)
            if known is not None and known != member_id:
                if req.member_id:
                    return _join_answer(ErrorCode.FENCED_INSTANCE_ID, req.member_id)
                previous = group.members[known]  # the instance is back under a new id: it takes the old place
                self.consumer._cancel_timers(previous)
                group.remove(known)
                group.target.pop(known, None)
                group.group_epoch += 1
        if member is None:  # Kafka creates a classic member under the id it asks for (MEMBER_ID_REQUIRED)
            if len(group.members) >= self.consumer.config.max_size:
                return _join_answer(ErrorCode.GROUP_MAX_SIZE_REACHED, member_id)
            member = ConsumerMember(member_id, instance_id=req.group_instance_id)
            group.add(member)
            new = True
        elif member.classic is None:
            return _join_answer(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
        member.classic = ClassicMetadata(req.session_timeout_ms, list(req.protocols))
        member.client_id, member.client_host = req.client_id, req.client_host
        member.rebalance_timeout_ms = req.rebalance_timeout_ms
        member.server_assignor = None
        if subscription.get("rack_id"):
            member.rack_id = subscription["rack_id"]
        topics = tuple(sorted(subscription["topics"]))
        epoch = group.group_epoch
        if new or topics != member.subscribed_names:
            member.subscribed_names = topics
            group.group_epoch += 1
        self.consumer._refresh_topics(group)
        group.group_epoch = min(group.group_epoch, epoch + 1)  # one bump per request, as in Kafka
        if group.group_epoch > group.assignment_epoch:
            self.consumer._assign(group)
        owned = self._ids((tp["topic"], tp["partitions"]) for tp in subscription.get("owned_partitions") or ())
        group.reconcile(member, owned)
        if member.state is MemberState.UNREVOKED_PARTITIONS and not owned & member.pending_revocation:
            group.reconcile(member, owned)  # it holds none of them any more (an eager member revoked all)
        if member.state is MemberState.UNREVOKED_PARTITIONS:
            self.consumer._arm_rebalance_timeout(group, member)
        self.consumer._touch(group, member)
        self.consumer._store(group)
        return _join_answer(0, member_id, member.member_epoch, req.protocols[0][0])

    def sync(self, group: ConsumerGroup, generation: int, member_id: str, instance: str | None,
             protocol_type: str | None, protocol_name: str | None) -> dict:
        error, member = self._member(group, member_id, instance)
        if member is None:
            return _sync_answer(error)
        assert member.classic is not None
        if generation != member.member_epoch:
            return _sync_answer(ErrorCode.ILLEGAL_GENERATION)
        protocol = member.classic.protocols[0][0]
        if (protocol_type is not None and protocol_type != CONSUMER_PROTOCOL) or \
                (protocol_name is not None and protocol_name != protocol):
            return _sync_answer(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        if group.group_epoch > member.member_epoch and member.state is not MemberState.UNREVOKED_PARTITIONS:
            return _sync_answer(ErrorCode.REBALANCE_IN_PROGRESS)
        self.consumer._touch(group, member)
        return _sync_answer(0, protocol, self._assignment(member))

    def heartbeat(self, group: ConsumerGroup, generation: int, member_id: str, instance: str | None) -> int:
        error, member = self._member(group, member_id, instance)
        if member is None:
            return error
        if generation != member.member_epoch:
            return ErrorCode.ILLEGAL_GENERATION
        self.consumer._touch(group, member)
        return ErrorCode.REBALANCE_IN_PROGRESS if self.must_rejoin(group, member) else 0

    def leave(self, group: ConsumerGroup, members: list[tuple[str, str | None]]) -> list[int]:
        errors: list[int] = []
        for member_id, instance in members:
            error, member = self._member(group, member_id, instance)
            if member is None:
                errors.append(error)
                continue
            log.info("group %s: classic member %s left", group.group_id, member.member_id)
            self.consumer._remove(group, member)
            errors.append(0)
        if self.classic.groups.get(group.group_id) is group:
            self.consumer._store(group)
        return errors
