"""The classic group state machine, driven with a fake clock (no sockets, no broker process)."""

from __future__ import annotations

import asyncio
from concurrent.futures import Future

import pytest

from odradek.coordinator.group import GroupState
from odradek.coordinator.group_coordinator import GroupConfig, GroupCoordinator, JoinRequest
from odradek.coordinator.offset_manager import OffsetManager
from odradek.coordinator.offsets import OffsetStore
from odradek.coordinator.timers import FakeScheduler
from odradek.protocol.errors import ErrorCode as EC
from odradek.storage.flusher import completed_future

SESSION = 10_000
REBALANCE = 30_000


class Harness:
    def __init__(self, **config) -> None:
        self.clock = FakeScheduler()
        self.written: list[tuple[str, list]] = []
        # What the flusher returns for each write: done at once unless a test queues its own futures here.
        self.durable: list[Future] = []
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


def run(fn):
    """Run a test body inside an event loop (futures need one); the body never awaits real time."""

    def wrapper(*args, **kwargs):
        async def body():
            fn(*args, **kwargs)

        asyncio.run(body())

    wrapper.__name__ = fn.__name__
    return wrapper


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
def test_delete_groups_and_offsets():
    h = Harness()
    a, = stable_group(h, 1)
    h.commit("g", 1, a, None, -1, [("t", [(0, 1, -1, None, -1), (1, 2, -1, None, -1)])])
    assert h.offsets.delete_groups(["g", "missing"]) == [("g", EC.NON_EMPTY_GROUP), ("missing", EC.GROUP_ID_NOT_FOUND)]
    assert h.offsets.delete_offsets("missing", [("t", [0])])[0] == EC.GROUP_ID_NOT_FOUND
    h.group().members[a].protocols = [("range", b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\xff\xff\xff\xff")]
    err, res = h.offsets.delete_offsets("g", [("t", [0])])
    assert err == 0 and res == {("t", 0): EC.GROUP_SUBSCRIBED_TO_TOPIC}
    h.groups.leave("g", [(a, None)])
    err, res = h.offsets.delete_offsets("g", [("t", [0]), ("zz", [0])])
    assert res == {("t", 0): 0, ("zz", 0): EC.UNKNOWN_TOPIC_OR_PARTITION}
    assert [p for p, _ in h.offsets.fetch("g", None)[0][1]] == [1]
    assert h.offsets.delete_groups(["g"]) == [("g", 0)]
    assert "g" not in h.groups.groups and h.offsets.fetch("g", None) == []


@run
def test_offsets_expire_only_once_group_is_empty():
    h = Harness()
    a, = stable_group(h, 1)
    h.commit("g", 1, a, None, -1, [("t", [(0, 1, -1, None, -1)])])
    h.commit("s", -1, "", None, -1, [("t", [(0, 1, -1, None, -1)])])
    h.commit("r", -1, "", None, 1000, [("t", [(0, 1, -1, None, -1)])])  # explicit retention (v2-4)
    for _ in range(7):
        h.clock.advance(SESSION - 1)
        h.groups.heartbeat("g", 1, a, None)
    h.offsets.expire()  # 70 s later: s expired (60 s retention), g is still active, r expired after 1 s
    assert h.offsets.fetch("s", None) == [] and h.offsets.fetch("r", None) == []
    assert "s" not in h.groups.groups
    assert h.offsets.fetch("g", None) != []
    h.groups.leave("g", [(a, None)])
    h.clock.advance(59_000)
    h.offsets.expire()
    assert h.offsets.fetch("g", None) != []
    h.clock.advance(1_000)
    h.offsets.expire()
    assert h.offsets.fetch("g", None) == [] and "g" not in h.groups.groups


def test_java_string_hash_matches_java():
    from odradek.coordinator.persistence import java_string_hash, partition_for

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
    assert p.offset_key("g", "t", 3) == b"\x00\x01\x00\x01g\x00\x01t\x00\x00\x00\x03"
    v = p.OffsetValue(42, 7, "meta", 1000, -1)
    assert p.decode_offset_value(p.encode_offset_value(v)) == v
    v1 = p.OffsetValue(42, -1, "", 1000, 5000)
    assert p.encode_offset_value(v1)[:2] == b"\x00\x01" and p.decode_offset_value(p.encode_offset_value(v1)) == v1
    g = p.GroupValue("consumer", 3, "range", "m1", 99,
                     [p.MemberValue("m1", None, "c", "/h", 300, 10, b"sub", b"asg"),
                      p.MemberValue("m2", "i2", "c", "/h", 300, 10, b"", b"")])
    assert p.decode_group_value(p.encode_group_value(g)) == g


def test_replay_and_snapshot_bound_the_log(tmp_path):
    from odradek.coordinator.persistence import OffsetsTopicLog, decode_key, decode_offset_value
    from odradek.coordinator.persistence import OffsetValue, encode_offset_value, offset_key
    from odradek.storage.config import LogConfig
    from odradek.storage.log import PartitionLog

    logs = {i: PartitionLog.open(tmp_path / f"__consumer_offsets-{i}", LogConfig(segment_bytes=4096)) for i in range(2)}
    w = OffsetsTopicLog(2, logs.get, lambda: 1)
    for i in range(300):
        w.write("grp", [(offset_key("grp", "t", i % 3), encode_offset_value(OffsetValue(i)))])
    w.write("grp", [(offset_key("grp", "t", 2), None)])
    part = w.partition_for("grp")
    assert logs[part].log_end_offset == 301
    assert w.maybe_compact(min_records=100) == 1
    assert logs[part].log_start_offset == 301 and logs[part].segment_count < 10
    r = OffsetsTopicLog(2, logs.get, lambda: 1)
    live = {}
    for k, v in r.replay():
        live[decode_key(k)] = None if v is None else decode_offset_value(v).offset
    assert live == {("offset", "grp", "t", 0): 297, ("offset", "grp", "t", 1): 298}
    for plog in logs.values():
        plog.close()


def test_an_append_is_visible_at_once_and_durable_when_the_flusher_has_run(tmp_path):
    import threading

    from odradek.coordinator.persistence import OffsetsTopicLog, OffsetValue, encode_offset_value, offset_key
    from odradek.storage.config import LogConfig
    from odradek.storage.flusher import LogFlusher
    from odradek.storage.log import PartitionLog

    flusher = LogFlusher()
    release = threading.Event()
    flusher.submit(lambda: release.wait(10))  # the disk is "slow" until released
    plog = PartitionLog.open(tmp_path / "__consumer_offsets-0", LogConfig(), flusher=flusher)
    w = OffsetsTopicLog(1, {0: plog}.get, lambda: 1)
    durable = w.append("grp", [(offset_key("grp", "t", 0), encode_offset_value(OffsetValue(5)))])
    assert plog.log_end_offset == 1 and not durable.done()
    release.set()
    durable.result(10)
    assert w.append("grp", []).done()
    plog.close()
    flusher.close()


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
