"""The streams group protocol (KIP-1071) in the coordinator, driven in virtual time: the topology's
configuration (Kafka's partition-count rules for internal topics), the task assignor, reconciliation with
revocation before reassignment, session timeouts and the stored state's round trip.

End to end with Kafka Streams: tests/streams; compared with Apache Kafka 4.4: tests/reference/scenarios_streams.py.
"""

from __future__ import annotations

import uuid

from odradek.cluster.topics import Topic
from odradek.coordinator.consumer_group import MemberState
from odradek.coordinator.group_coordinator import GroupConfig, GroupCoordinator
from odradek.coordinator.streams_assignor import assign
from odradek.coordinator.streams_group import (
    INCORRECTLY_PARTITIONED_TOPICS, MISSING_INTERNAL_TOPICS, MISSING_SOURCE_TOPICS, StreamsGroup, StreamsMember,
    Subtopology, TaskSets, TopicInfo, Topology, configure)
from odradek.coordinator.streams_groups import StreamsGroupConfig, StreamsGroupCoordinator, StreamsHeartbeatRequest
from odradek.coordinator.streams_persistence import decode_streams_group_value, encode_streams_group_value
from odradek.coordinator.timers import FakeScheduler
from odradek.protocol.errors import ErrorCode

SESSION_MS = 10_000


class Topics:
    """The part of MetadataCache the coordinator reads; `version` moves when topics change."""

    def __init__(self) -> None:
        self.by_name: dict[str, Topic] = {}
        self.version = 0

    def add(self, name: str, partitions: int) -> None:
        self.by_name[name] = Topic(name, uuid.uuid4().bytes, partitions)
        self.version += 1

    def topic(self, name: str) -> Topic | None:
        return self.by_name.get(name)


def word_count(in_partitions_fixed: int = 0) -> Topology:
    """Kafka Streams' word count: 0 reads the input and writes the repartition topic, 1 reads it and counts."""
    return Topology(0, (
        Subtopology("0", ("in",), ("app-rp",)),
        Subtopology("1", (), (), (TopicInfo("app-cl"),), (TopicInfo("app-rp", in_partitions_fixed),)),
    ))


def counts(**topics: int):
    return lambda name: topics.get(name)


# ------------------------------------------------------------------------------------------- configuration

def test_missing_source_topic():
    c = configure(word_count(), counts())
    assert not c.ready and c.status == (MISSING_SOURCE_TOPICS, "Source topics in are missing.")


def test_internal_topics_take_the_upstream_partition_count():
    c = configure(word_count(), counts(**{"in": 6}))
    assert c.status[0] == MISSING_INTERNAL_TOPICS
    assert {t.name: t.partitions for t in c.to_create} == {"app-rp": 6, "app-cl": 6}
    assert c.tasks == {"0": 6, "1": 6}
    ready = configure(word_count(), counts(**{"in": 6, "app-rp": 6, "app-cl": 6}))
    assert ready.ready and len(ready.all_tasks()) == 12


def test_fixed_repartition_count_and_its_changelog():
    c = configure(word_count(in_partitions_fixed=3), counts(**{"in": 6}))
    assert {t.name: t.partitions for t in c.to_create} == {"app-rp": 3, "app-cl": 3}
    assert c.tasks == {"0": 6, "1": 3}


def test_existing_internal_topic_with_other_count():
    c = configure(word_count(), counts(**{"in": 6, "app-rp": 6, "app-cl": 2}))
    assert c.status == (INCORRECTLY_PARTITIONED_TOPICS,
                        "Existing topic app-cl has different number of partitions: expected 6, found 2")


def test_chained_repartitions():
    topo = Topology(0, (
        Subtopology("0", ("in",), ("rp1",)),
        Subtopology("1", (), ("rp2",), (), (TopicInfo("rp1"),)),
        Subtopology("2", (), (), (), (TopicInfo("rp2"),)),
    ))
    c = configure(topo, counts(**{"in": 5}))
    assert {t.name: t.partitions for t in c.to_create} == {"rp1": 5, "rp2": 5}


