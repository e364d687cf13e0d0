"""Differential scenarios of share groups (KIP-932): ShareFetch v2's acquire modes (KIP-1206),
AlterShareGroupOffsets, and DescribeShareGroupOffsets of every topic (`topics` null).

Same DSL as scenarios.py. The group reads from the earliest offset (`share.auto.offset.reset`, set with
IncrementalAlterConfigs on the GROUP resource before the member joins); the member id is fixed. The topic
holds three batches of three records (offsets 0-2, 3-5, 6-8), so a limit of one or two records shows whether
a broker rounds up to the batch (batch-optimized mode) or stops at the limit (record-limit mode).
"""

from __future__ import annotations

from typing import Any, Callable

from .differential import Body, Call, Ctx
from .scenarios import S, create_topic, filled_topic, group_id, group_ready, produce

SHARE_GROUP_HEARTBEAT, SHARE_FETCH, SHARE_ACKNOWLEDGE, INCREMENTAL_ALTER_CONFIGS = 76, 78, 79, 44
DESCRIBE_SHARE_GROUP_OFFSETS, ALTER_SHARE_GROUP_OFFSETS = 90, 91
MEMBER = "share-member-0000000001"
GROUP_RESOURCE, SET = 32, 0


def group_config_body(name: str, value: str) -> Callable[[Ctx], Body]:
    return lambda c: {"validate_only": False, "resources": [
        {"resource_type": GROUP_RESOURCE, "resource_name": group_id(c), "configs": [
            {"name": name, "config_operation": SET, "value": value}]}]}


def group_config(name: str, value: str) -> Call:
    """Setup: a group config set (IncrementalAlterConfigs on the GROUP resource)."""
    return Call(INCREMENTAL_ALTER_CONFIGS, group_config_body(name, value),
                until=lambda r: r["responses"][0]["error_code"] == 0)


def earliest() -> Call:
    """Setup: the group starts at the earliest offset."""
    return group_config("share.auto.offset.reset", "earliest")


def joined() -> Call:
    """Setup: the member joins the share group and is assigned the topic's partition (its epoch saved)."""
    def saved(c: Ctx, r: Body) -> None:
        c.vars["epoch"] = r["member_epoch"]
    return Call(SHARE_GROUP_HEARTBEAT, lambda c: {"group_id": group_id(c), "member_id": MEMBER, "member_epoch": 0,
                                                  "rack_id": None, "subscribed_topic_names": [c.topic()]},
                until=lambda r: r["error_code"] == 0 and bool(r["assignment"])
                and bool(r["assignment"]["topic_partitions"]), save=saved)


def share_fetch_body(epoch: int, max_records: int, mode: int, max_bytes: int = 1 << 20,
                     max_wait_ms: int = 5000) -> Callable[[Ctx], Body]:
    return lambda c: {"group_id": group_id(c), "member_id": MEMBER, "share_session_epoch": epoch,
                      "max_wait_ms": max_wait_ms, "min_bytes": 1, "max_bytes": max_bytes, "max_records": max_records,
                      "batch_size": max_records, "share_acquire_mode": mode, "is_renew_ack": False,
                      "topics": [{"topic_id": c.topic_id(c.topic()), "partitions": [
                          {"partition_index": 0, "acknowledgement_batches": []}]}],
                      "forgotten_topics_data": []}


def two_partitions_fetch_body(epoch: int, max_records: int = 500) -> Callable[[Ctx], Body]:
    return lambda c: {"group_id": group_id(c), "member_id": MEMBER, "share_session_epoch": epoch,
                      "max_wait_ms": 5000, "min_bytes": 1, "max_bytes": 1 << 20, "max_records": max_records,
                      "batch_size": max_records, "share_acquire_mode": 0, "is_renew_ack": False,
                      "topics": [{"topic_id": c.topic_id(c.topic()), "partitions": [
                          {"partition_index": i, "acknowledgement_batches": []} for i in (0, 1)]}],
                      "forgotten_topics_data": []}


def two_filled_partitions() -> tuple[Call, ...]:
    """Setup: a topic of two partitions, each holding two batches of three records."""
    return (*create_topic(partitions=2), produce(), produce(ts=10), produce(partition=1), produce(partition=1, ts=10))


def release_body(epoch: int, first: int, last: int) -> Callable[[Ctx], Body]:
    """ShareAcknowledge releasing offsets [first, last] (type 2) of the member's partition 0."""
    return lambda c: {"group_id": group_id(c), "member_id": MEMBER, "share_session_epoch": epoch,
                      "is_renew_ack": False, "topics": [{"topic_id": c.topic_id(c.topic()), "partitions": [
                          {"partition_index": 0, "acknowledgement_batches": [
                              {"first_offset": first, "last_offset": last, "acknowledge_types": [2]}]}]}]}


