"""The classic group state machine, driven with a fake clock (no sockets, no broker process); the
`__consumer_offsets` log and the Coordinator's partition load/unload on real partitions led by one broker."""

from __future__ import annotations

import asyncio
from concurrent.futures import Future

import pytest

from coordinator_support import Node, key_on, offsets_coordinator, run
from odradek.cluster.partition import NotLeaderError
from odradek.coordinator import OFFSETS_TOPIC, Coordinator
from odradek.coordinator.group import GroupState
from odradek.coordinator.group_coordinator import GroupConfig, GroupCoordinator, JoinRequest
from odradek.coordinator.offset_manager import OffsetManager
from odradek.coordinator.offsets import OffsetStore
from odradek.coordinator.persistence import (
    OffsetsTopicLog,
    OffsetValue,
    ReplayedRecord,
    decode_key,
    decode_offset_value,
    encode_offset_value,
    group_key,
    offset_key,
)
from odradek.coordinator.timers import FakeScheduler
from odradek.protocol.errors import ErrorCode as EC
from odradek.records.batch import validate_v2
from odradek.records.codec import COMMIT, build_control_batch
from odradek.storage import LogConfig
from odradek.storage.flusher import LogFlusher, completed_future

SESSION = 10_000
REBALANCE = 30_000


class Harness:
    """A GroupCoordinator and an OffsetManager on a fake clock, whose writes are recorded instead of stored;
    or, given a `Coordinator`, the same helpers over it (its writes go to real `__consumer_offsets` logs)."""

    def __init__(self, coordinator: Coordinator | None = None, **config) -> None:
        self.written: list[tuple[str, list]] = []
        # What the flusher returns for each write: done at once unless a test queues its own futures here.
        self.durable: list[Future] = []
        if coordinator is not None:
            self.clock = coordinator.scheduler
            self.groups = coordinator.groups
            self.offsets = coordinator.offsets
            return
        self.clock = FakeScheduler()
        self.groups = GroupCoordinator(GroupConfig(**config), self.clock, self._persist)
        self.offsets = OffsetManager(self.groups, OffsetStore(), self._persist,
                                     lambda t, p: t == "t" and 0 <= p < 4, 100, 60_000)

    def _persist(self, group_id: str, records: list) -> Future:
        self.written.append((group_id, records))
        return self.durable.pop(0) if self.durable else completed_future()

    def commit(self, *args) -> dict:
        """OffsetManager.commit's error codes; what it accepted has a durable future (done here at once)."""
        errors, durable = self.offsets.commit(*args)
        assert durable is None or durable.done()
        return errors

    def join(self, member_id: str = "", group: str = "g", protocols=(("range", b"m"),), instance=None,
             session: int = SESSION, client: str = "c"):
        return self.groups.join(JoinRequest(group, member_id, instance, session, REBALANCE, "consumer",
                                            list(protocols), client, "/127.0.0.1"))

    def join_new(self, **kw) -> asyncio.Future:
        """v4+ two-step join: MEMBER_ID_REQUIRED, then rejoin with the id given."""
        first = self.join(**kw)
        assert first.result()["error_code"] == EC.MEMBER_ID_REQUIRED
        return self.join(member_id=first.result()["member_id"], **kw)

    def join_two(self) -> tuple[dict, dict]:
        """Two members join a new group (generation 1): their JoinGroup results, leader's first."""
        f1, f2 = self.join_new(client="a"), self.join_new(client="b")
        self.clock.advance(300)
        r1, r2 = f1.result(), f2.result()
        return (r1, r2) if r1["leader"] == r1["member_id"] else (r2, r1)

    def sync_two_with_held_write(self, assign) -> tuple[Future, asyncio.Future, asyncio.Future, dict, dict]:
        """join_two, then the follower and the leader sync (the leader hands in `assign(leader_id,
        follower_id)`) while the group write's fsync is held: (that fsync, the follower's and the leader's
        SyncGroup, the leader's and the follower's JoinGroup results)."""
        leader, follower = self.join_two()
        fsync: Future = Future()
        self.durable.append(fsync)
        follower_sync = self.groups.sync("g", 1, follower["member_id"], None, None, None, [])
        leader_sync = self.groups.sync("g", 1, leader["member_id"], None, None, None,
                                       assign(leader["member_id"], follower["member_id"]))
        return fsync, follower_sync, leader_sync, leader, follower

    def group(self, gid: str = "g"):
        return self.groups.groups[gid]


