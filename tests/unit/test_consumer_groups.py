"""The consumer group protocol (KIP-848) in the coordinator, driven in virtual time: assignors, member epochs,
revocation before reassignment, timeouts, static members and offset commit checks.

The end-to-end behaviour with real clients is in tests/interop/test_consumer_protocol.py; the answers
compared with Apache Kafka's in tests/reference.
"""

from __future__ import annotations

import random
import uuid

import pytest

from odradek.cluster.topics import Topic
from odradek.coordinator.assignors import AssignorMember, range_, uniform
from odradek.coordinator.consumer_group import ConsumerGroup, MemberState
from odradek.coordinator.consumer_groups import ConsumerGroupConfig, ConsumerGroupCoordinator, HeartbeatRequest
from odradek.coordinator.group_coordinator import GroupConfig, GroupCoordinator
from odradek.coordinator.timers import FakeScheduler
from odradek.protocol.errors import ErrorCode

SESSION_MS = 10_000


class Topics:
    """The part of MetadataCache the coordinator reads."""

    def __init__(self) -> None:
        self.by_name: dict[str, Topic] = {}

    def add(self, name: str, partitions: int) -> bytes:
        topic = Topic(name, uuid.uuid4().bytes, partitions)
        self.by_name[name] = topic
        return topic.topic_id

    def topic(self, name: str) -> Topic | None:
        return self.by_name.get(name)

    def all_topics(self) -> list[Topic]:
        return list(self.by_name.values())


class Harness:
    def __init__(self, assignors: tuple[str, ...] = ("uniform", "range")) -> None:
        self.scheduler = FakeScheduler()
        self.topics = Topics()
        self.classic = GroupCoordinator(GroupConfig(), self.scheduler, lambda *a: None)  # type: ignore[arg-type]
        self.coordinator = ConsumerGroupCoordinator(
            ConsumerGroupConfig(session_timeout_ms=SESSION_MS, heartbeat_interval_ms=500, assignors=assignors),
            self.classic, self.topics)  # type: ignore[arg-type]
        self.epochs: dict[str, int] = {}
        self.owned: dict[str, set[tuple[bytes, int]]] = {}  # what each client holds, as a client would

    def join(self, member: str, topics: list[str] | None = None, regex: str | None = None, group: str = "g",
             instance: str | None = None, assignor: str | None = None) -> dict:
        body = self.coordinator.heartbeat(HeartbeatRequest(
            group, member, 0, instance_id=instance, rebalance_timeout_ms=5000,
            subscribed_names=topics if topics is not None or regex is None else None, subscribed_regex=regex,
            server_assignor=assignor, owned=[]))
        self._apply(member, body)
        return body

    def beat(self, member: str, group: str = "g", report: bool = True, epoch: int | None = None) -> dict:
        owned = self.owned.get(member, set())
        by_topic: dict[bytes, list[int]] = {}
        for t, p in owned:
            by_topic.setdefault(t, []).append(p)
        body = self.coordinator.heartbeat(HeartbeatRequest(
            group, member, self.epochs[member] if epoch is None else epoch,
            owned=list(by_topic.items()) if report else None))
        self._apply(member, body)
        return body

    def _apply(self, member: str, body: dict) -> None:
        if body["error_code"] in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_MEMBER_EPOCH):
            self.owned.pop(member, None)  # a fenced client gives up what it holds
        if body["error_code"]:
            return
        self.epochs[member] = body["member_epoch"]
        if body["assignment"] is not None:
            self.owned[member] = {(t["topic_id"], p) for t in body["assignment"]["topic_partitions"]
                                  for p in t["partitions"]}

    def group(self, name: str = "g") -> ConsumerGroup:
        group = self.classic.groups[name]
        assert isinstance(group, ConsumerGroup)
        return group

    def settle(self, members: list[str], rounds: int = 10) -> None:
        """Everyone heartbeats (reporting what it holds) until the group is Stable."""
        for _ in range(rounds):
            for m in members:
                assert self.beat(m)["error_code"] == 0
                self.check_exclusive()
            if self.group().state.value == "Stable":
                return
        raise AssertionError(f"not stable after {rounds} rounds: {self.group().state}")

    def check_exclusive(self) -> None:
        """No partition is held by two clients at any moment."""
        seen: dict[tuple[bytes, int], str] = {}
        for m, parts in self.owned.items():
            for tp in parts:
                assert tp not in seen, f"{tp} held by {seen[tp]} and {m}"
                seen[tp] = m