def big_batch_topic(records: int) -> tuple[Call, ...]:
    """Setup: a topic holding one batch of ``records`` records (offsets 0 .. records-1)."""
    return (*create_topic(), produce(values=tuple(b"v%d" % i for i in range(records))))


def acquired(r: Body) -> bool:
    return any(p["acquired_records"] for t in r["responses"] for p in t["partitions"])


def member_ready() -> tuple[Call, ...]:
    """Setup: a filled topic, the group reading from the earliest offset, its one member assigned."""
    return (*filled_topic(), *group_ready(), earliest(), joined())


def first_fetch() -> Call:
    """Setup: the session opens and one record is asked for in batch-optimized mode (the first batch comes)."""
    return Call(SHARE_FETCH, share_fetch_body(0, 1, 0), version=2, until=acquired)


def acquired_only(c: Ctx, r: Any) -> Any:
    """What was acquired, per partition, and the errors (the records' bytes are the same log both ways)."""
    if not isinstance(r, dict):
        return r
    return {"error_code": r["error_code"], "partitions": [
        {"partition_index": p["partition_index"], "error_code": p["error_code"],
         "acknowledge_error_code": p["acknowledge_error_code"], "acquired_records": p["acquired_records"]}
        for t in r["responses"] for p in t["partitions"]]}


def acquired_offsets(c: Ctx, r: Any) -> Any:
    """As acquired_only, with the acquired records as (offset, delivery count) in offset order: Kafka splits
    and orders its ranges by its in-flight batches (new records' ranges before re-acquired ones), which a
    client does not see (it takes each record whose offset is in a range)."""
    projected = acquired_only(c, r)
    if isinstance(projected, dict):
        for p in projected["partitions"]:
            p["acquired_records"] = sorted((o, a["delivery_count"]) for a in p["acquired_records"]
                                           for o in range(a["first_offset"], a["last_offset"] + 1))
    return projected


def alter_body(start: int) -> Callable[[Ctx], Body]:
    return lambda c: {"group_id": group_id(c), "topics": [
        {"topic_name": c.topic(), "partitions": [{"partition_index": 0, "start_offset": start}]}]}


def describe_all(c: Ctx) -> Body:
    return {"groups": [{"group_id": group_id(c), "topics": None}]}