def stable_group(h: Harness, n: int) -> list[str]:
    futs = [h.join_new(client=f"c{i}") for i in range(n)]
    h.clock.advance(300)
    results = [f.result() for f in futs]
    assert all(r["error_code"] == 0 for r in results)
    ids = [r["member_id"] for r in results]
    leader = results[0]["leader"]
    gen = results[0]["generation_id"]
    syncs = [h.groups.sync("g", gen, mid, None, None, None,
                           [(m, f"a-{m}".encode()) for m in ids] if mid == leader else []) for mid in ids]
    assert all(s.done() and s.result()["error_code"] == 0 for s in syncs)
    assert h.group().state is GroupState.STABLE
    return ids


@run
def test_lone_member_gets_assignment_after_quiet_window():
    h = Harness()
    fut = h.join_new()
    assert not fut.done()
    assert h.group().state is GroupState.PREPARING_REBALANCE
    h.clock.advance(249)
    assert not fut.done()
    h.clock.advance(1)
    r = fut.result()
    assert r["error_code"] == 0 and r["generation_id"] == 1 and r["leader"] == r["member_id"]
    assert [m["metadata"] for m in r["members"]] == [b"m"]
    s = h.groups.sync("g", 1, r["member_id"], None, None, None, [(r["member_id"], b"A")])
    assert s.result() == {"error_code": 0, "protocol_type": "consumer", "protocol_name": "range", "assignment": b"A"}
    assert h.written, "group metadata is persisted when the group becomes stable"


@run
def test_members_joining_together_share_one_generation_and_initial_delay_is_capped():
    h = Harness(initial_rebalance_delay_ms=1000, initial_rebalance_quiet_ms=250)
    futs = []
    for i in range(6):  # a new member every 200 ms keeps the quiet window from ending...
        futs.append(h.join_new(client=f"c{i}"))
        h.clock.advance(200)
    # ...but not past the initial delay (1000 ms after the first join)
    assert all(f.done() for f in futs[:5])
    assert {f.result()["generation_id"] for f in futs[:5]} == {1}
    leader_reply = [f.result() for f in futs[:5] if f.result()["leader"] == f.result()["member_id"]]
    assert len(leader_reply) == 1 and len(leader_reply[0]["members"]) == 5


@run
def test_member_id_required_and_unknown_member():
    h = Harness()
    assert h.join().result()["error_code"] == EC.MEMBER_ID_REQUIRED
    assert h.join(member_id="nobody").result()["error_code"] == EC.UNKNOWN_MEMBER_ID
    assert h.join(group="other", member_id="x").result()["error_code"] == EC.UNKNOWN_MEMBER_ID


@run
def test_invalid_session_timeout_and_inconsistent_protocol():
    h = Harness()
    assert h.join(session=100).result()["error_code"] == EC.INVALID_SESSION_TIMEOUT
    assert h.join(session=10_000_000).result()["error_code"] == EC.INVALID_SESSION_TIMEOUT
    stable_group(h, 1)
    assert h.join(protocols=(("other", b""),)).result()["error_code"] == EC.INCONSISTENT_GROUP_PROTOCOL


@run
def test_protocol_selection_by_votes():
    h = Harness()
    a = h.join_new(protocols=(("roundrobin", b"1"), ("range", b"2")))
    b = h.join_new(protocols=(("range", b"3"), ("roundrobin", b"4")))
    c = h.join_new(protocols=(("range", b"5"),))
    h.clock.advance(300)
    assert {f.result()["protocol_name"] for f in (a, b, c)} == {"range"}


@run
def test_session_expiry_removes_member_and_rebalances():
    h = Harness()
    a, b = stable_group(h, 2)
    h.clock.advance(SESSION - 1000)
    assert h.groups.heartbeat("g", 1, a, None) == 0  # a stays alive, b goes silent
    h.clock.advance(1000)
    assert b not in h.group().members
    assert h.group().state is GroupState.PREPARING_REBALANCE
    assert h.groups.heartbeat("g", 1, a, None) == EC.REBALANCE_IN_PROGRESS
    assert h.groups.heartbeat("g", 1, b, None) == EC.UNKNOWN_MEMBER_ID
    fut = h.join(member_id=a)
    r = fut.result()  # the only known member rejoined: completes at once
    assert r["generation_id"] == 2 and r["leader"] == a and len(r["members"]) == 1


