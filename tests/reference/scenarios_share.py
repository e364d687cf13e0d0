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
from .scenarios import S, filled_topic, group_id, group_ready

SHARE_GROUP_HEARTBEAT, SHARE_FETCH, INCREMENTAL_ALTER_CONFIGS = 76, 78, 44
DESCRIBE_SHARE_GROUP_OFFSETS, ALTER_SHARE_GROUP_OFFSETS = 90, 91
MEMBER = "share-member-0000000001"
GROUP_RESOURCE, SET = 32, 0


def earliest() -> Call:
    """Setup: the group starts at the earliest offset."""
    return Call(INCREMENTAL_ALTER_CONFIGS, lambda c: {"validate_only": False, "resources": [
        {"resource_type": GROUP_RESOURCE, "resource_name": group_id(c), "configs": [
            {"name": "share.auto.offset.reset", "config_operation": SET, "value": "earliest"}]}]},
        until=lambda r: r["responses"][0]["error_code"] == 0)


def joined() -> Call:
    """Setup: the member joins the share group and is assigned the topic's partition (its epoch saved)."""
    def saved(c: Ctx, r: Body) -> None:
        c.vars["epoch"] = r["member_epoch"]
    return Call(SHARE_GROUP_HEARTBEAT, lambda c: {"group_id": group_id(c), "member_id": MEMBER, "member_epoch": 0,
                                                  "rack_id": None, "subscribed_topic_names": [c.topic()]},
                until=lambda r: r["error_code"] == 0 and bool(r["assignment"])
                and bool(r["assignment"]["topic_partitions"]), save=saved)


def share_fetch_body(epoch: int, max_records: int, mode: int) -> Callable[[Ctx], Body]:
    return lambda c: {"group_id": group_id(c), "member_id": MEMBER, "share_session_epoch": epoch,
                      "max_wait_ms": 5000, "min_bytes": 1, "max_bytes": 1 << 20, "max_records": max_records,
                      "batch_size": max_records, "share_acquire_mode": mode, "is_renew_ack": False,
                      "topics": [{"topic_id": c.topic_id(c.topic()), "partitions": [
                          {"partition_index": 0, "acknowledgement_batches": []}]}],
                      "forgotten_topics_data": []}


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
