"""The replica manager tells its leadership listeners (the coordinators) of a LeaderAndIsr's changes once
every partition of the request exists here: a coordinator loading one internal partition reads this broker's
replicas of the others (records stored under the old coordinator placement, docs/coordinator-placement.md)."""

from __future__ import annotations

from pathlib import Path

from test_cluster_partition import Broker, change


def test_listeners_hear_of_a_batch_once_all_its_partitions_exist(tmp_path: Path) -> None:
    broker = Broker(tmp_path / "data")
    seen: list[tuple[int, bool, list[bool]]] = []
    broker.rm.on_leadership.append(lambda topic, index, led: seen.append(
        (index, led, [broker.rm.partition(topic, p) is not None for p in range(3)])))
    try:
        errors = broker.apply(1, change(1, 0, [1, 2], topic="__consumer_offsets", partition=0),
                              change(2, 0, [2, 1], topic="__consumer_offsets", partition=1),
                              change(1, 0, [1, 2], topic="__consumer_offsets", partition=2))
        assert set(errors.values()) == {0}
        assert seen == [(0, True, [True, True, True]), (2, True, [True, True, True])]
        # a later request: the partition that moves away is reported after the batch too
        broker.apply(2, change(2, 1, [2, 1], topic="__consumer_offsets", partition=0, zk_version=1,
                               controller_epoch=2))
        assert seen[-1][:2] == (0, False)
    finally:
        broker.close()