@run
def test_rebalance_timeout_drops_members_that_do_not_rejoin():
    h = Harness()
    a, b, c = stable_group(h, 3)
    assert h.groups.leave("g", [(c, None)]) == [0]
    fa = h.join(member_id=a)
    assert not fa.done()
    for _ in range(REBALANCE // 5000):  # a keeps heartbeating while it waits; b neither rejoins nor dies
        h.groups.heartbeat("g", 1, b, None)
        h.clock.advance(5000)
    r = fa.result()
    assert r["error_code"] == 0 and r["generation_id"] == 2 and [m["member_id"] for m in r["members"]] == [a]


@run
def test_sync_errors_and_follower_waits_for_leader():
    h = Harness()
    leader, follower = h.join_two()
    assert h.groups.sync("g", 7, follower["member_id"], None, None, None, []).result()["error_code"] == EC.ILLEGAL_GENERATION
    assert h.groups.sync("g", 1, "ghost", None, None, None, []).result()["error_code"] == EC.UNKNOWN_MEMBER_ID
    assert h.groups.sync("g", 1, follower["member_id"], None, "connect", None, []).result()["error_code"] == \
        EC.INCONSISTENT_GROUP_PROTOCOL
    wait = h.groups.sync("g", 1, follower["member_id"], None, "consumer", "range", [])
    assert not wait.done()
    # a commit during CompletingRebalance is refused
    errs = h.commit("g", 1, follower["member_id"], None, -1, [("t", [(0, 5, -1, None, -1)])])
    assert errs == {("t", 0): EC.REBALANCE_IN_PROGRESS}
    h.groups.sync("g", 1, leader["member_id"], None, None, None, [(follower["member_id"], b"F")])
    assert wait.result()["assignment"] == b"F"
    # a new member makes the stable group rebalance; old generation syncs now fail
    h.join_new(client="c")
    assert h.groups.sync("g", 1, leader["member_id"], None, None, None, []).result()["error_code"] == \
        EC.REBALANCE_IN_PROGRESS


def test_sync_answers_once_the_assignment_is_on_disk():
    """The group metadata's fsync runs on the flusher: until it is done the group stays CompletingRebalance,
    and neither the leader nor a follower gets its assignment (a crash could still forget it)."""

    async def body() -> None:
        h = Harness()
        fsync, follower_sync, leader_sync, _, follower = h.sync_two_with_held_write(
            lambda lead, follow: [(lead, b"L"), (follow, b"F")])
        await asyncio.sleep(0)
        assert h.written and not leader_sync.done() and not follower_sync.done()
        assert h.group().state is GroupState.COMPLETING_REBALANCE
        # a follower that syncs again meanwhile waits as well
        late = h.groups.sync("g", 1, follower["member_id"], None, None, None, [])
        assert follower_sync.result()["error_code"] == EC.REBALANCE_IN_PROGRESS and not late.done()
        fsync.set_result(None)
        for _ in range(3):
            await asyncio.sleep(0)
        assert leader_sync.result()["assignment"] == b"L" and late.result()["assignment"] == b"F"
        assert h.group().state is GroupState.STABLE

    asyncio.run(body())


def test_failed_group_write_answers_coordinator_not_available_and_rebalances():
    async def body() -> None:
        h = Harness()
        fsync, follower_sync, leader_sync, leader, follower = h.sync_two_with_held_write(
            lambda lead, follow: [(follow, b"F")])
        fsync.set_exception(OSError(5, "Input/output error"))
        for _ in range(3):
            await asyncio.sleep(0)
        assert leader_sync.result()["error_code"] == EC.COORDINATOR_NOT_AVAILABLE
        assert follower_sync.result()["error_code"] == EC.COORDINATOR_NOT_AVAILABLE
        assert h.group().state is GroupState.PREPARING_REBALANCE
        # the members rejoin, and a write that works makes the group stable again
        f1, f2 = h.join(member_id=leader["member_id"]), h.join(member_id=follower["member_id"])
        r1, r2 = f1.result(), f2.result()
        assert r1["generation_id"] == r2["generation_id"] == 2
        lead = r1 if r1["leader"] == r1["member_id"] else r2
        s = h.groups.sync("g", 2, lead["member_id"], None, None, None, [(lead["member_id"], b"L2")])
        assert s.result()["assignment"] == b"L2" and h.group().state is GroupState.STABLE

    asyncio.run(body())


def test_write_that_fails_at_once_answers_coordinator_not_available():
    """A log whose earlier fsync failed refuses the append itself."""

    async def body() -> None:
        h = Harness()
        leader, _ = h.join_two()

        def refuse(group_id: str, records: list) -> Future:
            raise OSError(28, "No space left on device")

        h.groups._persist = refuse
        s = h.groups.sync("g", 1, leader["member_id"], None, None, None, [])
        assert s.result()["error_code"] == EC.COORDINATOR_NOT_AVAILABLE
        assert h.group().state is GroupState.PREPARING_REBALANCE

    asyncio.run(body())


@run
def test_leader_leaving_during_completing_rebalance_fails_pending_syncs():
    h = Harness()
    leader, follower = h.join_two()
    wait = h.groups.sync("g", 1, follower["member_id"], None, None, None, [])
    assert h.groups.leave("g", [(leader["member_id"], None)]) == [0]
    assert wait.result()["error_code"] == EC.REBALANCE_IN_PROGRESS


@run
def test_leave_batched_with_per_member_errors_and_group_becomes_empty():
    h = Harness()
    a, b = stable_group(h, 2)
    assert h.groups.leave("g", [(a, None), ("ghost", None), (b, None)]) == [0, EC.UNKNOWN_MEMBER_ID, 0]
    assert h.group().state is GroupState.EMPTY and h.group().generation == 2


@run
def test_static_member_rejoin_keeps_assignment_without_rebalance():
    h = Harness()
    f1 = h.join(instance="i-1", client="a")
    f2 = h.join(instance="i-2", client="b")
    h.clock.advance(300)
    r1, r2 = f1.result(), f2.result()
    leader = r1["leader"]
    ids = [r1["member_id"], r2["member_id"]]
    h.groups.sync("g", 1, leader, None, None, None, [(ids[0], b"A1"), (ids[1], b"A2")])
    h.groups.sync("g", 1, ids[1 if leader == ids[0] else 0], None, None, None, [])
    assert h.group().state is GroupState.STABLE
    # i-2 restarts: joins with an empty member id and the same metadata
    again = h.join(instance="i-2", client="b").result()
    assert again["error_code"] == 0 and again["generation_id"] == 1 and again["member_id"] != ids[1]
    assert h.group().state is GroupState.STABLE
    assert h.groups.sync("g", 1, again["member_id"], "i-2", None, None, []).result()["assignment"] == b"A2"
    # the old incarnation is fenced
    assert h.groups.heartbeat("g", 1, ids[1], "i-2") == EC.FENCED_INSTANCE_ID
    assert h.join(member_id=ids[1], instance="i-2").result()["error_code"] == EC.FENCED_INSTANCE_ID
    assert h.groups.heartbeat("g", 1, ids[0], "i-1") == 0


@run
def test_static_member_with_new_metadata_triggers_rebalance():
    h = Harness()
    f = h.join(instance="i-1")
    h.clock.advance(300)
    mid = f.result()["member_id"]
    h.groups.sync("g", 1, mid, None, None, None, [(mid, b"A")])
    again = h.join(instance="i-1", protocols=(("range", b"changed"),))
    assert again.done() and again.result()["generation_id"] == 2  # the only member rejoined: done at once


@run
def test_offset_commit_validation():
    h = Harness()
    # simple commit to an unknown group
    assert h.commit("s", -1, "", None, -1, [("t", [(0, 5, -1, "x", -1)])]) == {("t", 0): 0}
    assert h.offsets.fetch("s", [("t", [0, 1])])[0][1][0][1].offset == 5
    assert h.offsets.fetch("s", [("t", [0, 1])])[0][1][1][1] is None
    assert h.commit("u", 3, "m", None, -1, [("t", [(0, 5, -1, None, -1)])]) == {("t", 0): EC.ILLEGAL_GENERATION}
    a, b = stable_group(h, 2)
    ok = h.commit("g", 1, a, None, -1, [("t", [(0, 7, 3, "meta", -1), (9, 1, -1, None, -1)]),
                                             ("nope", [(0, 1, -1, None, -1)])])
    assert ok == {("t", 0): 0, ("t", 9): EC.UNKNOWN_TOPIC_OR_PARTITION, ("nope", 0): EC.UNKNOWN_TOPIC_OR_PARTITION}
    assert h.commit("g", 2, a, None, -1, [("t", [(0, 1, -1, None, -1)])]) == {("t", 0): EC.ILLEGAL_GENERATION}
    assert h.commit("g", 1, "x", None, -1, [("t", [(0, 1, -1, None, -1)])]) == {("t", 0): EC.UNKNOWN_MEMBER_ID}
    assert h.commit("g", -1, "", None, -1, [("t", [(0, 1, -1, None, -1)])]) == {("t", 0): EC.UNKNOWN_MEMBER_ID}
    assert h.commit("g", 1, a, None, -1, [("t", [(1, 1, -1, "x" * 101, -1)])]) == \
        {("t", 1): EC.OFFSET_METADATA_TOO_LARGE}
    (topic, parts), = h.offsets.fetch("g", None)
    assert topic == "t" and [(p, v.offset, v.leader_epoch, v.metadata) for p, v in parts] == [(0, 7, 3, "meta")]


@run
async def test_delete_groups_and_offsets():
    h = Harness()
    a, = stable_group(h, 1)
    h.commit("g", 1, a, None, -1, [("t", [(0, 1, -1, None, -1), (1, 2, -1, None, -1)])])
    assert await h.offsets.delete_groups(["g", "missing"]) == [("g", EC.NON_EMPTY_GROUP),
                                                               ("missing", EC.GROUP_ID_NOT_FOUND)]
    assert (await h.offsets.delete_offsets("missing", [("t", [0])]))[0] == EC.GROUP_ID_NOT_FOUND
    h.group().members[a].protocols = [("range", b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\xff\xff\xff\xff")]
    err, res = await h.offsets.delete_offsets("g", [("t", [0])])
    assert err == 0 and res == {("t", 0): EC.GROUP_SUBSCRIBED_TO_TOPIC}
    h.groups.leave("g", [(a, None)])
    err, res = await h.offsets.delete_offsets("g", [("t", [0]), ("zz", [0])])
    assert res == {("t", 0): 0, ("zz", 0): EC.UNKNOWN_TOPIC_OR_PARTITION}
    assert [p for p, _ in h.offsets.fetch("g", None)[0][1]] == [1]
    assert await h.offsets.delete_groups(["g"]) == [("g", 0)]
    assert "g" not in h.groups.groups and h.offsets.fetch("g", None) == []
    assert h.written[-1] == ("g", [(offset_key("g", "t", 1), None), (group_key("g"), None)])


@run
async def test_deletes_change_the_store_once_their_tombstones_are_durable():
    """OffsetDelete and DeleteGroups wait (without blocking the loop) for their tombstones' fsync and
    replication before the store changes; a tombstone that cannot be written changes nothing and is
    answered COORDINATOR_NOT_AVAILABLE."""
    h = Harness()
    h.commit("s", -1, "", None, -1, [("t", [(0, 1, -1, None, -1), (1, 2, -1, None, -1)])])
    held: Future = Future()
    h.durable.append(held)
    deleting = asyncio.ensure_future(h.offsets.delete_offsets("s", [("t", [0])]))
    for _ in range(3):
        await asyncio.sleep(0)
    assert h.written[-1] == ("s", [(offset_key("s", "t", 0), None)])
    assert not deleting.done() and h.offsets.fetch("s", [("t", [0])])[0][1][0][1].offset == 1
    held.set_result(None)
    assert await deleting == (0, {("t", 0): 0})
    assert h.offsets.fetch("s", [("t", [0, 1])])[0][1][0] == (0, None)
    failed: Future = Future()
    failed.set_exception(OSError(5, "Input/output error"))
    h.durable.append(failed)
    assert await h.offsets.delete_groups(["s"]) == [("s", EC.COORDINATOR_NOT_AVAILABLE)]
    assert "s" in h.groups.groups and h.offsets.fetch("s", [("t", [1])])[0][1][0][1].offset == 2


@run
async def test_offsets_expire_only_once_group_is_empty():
    h = Harness()
    a, = stable_group(h, 1)
    h.commit("g", 1, a, None, -1, [("t", [(0, 1, -1, None, -1)])])
    h.commit("s", -1, "", None, -1, [("t", [(0, 1, -1, None, -1)])])
    h.commit("r", -1, "", None, 1000, [("t", [(0, 1, -1, None, -1)])])  # explicit retention (v2-4)
    for _ in range(7):
        h.clock.advance(SESSION - 1)
        h.groups.heartbeat("g", 1, a, None)
    # 70 s later: s expired (60 s retention), g is still active, r expired after 1 s
    assert await h.offsets.expire() == 2
    assert h.offsets.fetch("s", None) == [] and h.offsets.fetch("r", None) == []
    assert "s" not in h.groups.groups
    assert h.offsets.fetch("g", None) != []
    h.groups.leave("g", [(a, None)])
    h.clock.advance(59_000)
    assert await h.offsets.expire() == 0
    assert h.offsets.fetch("g", None) != []
    h.clock.advance(1_000)
    assert await h.offsets.expire() == 1
    assert h.offsets.fetch("g", None) == [] and "g" not in h.groups.groups


def test_java_string_hash_matches_java():
    from odradek.coordinator.placement import java_string_hash, partition_for

    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -2147483648  # Integer.MIN_VALUE
    assert partition_for("polygenelubricants", 50) == 0
    assert 0 <= partition_for("my-group", 50) < 50


def test_record_formats_round_trip():
    from odradek.coordinator import persistence as p

    assert p.decode_key(p.offset_key("g", "t", 3)) == ("offset", "g", "t", 3)
    assert p.decode_key(p.group_key("g")) == ("group", "g")
    assert p.decode_key(p.streams_group_key("g")) == ("streams_group", "g")
    assert p.decode_key(p.consumer_group_key("g")) == ("consumer_group", "g")
    assert p.decode_key(p.group_config_key("g")) == ("group_config", "g")
    # the placement marker shares the topic: its bare key version must be none of the group records'
    from odradek.coordinator.placement import PLACEMENT_KEY
    assert p.decode_key(PLACEMENT_KEY) is None
    group_keys = [p.offset_key("g", "t", 0), p.group_key("g"), p.consumer_group_key("g"),
                  p.group_config_key("g"), p.streams_group_key("g")]
    assert PLACEMENT_KEY not in {key[:2] for key in group_keys}
    assert p.offset_key("g", "t", 3) == b"\x00\x01\x00\x01g\x00\x01t\x00\x00\x00\x03"
    v = p.OffsetValue(42, 7, "meta", 1000, -1)
    assert p.decode_offset_value(p.encode_offset_value(v)) == v
    v1 = p.OffsetValue(42, -1, "", 1000, 5000)
    assert p.encode_offset_value(v1)[:2] == b"\x00\x01" and p.decode_offset_value(p.encode_offset_value(v1)) == v1
    g = p.GroupValue("consumer", 3, "range", "m1", 99,
                     [p.MemberValue("m1", None, "c", "/h", 300, 10, b"sub", b"asg"),
                      p.MemberValue("m2", "i2", "c", "/h", 300, 10, b"", b"")])
    assert p.decode_group_value(p.encode_group_value(g)) == g


def offsets_records(w: OffsetsTopicLog, partition: int) -> dict:
    """The live offsets a replay of ``partition`` finds (last value per key, tombstones delete)."""
    live = {}
    for rec in w.replay(partition):
        assert rec.producer_id == -1 and rec.marker is None
        live[decode_key(rec.key)] = None if rec.value is None else decode_offset_value(rec.value).offset
    return {k: v for k, v in live.items() if v is not None}


@run
async def test_replay_and_snapshot_bound_the_log(tmp_path):
    node = Node(tmp_path)
    for i in range(2):
        node.lead(OFFSETS_TOPIC, i, LogConfig(segment_bytes=4096))
    w = OffsetsTopicLog(2, node.replicas_of(OFFSETS_TOPIC), lambda: 1)
    for i in range(300):
        assert w.append("grp", [(offset_key("grp", "t", i % 3), encode_offset_value(OffsetValue(i)))]).done()
    assert w.append("grp", [(offset_key("grp", "t", 2), None)]).done()
    part = w.partition_for("grp")
    plog = node.log(OFFSETS_TOPIC, part)
    assert plog.log_end_offset == plog.high_watermark == 301
    assert await w.maybe_compact(min_records=100) == 1
    assert plog.log_start_offset == 301 and plog.segment_count < 10
    assert await w.maybe_compact(min_records=100) == 0  # nothing new since the snapshot
    r = OffsetsTopicLog(2, node.replicas_of(OFFSETS_TOPIC), lambda: 1)
    assert len(list(r.replay(part))) == 2, "a replay reads the snapshot only"
    assert offsets_records(r, part) == {("offset", "grp", "t", 0): 297, ("offset", "grp", "t", 1): 298}
    assert list(r.replay(1 - part)) == []
    node.close()


@run
async def test_replay_reports_transactions_and_a_snapshot_waits_for_their_end(tmp_path):
    """TxnOffsetCommit records are one transactional batch of the producer: a replay reports them with the
    producer id, then the marker that ends the transaction; no snapshot is taken while it is open, and once
    committed (`commit_live`) its records are part of the next snapshot."""
    node = Node(tmp_path)
    partition = node.lead(OFFSETS_TOPIC, 0)
    w = OffsetsTopicLog(1, node.replicas_of(OFFSETS_TOPIC), lambda: 1)
    for i in range(10):
        w.append("grp", [(offset_key("grp", "t", 0), encode_offset_value(OffsetValue(i)))])
    txn_record = (offset_key("grp", "t", 1), encode_offset_value(OffsetValue(77)))
    assert w.append_transactional(0, 9, 0, [txn_record]).done()
    assert await w.maybe_compact(min_records=5) == 0, "the open transaction's records must stay"
    marker = bytearray(build_control_batch(COMMIT, 9, 0, 0, 1))
    partition.append_marker(marker, validate_v2(marker)[0][1], False, 0)
    replayed = list(w.replay(0))
    assert replayed[-2:] == [ReplayedRecord(*txn_record, 9, None), ReplayedRecord(None, None, 9, COMMIT)]
    assert all(r.producer_id == -1 for r in replayed[:-2]) and len(replayed) == 12
    w.commit_live(0, [txn_record])
    assert await w.maybe_compact(min_records=5) == 1
    assert offsets_records(w, 0) == {("offset", "grp", "t", 0): 9, ("offset", "grp", "t", 1): 77}
    node.close()


def test_an_append_is_visible_at_once_and_done_when_flushed_and_replicated(tmp_path):
    """The future of an append is done only when the flusher has synced it and the high watermark has
    passed it (here a follower in the ISR has to fetch it first)."""
    import threading

    flusher = LogFlusher()
    release = threading.Event()
    flusher.submit(lambda: release.wait(10))  # the disk is "slow" until released
    node = Node(tmp_path)
    partition = node.lead(OFFSETS_TOPIC, 0, flusher=flusher, isr=(0, 1))
    w = OffsetsTopicLog(1, node.replicas_of(OFFSETS_TOPIC), lambda: 1)
    durable = w.append("grp", [(offset_key("grp", "t", 0), encode_offset_value(OffsetValue(5)))])
    assert partition.log.log_end_offset == 1 and partition.log.high_watermark == 0 and not durable.done()
    release.set()
    partition.log.request_flush().result(10)  # the append's fsync has run...
    assert not durable.done()  # ...but the follower does not hold the record yet
    partition.update_follower(1, 1, now_ms=0)
    durable.result(10)
    assert w.append("grp", []).done()
    node.close()
    flusher.close()


def test_appends_need_leadership(tmp_path):
    """Only the leader appends; a write waiting for the ISR when leadership moves fails with NotLeaderError
    (the next leader may truncate it away)."""
    node = Node(tmp_path)
    partition = node.lead(OFFSETS_TOPIC, 0, isr=(0, 1))
    w = OffsetsTopicLog(1, node.replicas_of(OFFSETS_TOPIC), lambda: 1)
    waiting = w.append("grp", [(offset_key("grp", "t", 0), encode_offset_value(OffsetValue(5)))])
    partition.make_follower(leader_id=1, leader_epoch=1, isr=[0, 1], replicas=[0, 1], zk_version=1)
    with pytest.raises(NotLeaderError):
        waiting.result(0)
    with pytest.raises(NotLeaderError):
        w.append("grp", [(offset_key("grp", "t", 0), encode_offset_value(OffsetValue(6)))])
    with pytest.raises(NotLeaderError):
        w.append_transactional(0, 9, 0, [(offset_key("grp", "t", 0), encode_offset_value(OffsetValue(6)))])
    assert partition.log.log_end_offset == 1
    node.close()


@pytest.mark.parametrize("dummy", [0])
def test_fake_scheduler_orders_timers(dummy):
    clock = FakeScheduler(0)
    seen = []
    clock.call_later(20, lambda: seen.append(20))
    h = clock.call_later(10, lambda: seen.append(10))
    clock.call_later(5, lambda: clock.call_later(1, lambda: seen.append(6)))
    h.cancel()
    clock.advance(25)
    assert seen == [6, 20] and clock.now_ms() == 25


@run
def test_leader_that_never_syncs_is_removed_after_the_rebalance_timeout():
    h = Harness()
    leader, follower = h.join_two()
    wait = h.groups.sync("g", 1, follower["member_id"], None, None, None, [])
    for _ in range(REBALANCE // 5000):
        assert h.groups.heartbeat("g", 1, leader["member_id"], None) == 0  # alive, but never syncs
        h.clock.advance(5000)
    assert leader["member_id"] not in h.group().members
    assert wait.result()["error_code"] == EC.REBALANCE_IN_PROGRESS
    again = h.join(member_id=follower["member_id"]).result()
    assert again["generation_id"] == 2 and again["leader"] == follower["member_id"]


@run
def test_restore_brings_back_a_stable_group_whose_members_then_expire():
    from odradek.coordinator.persistence import GroupValue, MemberValue

    h = Harness()
    h.groups.restore("g", GroupValue("consumer", 4, "range", "m1", 5,
                                     [MemberValue("m1", None, "c", "/h", REBALANCE, SESSION, b"s", b"A")]))
    assert h.group().state is GroupState.STABLE and h.group().generation == 4
    assert h.groups.heartbeat("g", 4, "m1", None) == 0
    assert h.groups.sync("g", 4, "m1", None, None, None, []).result()["assignment"] == b"A"
    h.clock.advance(SESSION)
    assert h.group().state is GroupState.EMPTY and h.group().generation == 5


@run
async def test_a_loaded_partition_brings_back_its_groups_and_offsets(tmp_path):
    """A new coordinator (after a restart or a failover) replays the partitions it leads: a Stable group
    keeps its generation, leader, members and assignments; committed offsets come back; a group with only
    simple commits comes back Empty."""
    node = Node(tmp_path)
    h = Harness(offsets_coordinator(node, 2, lambda t, p: t == "t"))
    a, b = stable_group(h, 2)
    h.commit("g", 1, a, None, -1, [("t", [(0, 7, 3, "meta", -1)])])
    h.commit("s", -1, "", None, -1, [("t", [(1, 4, -1, None, -1)])])
    leader = h.group().leader_id
    h.groups.close()
    node.restart()
    fresh = Harness(offsets_coordinator(node, 2, lambda t, p: t == "t"))
    g = fresh.group()
    assert (g.state, g.generation, g.leader_id, set(g.members)) == (GroupState.STABLE, 1, leader, {a, b})
    assert fresh.groups.heartbeat("g", 1, a, None) == 0
    assert fresh.groups.sync("g", 1, b, None, None, None, []).result()["assignment"] == f"a-{b}".encode()
    (topic, parts), = fresh.offsets.fetch("g", None)
    assert topic == "t" and [(p, v.offset, v.leader_epoch, v.metadata) for p, v in parts] == [(0, 7, 3, "meta")]
    assert fresh.group("s").state is GroupState.EMPTY and fresh.offsets.fetch("s", [("t", [1])])[0][1][0][1].offset == 4


@run
async def test_unloading_a_partition_forgets_its_groups_and_answers_not_coordinator(tmp_path):
    """When leadership of a `__consumer_offsets` partition moves away, its groups are dropped: pending
    JoinGroup and SyncGroup answer NOT_COORDINATOR, `owns` says no, other partitions' groups stay. Loading
    it again rebuilds what was written."""
    node = Node(tmp_path)
    c = offsets_coordinator(node, 2, lambda t, p: t == "t")
    h = Harness(c)
    moved = c.partition_of("g")
    joining, simple, elsewhere = key_on(moved, 2, "j"), key_on(moved, 2, "s"), key_on(1 - moved, 2, "e")
    leader, follower = h.join_two()
    sync_wait = h.groups.sync("g", 1, follower["member_id"], None, None, None, [])
    join_wait = h.join_new(group=joining)
    h.commit(simple, -1, "", None, -1, [("t", [(0, 3, -1, None, -1)])])
    h.commit(elsewhere, -1, "", None, -1, [("t", [(0, 5, -1, None, -1)])])
    assert not sync_wait.done() and not join_wait.done()
    assert all(c.owns(g) for g in ("g", joining, simple, elsewhere))
    c.unload_partition(moved)
    assert sync_wait.result()["error_code"] == EC.NOT_COORDINATOR
    assert join_wait.result()["error_code"] == EC.NOT_COORDINATOR
    assert not any(c.owns(g) for g in ("g", joining, simple)) and c.owns(elsewhere)
    assert not {"g", joining, simple} & set(c.groups.groups) and c.offsets.fetch(simple, None) == []
    assert c.offsets.fetch(elsewhere, [("t", [0])])[0][1][0][1].offset == 5
    h.clock.advance(REBALANCE)  # the dropped groups' timers do nothing any more
    assert not {"g", joining} & set(c.groups.groups)
    c.load_partition(moved)
    assert c.owns(simple) and c.offsets.fetch(simple, [("t", [0])])[0][1][0][1].offset == 3
    assert "g" not in c.groups.groups  # its assignment was never stored: its members join again