def test_copartitioned_sources_must_agree_and_repartition_topics_follow():
    join = Topology(0, (
        Subtopology("0", ("left",), ("rp",)),
        Subtopology("1", ("right",), (), (), (TopicInfo("rp"),), (((0,), (0,)),)),
    ))
    c = configure(join, counts(left=8, right=4))
    assert {t.name: t.partitions for t in c.to_create} == {"rp": 4}
    two = Topology(0, (Subtopology("0", ("a", "b"), (), (), (), (((0, 1), ()),)),))
    assert configure(two, counts(a=2, b=3)).status[0] == INCORRECTLY_PARTITIONED_TOPICS
    assert configure(two, counts(a=3, b=3)).ready


# ------------------------------------------------------------------------------------------------ assignor

def members(*specs: tuple[str, str]) -> dict[str, StreamsMember]:
    return {mid: StreamsMember(mid, process_id=pid) for mid, pid in specs}


def test_active_tasks_balanced_and_sticky():
    tasks = [(s, p) for s in ("0", "1") for p in range(4)]
    ms = members(("a", "p1"), ("b", "p2"))
    first = assign(ms, tasks, {}, 0)
    assert sorted(len(t.active) for t in first.values()) == [4, 4]
    assert first["a"].active.isdisjoint(first["b"].active) and first["a"].active | first["b"].active == set(tasks)
    ms.update(members(("c", "p3")))
    second = assign(ms, tasks, first, 0)
    assert sorted(len(t.active) for t in second.values()) == [2, 3, 3]
    for mid in ("a", "b"):
        assert second[mid].active <= first[mid].active  # nothing moves between the old members


def test_standby_on_another_process_only():
    tasks = [("0", p) for p in range(4)]
    same = assign(members(("a", "p1"), ("b", "p1")), tasks, {}, 1)
    assert all(not t.standby for t in same.values())  # one process: no standby anywhere
    two = assign(members(("a", "p1"), ("b", "p1"), ("c", "p2")), tasks, {}, 1)
    by_process = {"a": "p1", "b": "p1", "c": "p2"}
    for task in tasks:
        active = next(m for m, t in two.items() if task in t.active)
        standbys = [m for m, t in two.items() if task in t.standby]
        assert len(standbys) == 1 and by_process[standbys[0]] != by_process[active]


# ----------------------------------------------------------------------------------- coordinator, virtual time

class Harness:
    def __init__(self, standbys: int = 0) -> None:
        self.scheduler = FakeScheduler()
        self.topics = Topics()
        self.classic = GroupCoordinator(GroupConfig(), self.scheduler, lambda *a: None)  # type: ignore[arg-type]
        self.coordinator = StreamsGroupCoordinator(
            StreamsGroupConfig(session_timeout_ms=SESSION_MS, num_standby_replicas=standbys,
                               initial_rebalance_delay_ms=0), self.classic, self.topics)  # type: ignore[arg-type]
        self.held: dict[str, TaskSets] = {}

    def hb(self, member: str, epoch: int | None = None, report: bool = True, topology: Topology | None = None):
        if epoch is None:
            epoch = self.group().members[member].member_epoch
        join = epoch == 0
        owned = TaskSets() if join else (self.held.get(member, TaskSets()).copy() if report else None)
        result = self.coordinator.heartbeat(StreamsHeartbeatRequest(
            "g", member, epoch, rebalance_timeout_ms=5000 if join else -1,
            topology=(topology or word_count()) if join else None, owned=owned, process_id=f"p-{member}"))
        body = result.body
        if body["error_code"] == 0 and body["active_tasks"] is not None:
            self.held[member] = TaskSets(*({(t["subtopology_id"], p) for t in body[k] for p in t["partitions"]}
                                           for k in ("active_tasks", "standby_tasks", "warmup_tasks")))
        return result

    def group(self) -> StreamsGroup:
        return self.classic.groups["g"]  # type: ignore[return-value]


def test_tasks_only_once_the_internal_topics_exist():
    h = Harness()
    h.topics.add("in", 2)
    r = h.hb("m1", 0)
    assert {t.name for t in r.to_create} == {"app-rp", "app-cl"}
    assert r.body["active_tasks"] == [] and h.group().state.value == "NotReady"
    h.topics.add("app-rp", 2)
    h.topics.add("app-cl", 2)
    r = h.hb("m1")
    assert not r.to_create and h.held["m1"].active == {(s, p) for s in "01" for p in range(2)}
    assert h.hb("m1").body["status"] == [] and h.group().state.value == "Stable"


