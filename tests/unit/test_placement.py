"""Coordinator placement (coordinator/placement.py): Kafka's `Utils.abs(key.hashCode()) % partitions` for
groups, transactional ids and share-partition keys, and the move of records that odradek before issue 37
stored under its old rule (`hash & 0x7FFFFFFF`), on real partition logs led by one broker.

The hash values below were printed by Java itself (jshell, OpenJDK 21: `s.hashCode()` and Kafka's
`Utils.abs(h) % n`), not computed with the code under test."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from coordinator_support import Node, eventually, run
from odradek.config import BrokerConfig
from odradek.coordinator import OFFSETS_TOPIC, Coordinator
from odradek.coordinator.persistence import (
    OffsetsTopicLog,
    OffsetValue,
    encode_offset_value,
    encode_share_state_value,
    group_config_key,
    encode_group_config_value,
    offset_key,
    share_state_key,
)
from odradek.coordinator.placement import (
    PLACEMENT_KEY,
    PLACEMENT_VALUE,
    java_string_hash,
    legacy_partition_for,
    partition_for,
)
from odradek.coordinator.share_coordinator import ShareCoordinator
from odradek.coordinator.share_state import SHARE_STATE_TOPIC, ShareStateLog, key_text
from odradek.coordinator.timers import FakeScheduler
from odradek.coordinator.transactions import TXN_TOPIC, TransactionCoordinator
from odradek.coordinator.txn_state import TxnMetadata, TxnState, encode_key, encode_value

# (string, Java's String.hashCode, Kafka's partition of 50, odradek's old partition of 50)
JAVA = [
    ("", 0, 0, 0),
    ("a", 97, 47, 47),
    ("hello", 99162322, 22, 22),
    ("polygenelubricants", -2147483648, 0, 0),  # Integer.MIN_VALUE: Utils.abs gives 0
    ("my-group", -1906497762, 12, 36),
    ("group-neg", -1484145342, 42, 6),
    ("orders-consumer", -1204742690, 40, 8),
    ("spark-pipeline", 480781202, 2, 2),
    ("\u00e9t\u00e9", 227742, 42, 42),
    ("\U0001F600grp", 1276929186, 36, 36),  # a surrogate pair: two UTF-16 code units
]


@pytest.mark.parametrize("text,java_hash,kafka_partition,old_partition", JAVA)
def test_the_rule_is_kafkas_utils_abs_of_java_string_hash(text, java_hash, kafka_partition, old_partition):
    assert java_string_hash(text) == java_hash
    assert partition_for(text, 50) == kafka_partition
    assert legacy_partition_for(text, 50) == old_partition


def test_share_partition_keys_hash_their_text_form_as_kafka():
    # SharePartitionKey.asCoordinatorKey: "group:topic-id:partition", Uuid.toString = base64url, no padding
    text = key_text("sg", bytes(16), 3)
    assert text == "sg:AAAAAAAAAAAAAAAAAAAAAA:3"
    assert java_string_hash(text) == -1176519937
    assert partition_for(text, 10) == 7 and legacy_partition_for(text, 10) == 1
    assert partition_for("txn-neg", 10) == 5 and legacy_partition_for("txn-neg", 10) == 3  # hash -885220435


def _legacy_write(node: Node, topic: str, partitions: int, owner: str, records) -> int:
    """Write ``records`` where odradek before issue 37 put ``owner``'s records (the old rule); its partition."""
    old = legacy_partition_for(owner, partitions)
    for index in range(partitions):
        if (topic, index) not in node.partitions:
            node.lead(topic, index)
    writer = OffsetsTopicLog(partitions, node.replicas_of(topic), lambda: 0)
    writer._append(old, records)
    return old


def _keys(node: Node, topic: str, index: int) -> list[tuple[bytes, bytes | None]]:
    return [(r.key, r.value) for r in OffsetsTopicLog._read(node.log(topic, index)) if r.key is not None]


def _groups(node: Node, partitions: int) -> Coordinator:
    coordinator = Coordinator(BrokerConfig(), partitions, node.replicas_of(OFFSETS_TOPIC), lambda t, p: True,
                              FakeScheduler())
    for index in range(partitions):
        coordinator.load_partition(index)
    return coordinator


