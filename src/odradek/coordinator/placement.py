"""Where a coordinator key lives: the partition of an internal topic that holds a group, a transactional id or
a share-partition key, and the move of keys that earlier odradek versions stored elsewhere.

Kafka's rule, one for all three coordinators (GroupCoordinatorService.partitionFor,
TransactionStateManager.partitionFor, ShareCoordinatorService.partitionFor)::

    partition = Utils.abs(key.hashCode()) % partition_count

where `hashCode` is Java's String.hashCode (over UTF-16 code units, a signed 32-bit int) and `Utils.abs` is
Math.abs with 0 for Integer.MIN_VALUE. The key is the group id (`__consumer_offsets`), the transactional id
(`__transaction_state`), or Kafka's text form of a share-partition key `group:topic-id:partition`, the topic
id in base64url without padding (`__share_group_state`, share_state.key_text).

odradek before issue 37 masked the sign bit instead (`hash & 0x7FFFFFFF`), which picks another partition for
about half of all keys (those with a negative hash). `legacy_partition_for` keeps that rule for one purpose:
finding the records those versions stored, so that the coordinator of a key's new partition can read them
and move them there (persistence.OffsetsTopicLog.replay_for_load; the design is in
docs/coordinator-placement.md). A partition whose records have been moved carries a placement record
(`PLACEMENT_KEY`), after which its loads no longer look at the other partitions.
"""

from __future__ import annotations

import struct

_MIN_INT = -(1 << 31)

# The placement record: key version 1003 (odradek's own, listed with the key versions of persistence.py; Kafka's
# tools and every replay here skip key versions they do not know), value version 0 and the rule (1: Kafka's).
PLACEMENT_KEY = struct.pack(">h", 1003)
PLACEMENT_VALUE = struct.pack(">hh", 0, 1)


def java_string_hash(s: str) -> int:
    """Java's String.hashCode (over UTF-16 code units), as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(key: str, partitions: int) -> int:
    """The partition of an internal topic with ``partitions`` partitions that holds ``key``: Kafka's
    `Utils.abs(key.hashCode()) % partitions` (Utils.abs maps Integer.MIN_VALUE to 0)."""
    h = java_string_hash(key)
    return (0 if h == _MIN_INT else abs(h)) % partitions


def legacy_partition_for(key: str, partitions: int) -> int:
    """Where odradek before issue 37 put ``key`` (the sign bit masked): only for finding what it stored."""
    return (java_string_hash(key) & 0x7FFFFFFF) % partitions


def may_have_moved(partitions: int) -> bool:
    """Whether the two rules can disagree at all: not on a topic of one partition."""
    return partitions > 1
