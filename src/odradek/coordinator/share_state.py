"""`__share_group_state`: the durable delivery state of share groups (KIP-932).

Kafka keeps each share partition's state (start offset, acknowledged and archived records, delivery counts) in
the internal topic `__share_group_state`, through its share coordinator. odradek keeps it in a compacted
internal topic of that name too, written and replayed with the machinery of `__consumer_offsets`
(persistence.OffsetsTopicLog: one v2 batch per append, a future done once the batch is durable and replicated,
snapshots that bound replay). One record per (group, topic id, partition): ShareStateKey and ShareStateValue
(persistence.py), a null value deleting it. Its partition is Kafka's `Utils.abs(key.hashCode()) % partitions`
(placement.py) of the key's text form `group:topic-id:partition` (SharePartitionKey.asCoordinatorKey, the
topic id in base64url without padding, as Kafka's Uuid.toString) over the topic's partition count, `share.coordinator.state.topic.num.partitions` (odradek's default 1, as for `__transaction_state`).

The topic is created when the first state is read or written, so a broker whose clients never use share
groups has none. On a single node the creation makes this broker the leader of its partitions at once, which
loads them (nothing to read yet); on every later start, and in a cluster whenever a broker becomes the leader
of one of its partitions, the share coordinator (share_coordinator.py) replays it (`replay`).

Not thread-safe; owned by the event loop.
"""

from __future__ import annotations

import base64
import logging
from concurrent.futures import Future
from typing import TYPE_CHECKING, Callable, Iterator

from odradek.coordinator.persistence import (
    OffsetsTopicLog,
    decode_key,
    decode_share_state_value,
    share_state_key,
)

if TYPE_CHECKING:
    from odradek.cluster.partition import Partition

log = logging.getLogger(__name__)

SHARE_STATE_TOPIC = "__share_group_state"
StateKey = tuple[str, bytes, int]  # (group, topic id, partition)
# (start, end, runs, state epoch, leader epoch): share_partition.snapshot() and the share coordinator's epochs
StateValue = tuple[int, int, list[tuple[int, int, int, int]], int, int]


def key_text(group_id: str, topic_id: bytes, partition: int) -> str:
    """Kafka's text form of a share-partition key, which places it in a partition of the topic."""
    return f"{group_id}:{base64.urlsafe_b64encode(topic_id).decode().rstrip('=')}:{partition}"


def _key_text_of(raw: bytes) -> str | None:
    """The text form of a stored share-state key, which places it (None: another record)."""
    key = decode_key(raw)
    return key_text(key[1], key[2], key[3]) if key is not None and key[0] == "share_state" else None


class ShareStateLog:
    def __init__(self, partitions: int, get_partition: Callable[[int], "Partition | None"],
                 clock_ms: Callable[[], int], create_topic: Callable[[], None]) -> None:
        self.log = OffsetsTopicLog(partitions, get_partition, clock_ms, owner_of=_key_text_of)
        self.log.name = SHARE_STATE_TOPIC
        self.create_topic = create_topic  # no-op once it exists
        self.loaded: set[int] = set()  # partitions led (and replayed) here

    def partition_of(self, key: StateKey) -> int:
        return self.log.partition_for(key_text(*key))

    def append(self, key: StateKey, value: bytes | None) -> Future:
        """Append one state (None: delete it); the future completes once it is durable. Creates the topic on
        first use; raises when its partition is not led here (NotLeaderError)."""
        partition = self.partition_of(key)
        if partition not in self.loaded:
            self.create_topic()  # no-op once it exists; a single node leads (and loads) it at once
        return self.log.append(key_text(*key), [(share_state_key(*key), value)])

    def replay(self, partition: int) -> Iterator[tuple[StateKey, StateValue | None]]:
        """The last state of every key of ``partition`` (None: deleted), in log order."""
        for rec in self.log.replay_for_load(partition):
            if rec.key is None:
                continue
            try:
                key = decode_key(rec.key)
                if key is None or key[0] != "share_state":
                    continue
                yield (key[1], key[2], key[3]), None if rec.value is None else decode_share_state_value(rec.value)
            except Exception:
                log.warning("skipping an unreadable %s record", SHARE_STATE_TOPIC, exc_info=True)