SCENARIOS_SHARE = [
    S("share-fetch-v2-batch-optimized", member_ready(), Call(SHARE_FETCH, share_fetch_body(0, 1, 0), version=2),
      project=acquired_only, about="batch-optimized: one record asked for, the whole first batch acquired"),
    S("share-fetch-v2-record-limit", (*member_ready(), first_fetch()),
      Call(SHARE_FETCH, share_fetch_body(1, 2, 1), version=2), project=acquired_only,
      about="record-limit: two records asked for, exactly two acquired from the second batch"),
    S("share-fetch-v2-unknown-acquire-mode", member_ready(), Call(SHARE_FETCH, share_fetch_body(0, 1, 7), version=2),
      project=acquired_only),
    S("share-fetch-v1-limit-inside-second-batch", member_ready(),
      Call(SHARE_FETCH, share_fetch_body(0, 4, 0), version=1), project=acquired_only,
      about="issue 40 item 9: v1 (batch-optimized only), four records asked for: the batch holding the fourth "
            "is finished"),
    S("share-fetch-v2-batch-optimized-limit-4", member_ready(),
      Call(SHARE_FETCH, share_fetch_body(0, 4, 0), version=2), project=acquired_only),
    S("share-fetch-v2-record-limit-4", member_ready(),
      Call(SHARE_FETCH, share_fetch_body(0, 4, 1), version=2), project=acquired_only),
    S("share-fetch-v2-max-bytes-zero", member_ready(),
      Call(SHARE_FETCH, share_fetch_body(0, 10, 0, max_bytes=0, max_wait_ms=500), version=2),
      project=acquired_only, about="issue 40 item 11 (librdkafka 0180): fetch.max.bytes=0 gets no records"),
    S("share-fetch-v1-max-bytes-one", member_ready(),
      Call(SHARE_FETCH, share_fetch_body(0, 10, 0, max_bytes=1), version=1),
      project=acquired_only, about="a soft limit: at least one batch"),
    S("share-fetch-released-batch-again",
      (*member_ready(), Call(SHARE_FETCH, share_fetch_body(0, 2, 1), version=2, until=acquired),
       Call(SHARE_ACKNOWLEDGE, release_body(1, 0, 1), version=2, until=lambda r: r["error_code"] == 0)),
      Call(SHARE_FETCH, share_fetch_body(2, 1, 0), version=2), project=acquired_only,
      about="issue 40 item 9: records released together come back together, one record asked for"),
    S("share-fetch-released-batch-again-v1",
      (*member_ready(), Call(SHARE_FETCH, share_fetch_body(0, 2, 1), version=2, until=acquired),
       Call(SHARE_ACKNOWLEDGE, release_body(1, 0, 1), version=2, until=lambda r: r["error_code"] == 0)),
      Call(SHARE_FETCH, share_fetch_body(2, 5, 0), version=2), project=acquired_offsets),
    S("share-fetch-record-locks-cap",
      (*big_batch_topic(150), *group_ready(), earliest(), group_config("share.partition.max.record.locks", "100"),
       joined()),
      Call(SHARE_FETCH, share_fetch_body(0, 500, 0), version=2), project=acquired_only,
      about="issue 40 item 9: the group's share.partition.max.record.locks against one batch of 150 records"),
    S("share-fetch-record-locks-cap-record-limit",
      (*big_batch_topic(150), *group_ready(), earliest(), group_config("share.partition.max.record.locks", "100"),
       joined()),
      Call(SHARE_FETCH, share_fetch_body(0, 500, 1), version=2), project=acquired_only),
    S("share-fetch-record-locks-cap-full",
      (*big_batch_topic(150), *group_ready(), earliest(), group_config("share.partition.max.record.locks", "100"),
       joined(), Call(SHARE_FETCH, share_fetch_body(0, 500, 0), version=2, until=acquired)),
      Call(SHARE_FETCH, share_fetch_body(1, 500, 0, max_wait_ms=300), version=2), project=acquired_only,
      about="the window is full: nothing more"),
    *[S(f"share-record-locks-config-{value}", group_ready(),
        Call(INCREMENTAL_ALTER_CONFIGS, group_config_body("share.partition.max.record.locks", value)),
        about="issue 40 item 9: Kafka's bounds, group.share.{min,max}.partition.max.record.locks")
      for value in ("99", "100", "4000", "4001", "-1", "abc", "2147483648")],
    S("share-fetch-two-partitions-first", (*two_filled_partitions(), *group_ready(), earliest(), joined()),
      Call(SHARE_FETCH, two_partitions_fetch_body(0), version=1), project=acquired_offsets,
      about="issue 40 item 11 (librdkafka 0179): which partitions the first fetch of a session answers"),
    S("share-fetch-two-partitions-second",
      (*two_filled_partitions(), *group_ready(), earliest(), joined(),
       Call(SHARE_FETCH, two_partitions_fetch_body(0), version=1, until=acquired)),
      Call(SHARE_FETCH, two_partitions_fetch_body(1), version=1), project=acquired_offsets),
    S("share-fetch-two-partitions-initialized",
      (*two_filled_partitions(), *group_ready(), earliest(), joined(),
       Call(SHARE_FETCH, two_partitions_fetch_body(0), version=1, until=acquired),
       Call(SHARE_FETCH, two_partitions_fetch_body(1), version=1, until=acquired),
       produce(ts=20), produce(partition=1, ts=20)),
      Call(SHARE_FETCH, two_partitions_fetch_body(2), version=1), project=acquired_offsets,
      about="both partitions' state known: one response, both partitions?"),
    S("share-alter-offsets", (*filled_topic(), *group_ready()), Call(ALTER_SHARE_GROUP_OFFSETS, alter_body(2))),
    S("share-alter-offsets-negative", (*filled_topic(), *group_ready()),
      Call(ALTER_SHARE_GROUP_OFFSETS, alter_body(-5))),
    S("share-describe-offsets-joined-never-fetched", (*filled_topic(), *group_ready(), joined()),
      Call(DESCRIBE_SHARE_GROUP_OFFSETS, describe_all, version=1),
      about="issue 40 item 7: a group that never fetched has no start offset (-1)"),
    S("share-describe-offsets-after-empty-fetch",
      (*filled_topic(), *group_ready(), joined(),
       Call(SHARE_FETCH, share_fetch_body(0, 10, 0), version=2, until=lambda r: r["error_code"] == 0)),
      Call(DESCRIBE_SHARE_GROUP_OFFSETS, describe_all, version=1),
      about="issue 40 item 7: a group reading from the latest offset fetched once and got nothing"),
    S("share-describe-offsets-all-topics-after-alter",
      (*filled_topic(), *group_ready(), Call(ALTER_SHARE_GROUP_OFFSETS, alter_body(2),
                                             until=lambda r: r["responses"][0]["partitions"][0]["error_code"] == 0)),
      Call(DESCRIBE_SHARE_GROUP_OFFSETS, describe_all, version=1)),
]

assert len({s.id for s in SCENARIOS_SHARE}) == len(SCENARIOS_SHARE), "scenario ids must be unique"
