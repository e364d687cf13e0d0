"""The state of one classic consumer group: members, generation, chosen protocol, leader.

States (Kafka's classic protocol)::

    Empty --join--> PreparingRebalance --all rejoined / timeout--> CompletingRebalance --leader sync--> Stable
      ^                    ^  |                                          |                               |
      |                    |  +--no members left--> Empty                +--member change---------------+
      +-- all members gone-+--------------------------------------------- join / leave / expiry --------+
    any --delete / expiry of an empty group--> Dead

This module only holds state and answers questions about it; the transitions and the long-poll futures
are driven by `GroupCoordinator`.

Not thread-safe; owned by the event loop.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from enum import Enum

from odradek.protocol import codec


class GroupState(str, Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


@dataclass(eq=False)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]  # (name, metadata) in the member's order of preference
    assignment: bytes = b""
    join_future: asyncio.Future | None = None  # pending JoinGroup response
    sync_future: asyncio.Future | None = None  # pending SyncGroup response
    session_deadline_ms: int = 0
    session_timer: object | None = None
    synced_generation: int = -1  # the last generation this member sent SyncGroup in

    @property
    def awaiting_join(self) -> bool:
        return self.join_future is not None and not self.join_future.done()

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata_for(self, protocol: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    def same_protocols(self, protocols: list[tuple[str, bytes]]) -> bool:
        return [(n, bytes(m)) for n, m in self.protocols] == [(n, bytes(m)) for n, m in protocols]


@dataclass(eq=False)
class Group:
    group_id: str
    state: GroupState = GroupState.EMPTY
    generation: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)  # in join order (the first is the default leader)
    static_members: dict[str, str] = field(default_factory=dict)  # group.instance.id -> member id
    pending_members: dict[str, int] = field(default_factory=dict)  # MEMBER_ID_REQUIRED ids -> expiry ms
    state_timestamp_ms: int = -1
    # rebalance bookkeeping
    rebalance_timer: object | None = None
    rebalance_deadline_ms: int = 0
    initial_delay_until_ms: int = 0  # >0 while the initial (from Empty) delay runs
    last_join_ms: int = 0

    def transition(self, state: GroupState, now_ms: int) -> None:
        self.state = state
        self.state_timestamp_ms = now_ms

    def is_(self, *states: GroupState) -> bool:
        return self.state in states

    @property
    def is_empty(self) -> bool:
        return not self.members

    def add(self, member: Member) -> None:
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id
        if self.protocol_type is None or len(self.members) == 1:
            self.protocol_type = member.protocol_type

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def replace_member_id(self, member: Member, new_id: str) -> None:
        """Static membership: the same instance comes back under a new member id (order kept)."""
        old_id = member.member_id
        self.members = {(new_id if k == old_id else k): v for k, v in self.members.items()}
        member.member_id = new_id
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id

    def supports_protocols(self, protocol_type: str, names: list[str]) -> bool:
        if not protocol_type or not names:
            return False
        if not self.members:
            return True
        if protocol_type != self.protocol_type:
            return False
        return bool(self.candidate_protocols() & set(names))

    def candidate_protocols(self, members: list[Member] | None = None) -> set[str]:
        members = list(self.members.values()) if members is None else members
        if not members:
            return set()
        out = set(members[0].protocol_names())
        for m in members[1:]:
            out &= set(m.protocol_names())
        return out

    def select_protocol(self) -> str | None:
        """The protocol every member supports with the most first-choice votes (ties: the leader's order)."""
        members = list(self.members.values())
        candidates = self.candidate_protocols(members)
        if not candidates:
            return None
        votes: dict[str, int] = {}
        for m in members:
            choice = next(n for n in m.protocol_names() if n in candidates)
            votes[choice] = votes.get(choice, 0) + 1
        leader = self.members.get(self.leader_id or "") or members[0]
        order = [n for n in leader.protocol_names() if n in candidates]
        return max(order, key=lambda n: (votes.get(n, 0), -order.index(n)))

    def all_members_joined(self) -> bool:
        return bool(self.members) and all(m.awaiting_join for m in self.members.values()) and not self.pending_members

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to (consumer protocol only); None when it cannot be known."""
        if self.protocol_type != "consumer" or self.protocol_name is None:
            return None
        topics: set[str] = set()
        for m in self.members.values():
            raw = m.metadata_for(self.protocol_name)
            if len(raw) < 2:
                continue
            version = min(int.from_bytes(raw[:2], "big", signed=True), 3)
            try:
                sub = codec.decode_struct("ConsumerProtocolSubscription", max(version, 0), memoryview(raw)[2:])
            except codec.ProtocolError:
                return None
            topics.update(sub["topics"])
        return topics