def test_revocation_before_reassignment_and_session_timeout():
    h = Harness(standbys=1)
    for name in ("in", "app-rp", "app-cl"):
        h.topics.add(name, 2)
    h.hb("m1", 0)
    h.hb("m1")
    all_tasks = {(s, p) for s in "01" for p in range(2)}
    assert h.held["m1"].active == all_tasks
    h.hb("m2", 0)
    assert h.held["m2"].active == set()
    h.hb("m1", report=False)
    m1 = h.group().members["m1"]
    assert m1.state is MemberState.UNREVOKED_PARTITIONS and len(h.held["m1"].active) == 2
    h.hb("m2")
    assert h.held["m2"].active == set()  # m1 has not reported the revocation yet
    h.hb("m1")  # now it has
    h.hb("m2")
    h.hb("m1")
    assert h.held["m1"].active | h.held["m2"].active == all_tasks
    assert h.held["m1"].standby == h.held["m2"].active and h.held["m2"].standby == h.held["m1"].active
    # a stale epoch is fenced, an epoch from the future too
    assert h.hb("m1", epoch=m1.member_epoch + 5).body["error_code"] == ErrorCode.FENCED_MEMBER_EPOCH
    # m2 goes silent: after the session timeout its tasks return to m1
    h.scheduler.advance(SESSION_MS - 1000)
    h.hb("m1")
    h.scheduler.advance(2000)
    assert "m2" not in h.group().members
    h.hb("m1")  # first it gives up its standby copies of the tasks it is to run (same process, other role)
    assert h.held["m1"].standby == set() and len(h.held["m1"].active) == 2
    h.hb("m1")
    assert h.held["m1"].active == all_tasks and h.held["m1"].standby == set()


def test_stored_state_round_trip():
    h = Harness(standbys=1)
    for name in ("in", "app-rp", "app-cl"):
        h.topics.add(name, 2)
    for m in ("m1", "m2"):
        h.hb(m, 0)
    for _ in range(4):
        for m in ("m1", "m2"):
            h.hb(m)
    group = h.group()
    raw = encode_streams_group_value(group)
    back = decode_streams_group_value("g", raw)
    assert encode_streams_group_value(back) == raw
    assert back.topology == group.topology and back.group_epoch == group.group_epoch
    assert {m: (x.member_epoch, x.assigned) for m, x in back.members.items()} == {
        m: (x.member_epoch, x.assigned) for m, x in group.members.items()}


def static_hb(h: Harness, member: str, epoch: int, instance: str = "i1", process: str = "p-static"):
    """A heartbeat of a static member (instance id), reporting the tasks it holds unless joining."""
    join = epoch == 0
    result = h.coordinator.heartbeat(StreamsHeartbeatRequest(
        "g", member, epoch, instance_id=instance, rebalance_timeout_ms=5000 if join else -1,
        topology=word_count() if join else None, owned=TaskSets() if join else h.held.get(member, TaskSets()).copy(),
        process_id=process))
    body = result.body
    if body["error_code"] == 0 and body["active_tasks"] is not None:
        h.held[member] = TaskSets(*({(t["subtopology_id"], p) for t in body[k] for p in t["partitions"]}
                                    for k in ("active_tasks", "standby_tasks", "warmup_tasks")))
    return body