# ------------------------------------------------------------------------------------------------ assignors


def _members(subs: dict[str, set[bytes]], current: dict[str, dict[bytes, frozenset[int]]] | None = None):
    current = current or {}
    return {m: AssignorMember(frozenset(s), current.get(m, {})) for m, s in subs.items()}


def _counts(result) -> list[int]:
    return sorted(sum(len(ps) for ps in a.values()) for a in result.values())


def _all(result) -> list[tuple[bytes, int]]:
    return sorted((t, p) for a in result.values() for t, ps in a.items() for p in ps)


def test_uniform_spreads_every_partition_once_and_evenly() -> None:
    t1, t2 = b"a" * 16, b"b" * 16
    topics = {t1: 7, t2: 3}
    result = uniform(_members({f"m{i}": {t1, t2} for i in range(4)}), topics)
    assert _all(result) == sorted([(t1, p) for p in range(7)] + [(t2, p) for p in range(3)])
    assert _counts(result) == [2, 2, 3, 3]


def test_uniform_is_sticky_when_a_member_joins() -> None:
    t = b"t" * 16
    before = uniform(_members({"m0": {t}, "m1": {t}}), {t: 12})
    current = {m: a for m, a in before.items()}
    after = uniform(_members({"m0": {t}, "m1": {t}, "m2": {t}}, current), {t: 12})
    assert _counts(after) == [4, 4, 4]
    for m in ("m0", "m1"):
        assert after[m][t] <= before[m][t]  # they only give up partitions; m2's 4 come from them
    moved = sum(len(before[m][t] - after[m][t]) for m in ("m0", "m1"))
    assert moved == 4


def test_uniform_with_different_subscriptions_balances_what_it_can() -> None:
    t1, t2 = b"a" * 16, b"b" * 16
    result = uniform(_members({"m0": {t1}, "m1": {t1, t2}, "m2": {t2}}), {t1: 4, t2: 4})
    assert _all(result) == sorted([(t1, p) for p in range(4)] + [(t2, p) for p in range(4)])
    assert all(t in ({t1} if m == "m0" else {t2} if m == "m2" else {t1, t2}) for m, a in result.items() for t in a)
    assert max(_counts(result)) - min(_counts(result)) <= 1


def test_uniform_random_subscriptions_assign_each_partition_to_one_subscriber() -> None:
    rng = random.Random(7)
    for _ in range(50):
        topics = {bytes([i]) * 16: rng.randint(1, 8) for i in range(rng.randint(1, 5))}
        subs = {f"m{i}": {t for t in topics if rng.random() < 0.6} for i in range(rng.randint(1, 6))}
        result = uniform(_members(subs), topics)
        subscribed = {t for s in subs.values() for t in s}
        assert _all(result) == sorted((t, p) for t in subscribed for p in range(topics[t]))
        for m, a in result.items():
            assert set(a) <= subs[m]


def test_range_gives_co_partitioned_ranges_in_member_order() -> None:
    t1, t2 = b"a" * 16, b"b" * 16
    result = range_(_members({"b": {t1, t2}, "a": {t1, t2}, "c": {t1, t2}}), {t1: 7, t2: 7})
    assert result["a"] == {t1: frozenset({0, 1, 2}), t2: frozenset({0, 1, 2})}
    assert result["b"] == {t1: frozenset({3, 4}), t2: frozenset({3, 4})}
    assert result["c"] == {t1: frozenset({5, 6}), t2: frozenset({5, 6})}