@run
async def test_offsets_stored_under_the_old_partition_are_read_moved_and_tombstoned(tmp_path: Path):
    node = Node(tmp_path)
    group = "my-group"  # hash -1906497762: Kafka's partition 12 of 50, odradek's old 36
    old = _legacy_write(node, OFFSETS_TOPIC, 50, group, [
        (offset_key(group, "t", 0), encode_offset_value(OffsetValue(41, commit_timestamp=1))),
        (offset_key(group, "t", 0), encode_offset_value(OffsetValue(42, commit_timestamp=2))),
        (offset_key(group, "t", 1), encode_offset_value(OffsetValue(7, commit_timestamp=2))),
        (group_config_key(group), encode_group_config_value({"share.record.lock.duration.ms": "20000"})),
    ])
    new = partition_for(group, 50)
    assert (old, new) == (36, 12)

    coordinator = _groups(node, 50)
    assert coordinator.owns(group)
    assert {(t, p, v.offset) for (t, p), v in coordinator.store.partitions(group).items()} == {("t", 0, 42),
                                                                                              ("t", 1, 7)}
    assert coordinator.share_groups.group_config(group, "share.record.lock.duration.ms") == "20000"
    # the records are written to the new partition with its placement record, then tombstoned in the old one
    await eventually(lambda: 12 in coordinator.log.placed
                     and any(v is None for _, v in _keys(node, OFFSETS_TOPIC, old)))
    moved = dict(_keys(node, OFFSETS_TOPIC, new))
    assert moved[offset_key(group, "t", 0)] == encode_offset_value(OffsetValue(42, commit_timestamp=2))
    assert PLACEMENT_KEY in moved
    assert {k for k, v in _keys(node, OFFSETS_TOPIC, old) if v is None} == {
        offset_key(group, "t", 0), offset_key(group, "t", 1), group_config_key(group)}
    # every partition got its placement record: the next start reads no other partition
    assert coordinator.log.placed == set(range(50))

    # a commit after the move lands in the new partition, and wins after a restart
    errors, durable = coordinator.offsets.commit(group, -1, "", None, -1, [("t", [(0, 43, -1, "", -1)])])
    assert errors == {("t", 0): 0}
    await asyncio.wrap_future(durable)
    assert dict(_keys(node, OFFSETS_TOPIC, new))[offset_key(group, "t", 0)] == encode_offset_value(
        coordinator.store.get(group, ("t", 0)))
    node.restart()
    again = _groups(node, 50)
    assert again.store.get(group, ("t", 0)).offset == 43 and again.store.get(group, ("t", 1)).offset == 7
    assert again.log.placed == set(range(50))
    node.close()


@run
async def test_a_newer_record_in_the_new_partition_wins_over_the_old_one(tmp_path: Path):
    """A broker that crashed after writing to the new partition but before the placement record: the load
    reads the old records first and the partition's own after them."""
    node = Node(tmp_path)
    group = "orders-consumer"  # Kafka's 40 of 50, old 8
    _legacy_write(node, OFFSETS_TOPIC, 50, group, [
        (offset_key(group, "t", 0), encode_offset_value(OffsetValue(5, commit_timestamp=1)))])
    OffsetsTopicLog(50, node.replicas_of(OFFSETS_TOPIC), lambda: 0)._append(40, [
        (offset_key(group, "t", 0), encode_offset_value(OffsetValue(9, commit_timestamp=2))),
        (offset_key(group, "t", 1), None)])
    coordinator = _groups(node, 50)
    assert coordinator.store.get(group, ("t", 0)).offset == 9
    await eventually(lambda: 40 in coordinator.log.placed)
    # the partition's own record is newer: no older value is copied after it
    assert [k for k, _ in _keys(node, OFFSETS_TOPIC, 40)][2:] == [PLACEMENT_KEY]
    node.close()


@run
async def test_a_group_placed_by_both_rules_alike_is_not_moved_and_a_single_partition_writes_nothing(tmp_path):
    node = Node(tmp_path)
    _legacy_write(node, OFFSETS_TOPIC, 50, "hello", [
        (offset_key("hello", "t", 0), encode_offset_value(OffsetValue(3, commit_timestamp=1)))])
    coordinator = _groups(node, 50)
    assert coordinator.store.get("hello", ("t", 0)).offset == 3
    await eventually(lambda: coordinator.log.placed == set(range(50)))
    assert [v for k, v in _keys(node, OFFSETS_TOPIC, 22) if k != PLACEMENT_KEY and v is None] == []

    single = Node(tmp_path / "single")
    _legacy_write(single, OFFSETS_TOPIC, 1, "my-group", [
        (offset_key("my-group", "t", 0), encode_offset_value(OffsetValue(3, commit_timestamp=1)))])
    one = _groups(single, 1)
    assert one.store.get("my-group", ("t", 0)).offset == 3
    assert len(_keys(single, OFFSETS_TOPIC, 0)) == 1, "one partition: both rules agree, nothing is written"
    node.close()
    single.close()