def test_static_member_leaves_for_now_and_takes_its_tasks_back():
    h = Harness()
    for name in ("in", "app-rp", "app-cl"):
        h.topics.add(name, 2)
    static_hb(h, "s1", 0)
    h.hb("m2", 0)
    for _ in range(4):
        static_hb(h, "s1", h.group().members["s1"].member_epoch)
        h.hb("m2")
    assert h.group().state.value == "Stable"
    epoch, mine, theirs = h.group().group_epoch, h.held["s1"].active, h.held["m2"].active
    assert mine and theirs and not mine & theirs
    assert static_hb(h, "s1", -2)["member_epoch"] == -2
    assert h.hb("m2").body["member_epoch"] == epoch and h.held["m2"].active == theirs  # no rebalance
    # a heartbeat (not a join) under another member id with the instance id is fenced, even now
    assert static_hb(h, "intruder", 3)["error_code"] == ErrorCode.FENCED_INSTANCE_ID
    back = static_hb(h, "s1-again", 0)
    assert (back["error_code"], back["member_epoch"], h.held["s1-again"].active) == (0, epoch, mine)
    assert "s1" not in h.group().members and h.group().group_epoch == epoch
    # a second member with the instance id in use, and a heartbeat naming an unknown one
    assert static_hb(h, "s2", 0)["error_code"] == ErrorCode.UNRELEASED_INSTANCE_ID
    assert static_hb(h, "s1-again", epoch, instance="i9")["error_code"] == ErrorCode.UNKNOWN_MEMBER_ID
    # the stored state keeps the instance id: a restored group still knows whose it is
    restored = decode_streams_group_value("g", encode_streams_group_value(h.group()))
    assert restored.static_members == {"i1": "s1-again"}
    # left for now and never back: after the session timeout its tasks go to m2
    static_hb(h, "s1-again", -2)
    h.scheduler.advance(SESSION_MS - 1000)
    h.hb("m2")
    assert h.group().members["s1-again"].member_epoch == -2
    h.scheduler.advance(2000)
    h.hb("m2")
    assert "s1-again" not in h.group().members and h.group().group_epoch > epoch


def test_static_rejoin_under_a_member_id_in_use_replaces_that_member():
    """Hostile: the instance comes back under the member id of another member; that member is gone, the
    group stays consistent (one member per id, the instance id pointing at it)."""
    h = Harness()
    for name in ("in", "app-rp", "app-cl"):
        h.topics.add(name, 2)
    static_hb(h, "s1", 0)
    h.hb("m2", 0)
    static_hb(h, "s1", -2)
    assert static_hb(h, "m2", 0)["error_code"] == 0
    group = h.group()
    assert set(group.members) == {"m2"} and group.static_members == {"i1": "m2"}
    assert group.members["m2"].instance_id == "i1" and set(group.target) <= {"m2"}
    # the replaced member's tasks were assigned anew, in the same heartbeat: the instance now runs them all
    assert h.held["m2"].active == {(s, p) for s in "01" for p in range(2)} and group.state.value == "Stable"


def test_endpoints_and_their_partitions():
    h = Harness()
    for name in ("in", "app-rp", "app-cl"):
        h.topics.add(name, 2)

    def hb(member: str, epoch: int, port: int, seen: int = 0) -> dict:
        join = epoch == 0
        return h.coordinator.heartbeat(StreamsHeartbeatRequest(
            "g", member, epoch, endpoint_information_epoch=seen, rebalance_timeout_ms=5000 if join else -1,
            topology=word_count() if join else None, process_id=f"p-{member}", user_endpoint=("host", port),
            owned=TaskSets() if join else h.group().members[member].assigned.copy())).body

    first = hb("m1", 0, 7001)
    assert first["endpoint_information_epoch"] == 0  # as Kafka: the join that created the group says 0
    assert first["partitions_by_user_endpoint"][0]["active_partitions"] == [
        {"topic": "app-rp", "partitions": [0, 1]}, {"topic": "in", "partitions": [0, 1]}]
    hb("m2", 0, 7002)
    for _ in range(4):
        for m, port in (("m1", 7001), ("m2", 7002)):
            body = hb(m, h.group().members[m].member_epoch, port, seen=99)
    by_port = {e["user_endpoint"]["port"]: e for e in body["partitions_by_user_endpoint"]}
    assert set(by_port) == {7001, 7002}
    parts = [{(t["topic"], p) for t in by_port[port]["active_partitions"] for p in t["partitions"]}
             for port in (7001, 7002)]
    assert parts[0] and parts[1] and not parts[0] & parts[1]
    assert parts[0] | parts[1] == {(t, p) for t in ("in", "app-rp") for p in range(2)}
    current = body["endpoint_information_epoch"]
    assert hb("m1", h.group().members["m1"].member_epoch, 7001, seen=current)["partitions_by_user_endpoint"] is None
