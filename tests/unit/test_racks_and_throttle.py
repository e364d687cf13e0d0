"""Rack-aware replica placement, the follower replication throttle's pieces, and the reassignment fields of
the topic znode."""

from __future__ import annotations

import json
import random

import pytest

from odradek.cluster import zk_layout as L
from odradek.cluster.admin import AdminError, assign_replicas_rack_aware, place_replicas, rack_alternated
from odradek.cluster.controller.reassignment import validate_target
from odradek.cluster.fetcher import UNLIMITED, ReplicationThrottle, throttled_replicas_include
from odradek.topic_config import validate_topic_config


def test_rack_alternated_interleaves_racks():
    assert rack_alternated({1: "a", 2: "a", 3: "b", 4: "c"}) == [1, 3, 4, 2]
    assert rack_alternated({5: "x", 6: "y", 7: "x", 8: "y"}) == [5, 6, 7, 8]


@pytest.mark.parametrize("seed", range(20))
def test_rack_aware_assignment_never_shares_a_rack_while_there_are_racks(seed):
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c"}
    for factor in (1, 2, 3, 4, 5):
        placed = assign_replicas_rack_aware(racks, 17, factor, rng=random.Random(seed))
        assert sorted(placed) == list(range(17))
        for replicas in placed.values():
            assert len(set(replicas)) == factor
            assert len({racks[b] for b in replicas}) == min(factor, 3)
    leaders = [r[0] for r in assign_replicas_rack_aware(racks, 50, 2, rng=random.Random(seed)).values()]
    assert {leaders.count(b) for b in racks} == {10}  # leadership spread evenly


def test_placement_is_rack_aware_only_when_every_broker_has_a_rack():
    placed = place_replicas({1: "a", 2: "a", 3: "b"}, 10, 2)
    assert all(3 in r for r in placed.values())
    assert all(len(set(r)) == 2 for r in place_replicas({1: "a", 2: None, 3: "b"}, 10, 2).values())
    with pytest.raises(AdminError):
        place_replicas({1: "a", 2: "b"}, 1, 3)


def test_throttled_replicas_values():
    assert throttled_replicas_include("*", 3, 7)
    assert throttled_replicas_include("0:1, 3:7", 3, 7)
    assert not throttled_replicas_include("0:1,3:8", 3, 7)
    assert not throttled_replicas_include("", 3, 7) and not throttled_replicas_include(None, 3, 7)
    assert validate_topic_config("follower.replication.throttled.replicas", "0:1,2:3") is None
    assert validate_topic_config("leader.replication.throttled.replicas", "*") is None
    assert validate_topic_config("leader.replication.throttled.replicas", "0-1") is not None


def test_the_throttle_is_a_token_bucket():
    configs = {"t": {"follower.replication.throttled.replicas": "0:5"}}
    throttle = ReplicationThrottle(5, UNLIMITED, lambda topic: configs.get(topic, {}))
    assert not throttle.active and not throttle.applies("t", 0)
    throttle.set_rate(1000)
    assert throttle.applies("t", 0) and not throttle.applies("t", 1) and not throttle.applies("u", 0)
    assert throttle.fetch_bytes(1 << 20) == 1000
    assert throttle.wait_s() == 0
    throttle.record(3000)  # a whole batch beyond the bucket: about two seconds of debt
    assert 1.5 < throttle.wait_s() <= 2.1


def test_topic_znode_carries_a_reassignment():
    assignment = L.TopicAssignment(bytes(16), {0: [2, 3, 1], 1: [1, 2]}, {0: [3]}, {0: [1]})
    value = json.loads(L.encode_topic(assignment))
    assert value["adding_replicas"] == {"0": [3]} and value["removing_replicas"] == {"0": [1]}
    decoded = L.decode_topic(L.encode_topic(assignment))
    assert decoded == assignment
    assert decoded.reassigning(0) and not decoded.reassigning(1)
    assert decoded.target(0) == [2, 3] and decoded.original(0) == [2, 1] and decoded.target(1) == [1, 2]
    assert json.loads(L.encode_topic(L.TopicAssignment(bytes(16), {0: [1]})))["adding_replicas"] == {}


def test_reassignment_targets_are_validated():
    assert validate_target([1, 2], {1, 2, 3}) is None
    for bad in ([], [1, 1], [1, 9], [-1]):
        assert validate_target(bad, {1, 2, 3})[0] == 39  # INVALID_REPLICA_ASSIGNMENT


def test_the_leader_throttle_measures_like_kafkas_sampled_rate():
    from odradek.cluster.leader_throttle import LeaderReplicationQuota, SampledRate

    now = [100.0]
    rate = SampledRate(clock=lambda: now[0])
    assert rate.measure() == 0.0
    rate.record(1_000_000)
    assert rate.measure() == pytest.approx(100_000)  # over at least 10 s: a first burst of ten seconds' worth
    now[0] += 5.0
    assert rate.measure() == pytest.approx(100_000)  # 5 s later: still over 10 s
    now[0] += 5.5
    assert rate.measure() == pytest.approx(1_000_000 / 10.5)  # over the 10.5 s since the sample began
    now[0] += 1.0  # the sample's window is out of the 11 windows kept
    assert rate.measure() == 0.0
    for _ in range(30):  # 50 kB per second for 30 s: the last 11 windows over 11 s
        rate.record(50_000)
        now[0] += 1.0
    assert rate.measure() == pytest.approx(50_000, rel=0.1)

    configs = {"t": {"leader.replication.throttled.replicas": "0:1,1:2"}}
    quota = LeaderReplicationQuota(1, lambda topic: configs.get(topic, {}))
    quota.rate = SampledRate(clock=lambda: now[0])
    assert quota.is_throttled("t", 0) and not quota.is_throttled("t", 1) and not quota.is_throttled("u", 0)
    quota.sent(2_000_000)
    assert quota.holds_back("t", 0, follower_in_isr=False, bound=100_000)
    assert not quota.holds_back("t", 0, follower_in_isr=True, bound=100_000)  # an in-sync follower never waits
    assert not quota.holds_back("t", 1, follower_in_isr=False, bound=100_000)  # not throttled here
    assert not quota.holds_back("t", 0, follower_in_isr=False, bound=UNLIMITED)
    assert not quota.holds_back("t", 0, follower_in_isr=False, bound=300_000)  # under the rate