# ------------------------------------------------------------------------------------------------ heartbeats


def test_first_member_gets_every_partition_at_epoch_two() -> None:
    h = Harness()
    t = h.topics.add("t", 3)
    body = h.join("m1", ["t"])
    assert body["error_code"] == 0 and body["member_epoch"] == 2 and body["heartbeat_interval_ms"] == 500
    assert h.owned["m1"] == {(t, 0), (t, 1), (t, 2)}
    again = h.beat("m1")
    assert again["assignment"] is None and again["member_epoch"] == 2
    assert h.group().state.value == "Stable"


def test_partitions_move_only_after_their_owner_revoked_them() -> None:
    h = Harness()
    h.topics.add("t", 6)
    h.join("m1", ["t"])
    h.join("m2", ["t"])
    h.check_exclusive()
    assert h.owned["m2"] == set()  # everything is still m1's
    assert h.group().state.value == "Reconciling"
    h.beat("m1", report=False)  # told to give up three; it has not said it did
    assert len(h.owned["m1"]) == 3
    assert h.group().members["m1"].state is MemberState.UNREVOKED_PARTITIONS
    h.beat("m2")
    assert h.owned["m2"] == set()  # m1 has not reported the revocation yet
    h.beat("m1")  # reports it now owns only the three it kept
    assert h.group().members["m1"].state is MemberState.STABLE
    h.beat("m2")
    assert len(h.owned["m2"]) == 3
    h.check_exclusive()
    assert h.group().state.value == "Stable"
    assert h.epochs["m1"] == h.epochs["m2"] == h.group().assignment_epoch


def test_many_members_come_and_go_without_a_partition_held_twice() -> None:
    h = Harness()
    h.topics.add("a", 8)
    h.topics.add("b", 5)
    rng = random.Random(3)
    members: list[str] = []
    for step in range(40):
        if members and rng.random() < 0.3:
            gone = members.pop(rng.randrange(len(members)))
            assert h.coordinator.heartbeat(HeartbeatRequest("g", gone, -1))["member_epoch"] == -1
            h.owned.pop(gone)
        else:
            name = f"m{step}"
            members.append(name)
            assert h.join(name, ["a", "b"])["error_code"] == 0
        h.check_exclusive()
        for _ in range(rng.randint(0, 3)):
            if members:
                h.beat(rng.choice(members), report=rng.random() < 0.8)
                h.check_exclusive()
    if members:
        h.settle(members)
        held = sorted(tp for m in members for tp in h.owned[m])
        assert len(held) == 13
        counts = [len(h.owned[m]) for m in members]
        assert max(counts) - min(counts) <= 1


def test_new_topic_and_more_partitions_reach_the_members() -> None:
    h = Harness()
    h.topics.add("t", 2)
    h.join("m1", ["t", "later"])
    epoch = h.epochs["m1"]
    later = h.topics.add("later", 2)
    h.beat("m1")
    assert h.epochs["m1"] == epoch + 1
    assert {(later, 0), (later, 1)} <= h.owned["m1"]


def test_regex_subscription_matches_whole_names_and_skips_internal_topics() -> None:
    h = Harness()
    h.topics.add("orders-eu", 1)
    h.topics.add("orders-us", 1)
    h.topics.add("xorders-eu", 1)
    h.topics.add("__consumer_offsets", 3)
    body = h.join("m1", regex="orders-.*")
    assert body["error_code"] == 0
    names = {h.topics.by_name[n].topic_id: n for n in h.topics.by_name}
    assert {names[t] for t, _ in h.owned["m1"]} == {"orders-eu", "orders-us"}
    bad = h.coordinator.heartbeat(HeartbeatRequest("g", "m2", 0, rebalance_timeout_ms=1, subscribed_regex="[",
                                                   owned=[]))
    assert bad["error_code"] == ErrorCode.INVALID_REGULAR_EXPRESSION