@run
async def test_a_transactional_id_keeps_its_producer_id_and_epoch_across_the_move(tmp_path: Path):
    node = Node(tmp_path)
    txn_id = "txn-neg"  # Kafka's 5 of 10, old 3
    state = TxnMetadata(txn_id, 4242, 7, 60_000, TxnState.EMPTY, last_update_timestamp=1)
    _legacy_write(node, TXN_TOPIC, 10, txn_id, [(encode_key(txn_id), encode_value(state))])

    async def allocate() -> int:
        raise AssertionError("a known transactional id gets no new producer id")

    def coordinator() -> TransactionCoordinator:
        txn = TransactionCoordinator(BrokerConfig(), OffsetsTopicLog(10, node.replicas_of(TXN_TOPIC), lambda: 0),
                                     allocate, None, lambda g: 0, lambda: 1, node.replicas_of(TXN_TOPIC))
        for index in range(10):
            txn.load_partition(index)
        return txn

    txn = coordinator()
    assert txn.owns(txn_id) and txn.log.partition_for(txn_id) == 5
    assert await txn.init_producer_id(txn_id, 60_000, -1, -1, 0) == (0, 4242, 8)
    await eventually(lambda: 5 in txn.log.placed)
    node.restart()
    txn = coordinator()
    assert await txn.init_producer_id(txn_id, 60_000, 4242, 8, 0) == (0, 4242, 9)
    node.close()


@run
async def test_share_state_is_found_under_its_old_partition(tmp_path: Path):
    node = Node(tmp_path)
    key = ("sg", bytes(16), 3)  # Kafka's 7 of 10, old 1
    _legacy_write(node, SHARE_STATE_TOPIC, 10, key_text(*key), [
        (share_state_key(*key), encode_share_state_value(100, 110, [(100, 104, 2, 1)], 3, 5))])
    state_log = ShareStateLog(10, node.replicas_of(SHARE_STATE_TOPIC), lambda: 0, lambda: None)
    share = ShareCoordinator(state_log)
    for index in range(10):
        share.load(index)
    assert state_log.partition_of(key) == 7
    stored = share.states[key]
    assert (stored.state_epoch, stored.leader_epoch, stored.start, stored.runs) == (3, 5, 100, [(100, 104, 2, 1)])
    await eventually(lambda: 7 in state_log.log.placed
                     and any(v is None for _, v in _keys(node, SHARE_STATE_TOPIC, 1)))
    node.close()


@run
async def test_records_left_behind_by_a_cut_short_move_are_tombstoned_by_maintenance(tmp_path: Path):
    """A crash after the new partition got its copy and placement record, before the old one's tombstones."""
    node = Node(tmp_path)
    group = "group-neg"  # Kafka's 42 of 50, old 6
    record = (offset_key(group, "t", 0), encode_offset_value(OffsetValue(5, commit_timestamp=1)))
    _legacy_write(node, OFFSETS_TOPIC, 50, group, [record])
    writer = OffsetsTopicLog(50, node.replicas_of(OFFSETS_TOPIC), lambda: 0)
    for index in range(50):
        writer._append(index, [(PLACEMENT_KEY, PLACEMENT_VALUE)])
    writer._append(42, [record])
    coordinator = _groups(node, 50)
    assert coordinator.store.get(group, ("t", 0)).offset == 5
    assert [v for _, v in _keys(node, OFFSETS_TOPIC, 6)] == [record[1], PLACEMENT_VALUE]
    assert await coordinator.log.drop_moved() == 1
    assert _keys(node, OFFSETS_TOPIC, 6)[-1] == (record[0], None)
    assert await coordinator.log.drop_moved() == 0
    node.restart()
    assert _groups(node, 50).store.get(group, ("t", 0)).offset == 5
    node.close()