def test_fenced_and_unknown_members() -> None:
    h = Harness()
    h.topics.add("t", 2)
    h.join("m1", ["t"])
    assert h.beat("m1", epoch=h.epochs["m1"] + 1)["error_code"] == ErrorCode.FENCED_MEMBER_EPOCH
    assert h.beat("m1", epoch=1)["error_code"] == ErrorCode.FENCED_MEMBER_EPOCH
    h.epochs["nobody"] = 3
    unknown = h.beat("nobody")
    assert unknown["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID
    assert unknown["error_message"] == "Member nobody is not a member of group g."
    assert unknown["member_id"] is None and unknown["member_epoch"] == 0


@pytest.mark.parametrize("change, message", [
    (dict(group_id=""), "GroupId can't be empty."),
    (dict(member_id=""), "MemberId can't be empty."),
    (dict(rebalance_timeout_ms=-1), "RebalanceTimeoutMs must be provided in first request."),
    (dict(owned=None), "TopicPartitions must be empty when (re-)joining."),
    (dict(subscribed_names=None), "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when "
                                  "(re-)joining."),
    (dict(member_epoch=-3), "MemberEpoch is invalid."),
])
def test_invalid_requests_are_refused_with_kafkas_messages(change: dict, message: str) -> None:
    h = Harness()
    fields = dict(group_id="g", member_id="m1", member_epoch=0, rebalance_timeout_ms=5000, subscribed_names=["t"],
                  owned=[])
    fields.update(change)
    body = h.coordinator.heartbeat(HeartbeatRequest(**fields))
    assert (body["error_code"], body["error_message"]) == (ErrorCode.INVALID_REQUEST, message)


def test_unsupported_assignor_and_range_choice() -> None:
    h = Harness()
    h.topics.add("t", 4)
    bad = h.join("m0", ["t"], assignor="sticky")
    assert bad["error_code"] == ErrorCode.UNSUPPORTED_ASSIGNOR
    assert bad["error_message"] == "ServerAssignor sticky is not supported. Supported assignors: uniform, range."
    h.join("a", ["t"], assignor="range")
    h.join("b", ["t"], assignor="range")
    h.settle(["a", "b"])
    assert {p for _, p in h.owned["a"]} == {0, 1} and {p for _, p in h.owned["b"]} == {2, 3}
    assert h.coordinator.assignor_for(h.group()) == "range"


def test_session_timeout_removes_a_silent_member_and_frees_its_partitions() -> None:
    h = Harness()
    h.topics.add("t", 4)
    h.join("m1", ["t"])
    h.join("m2", ["t"])
    h.settle(["m1", "m2"])
    for _ in range(int(SESSION_MS / 1000) + 1):
        h.scheduler.advance(1000)
        h.beat("m1")  # m2 is silent
    assert "m2" not in h.group().members
    h.owned.pop("m2")
    h.settle(["m1"])
    assert len(h.owned["m1"]) == 4


def test_a_member_that_does_not_revoke_is_fenced_after_its_rebalance_timeout() -> None:
    h = Harness()
    h.topics.add("t", 4)
    h.join("m1", ["t"])
    h.join("m2", ["t"])
    h.beat("m1", report=False)  # asked to revoke
    assert h.group().members["m1"].state is MemberState.UNREVOKED_PARTITIONS
    for _ in range(6):
        h.scheduler.advance(1000)
        h.beat("m2")
        if "m1" in h.group().members:
            h.beat("m1", report=False)  # alive, but never says it revoked
    assert "m1" not in h.group().members
    assert h.beat("m1", report=False)["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID
    h.settle(["m2"])
    assert len(h.owned["m2"]) == 4


def test_static_member_leaves_for_now_and_its_instance_takes_the_assignment_back() -> None:
    h = Harness()
    h.topics.add("t", 4)
    h.join("m1", ["t"], instance="i1")
    h.join("m2", ["t"], instance="i2")
    h.settle(["m1", "m2"])
    kept = set(h.owned["m1"])
    taken = h.join("m3", ["t"], instance="i1")
    assert taken["error_code"] == ErrorCode.UNRELEASED_INSTANCE_ID
    left = h.coordinator.heartbeat(HeartbeatRequest("g", "m1", -2, instance_id="i1"))
    assert (left["error_code"], left["member_epoch"]) == (0, -2)
    epoch = h.group().group_epoch
    back = h.join("m3", ["t"], instance="i1")
    assert back["error_code"] == 0 and h.owned["m3"] == kept
    assert h.group().group_epoch == epoch  # no rebalance
    unknown = h.coordinator.heartbeat(HeartbeatRequest("g", "m9", -2, instance_id="i9"))
    assert (unknown["error_code"], unknown["error_message"]) == (ErrorCode.UNKNOWN_MEMBER_ID, "Instance id i9 is unknown.")


def test_groups_of_both_protocols_share_names_only_when_empty() -> None:
    h = Harness()
    h.topics.add("t", 1)
    classic = h.classic.get_or_create("was-classic")  # offsets only: Empty
    assert classic.is_empty
    assert h.join("m1", ["t"], group="was-classic")["error_code"] == 0
    assert isinstance(h.classic.groups["was-classic"], ConsumerGroup)


def test_offset_commits_are_checked_against_the_member_epoch() -> None:
    h = Harness()
    h.topics.add("t", 1)
    h.join("m1", ["t"])
    group = h.group()
    epoch = h.epochs["m1"]
    check = ConsumerGroupCoordinator.check_commit
    assert check(group, "m1", epoch, 9) == 0
    assert check(group, "m1", epoch - 1, 9) == ErrorCode.STALE_MEMBER_EPOCH
    assert check(group, "m1", epoch + 1, 9) == ErrorCode.STALE_MEMBER_EPOCH
    assert check(group, "m1", epoch, 8) == ErrorCode.UNSUPPORTED_VERSION
    assert check(group, "", -1, 9) == ErrorCode.UNKNOWN_MEMBER_ID
    h.coordinator.heartbeat(HeartbeatRequest("g", "m1", -1))
    assert check(group, "", -1, 9) == 0


def test_group_state_survives_its_record_in_consumer_offsets() -> None:
    from odradek.coordinator.persistence import decode_consumer_group_value, encode_consumer_group_value

    h = Harness()
    h.topics.add("t", 5)
    h.topics.add("u", 1)
    h.join("m1", ["t", "missing"], instance="i1")
    h.join("m2", ["t", "u"], assignor="range")
    h.beat("m1", report=False)  # m1 now has partitions to revoke
    group = h.group()
    back = decode_consumer_group_value("g", encode_consumer_group_value(group))
    assert (back.group_epoch, back.assignment_epoch, back.subscription_metadata) == \
        (group.group_epoch, group.assignment_epoch, group.subscription_metadata)
    assert back.target == group.target
    for mid, m in group.members.items():
        b = back.members[mid]
        assert (b.instance_id, b.subscribed_names, b.server_assignor, b.member_epoch, b.previous_member_epoch,
                b.state, b.assigned, b.pending_revocation, b.rebalance_timeout_ms) == \
            (m.instance_id, m.subscribed_names, m.server_assignor, m.member_epoch, m.previous_member_epoch,
             m.state, m.assigned, m.pending_revocation, m.rebalance_timeout_ms)
    # a restored coordinator carries on where the old one stopped
    h2 = Harness()
    h2.topics = h.topics
    h2.coordinator.metadata = h.topics
    h2.coordinator.restore(back)
    h2.epochs, h2.owned = dict(h.epochs), {m: set(p) for m, p in h.owned.items()}
    h2.settle(["m1", "m2"])
    assert sorted(tp for parts in h2.owned.values() for tp in parts) == sorted(
        [(h.topics.by_name["t"].topic_id, p) for p in range(5)] + [(h.topics.by_name["u"].topic_id, 0)])
