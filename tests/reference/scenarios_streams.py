"""Differential scenarios of KIP-1071, the streams rebalance protocol: StreamsGroupHeartbeat (88) and
StreamsGroupDescribe (89), the request checks and errors (unknown group, unknown member, fenced epochs, bad
topologies) and a simple join, compared with Apache Kafka 4.4. Same DSL as scenarios_kip848.py.

The topology of the joins is the smallest a Streams application sends: one subtopology "0" reading the
scenario's topic, no internal topics (`stateless`), or with a changelog topic (`stateful`), whose creation by
the coordinator the heartbeat reports as status MISSING_INTERNAL_TOPICS.
"""

from __future__ import annotations

from typing import Any, Callable

from .differential import Body, Call, Ctx, Scenario
from .scenarios import DESCRIBE_GROUPS, LIST_GROUPS, create_topic, group_id, group_ready, own_groups
from .scenarios_kip848 import (CONSUMER_GROUP_HEARTBEAT, API_VERSIONS, api_range, hb_body, members_sorted, ok)

STREAMS_GROUP_HEARTBEAT, STREAMS_GROUP_DESCRIBE = 88, 89


def subtopology(c: Ctx, changelog: bool = False, changelog_partitions: int = 0, regex: bool = False,
                source: str | None = None) -> Body:
    return {"subtopology_id": "0", "source_topics": [] if regex else [source or c.topic()],
            "source_topic_regex": [c.topic() + ".*"] if regex else [],
            "state_changelog_topics": [{"name": c.topic("store-changelog"), "partitions": changelog_partitions,
                                        "replication_factor": 0,
                                        "topic_configs": [{"key": "cleanup.policy", "value": "compact"}]}]
            if changelog else [],
            "repartition_sink_topics": [], "repartition_source_topics": [], "copartition_groups": []}


def topology(**kw: Any) -> Callable[[Ctx], Body]:
    return lambda c: {"epoch": 0, "subtopologies": [subtopology(c, **kw)]}


def sg_body(member: str, epoch: int, *, join: bool = False, **fields: Any) -> Callable[[Ctx], Body]:
    """A StreamsGroupHeartbeat: every optional field null, or with `join` what a joining member sends
    (rebalance timeout, the stateless topology, empty task lists, process id); `fields` override."""
    def build(c: Ctx) -> Body:
        body = {"group_id": group_id(c), "member_id": member, "member_epoch": epoch,
                "endpoint_information_epoch": 0, "instance_id": None, "rack_id": None,
                "rebalance_timeout_ms": -1, "topology": None, "active_tasks": None, "standby_tasks": None,
                "warmup_tasks": None, "process_id": None, "user_endpoint": None, "client_tags": None,
                "task_offsets": None, "task_end_offsets": None, "shutdown_application": False}
        if join:
            body.update(rebalance_timeout_ms=30000, topology=topology()(c), active_tasks=[], standby_tasks=[],
                        warmup_tasks=[], process_id=f"process-{member}", client_tags=[])
        body.update({k: (v(c) if callable(v) else v) for k, v in fields.items()})
        return body
    return build


def sg(member: str, epoch: int, **kw: Any) -> Call:
    return Call(STREAMS_GROUP_HEARTBEAT, sg_body(member, epoch, **kw))


def joined(member: str = "m1") -> Call:
    """Setup: the member joins with the stateless topology and is answered without a status (the topic is
    known to the coordinator: Kafka's metadata image can lag behind CreateTopics), epoch saved."""
    def save(c: Ctx, r: Body) -> None:
        c.vars[f"epoch {member}"] = r["member_epoch"]
    return Call(STREAMS_GROUP_HEARTBEAT, sg_body(member, 0, join=True),
                until=lambda r: ok(r) and not r["status"] and r["member_epoch"] > 0, save=save)


def streams_topic() -> tuple[Call, ...]:
    return (*create_topic(partitions=2), *group_ready())


def describe(c: Ctx) -> Body:
    return {"group_ids": [group_id(c)], "include_authorized_operations": False}


def heartbeat_answer(c: Ctx, r: Body) -> Body:
    """What a heartbeat's answer says, without the intervals each broker's configuration sets."""
    return {k: v for k, v in members_sorted(c, r).items()
            if k not in ("heartbeat_interval_ms", "task_offset_interval_ms", "acceptable_recovery_lag",
                         "acceptable_recovery_lag_legacy", "throttle_time_ms")}


def S(id: str, setup: tuple[Call, ...], request: Call, **kw: Any) -> Scenario:
    kw.setdefault("project", heartbeat_answer if request.api == STREAMS_GROUP_HEARTBEAT else members_sorted)
    return Scenario(id, tuple(setup), request, **kw)


SCENARIOS_STREAMS: list[Scenario] = [
    S("sg-api-versions", (), Call(API_VERSIONS, {"client_software_name": "odradek-differential",
                                                 "client_software_version": "1"}),
      project=api_range(STREAMS_GROUP_HEARTBEAT, STREAMS_GROUP_DESCRIBE)),

    # --- StreamsGroupHeartbeat: the request checks
    S("sg-heartbeat-join-without-topology", streams_topic(), sg("m1", 0, join=True, topology=None)),
    S("sg-heartbeat-join-source-regex", streams_topic(), sg("m1", 0, join=True, topology=topology(regex=True))),
    S("sg-heartbeat-join-changelog-with-partitions", streams_topic(),
      sg("m1", 0, join=True, topology=topology(changelog=True, changelog_partitions=3))),
    S("sg-heartbeat-join-without-rebalance-timeout", streams_topic(), sg("m1", 0, join=True, rebalance_timeout_ms=-1)),
    S("sg-heartbeat-join-with-active-tasks", streams_topic(),
      sg("m1", 0, join=True, active_tasks=[{"subtopology_id": "0", "partitions": [0]}])),
    S("sg-heartbeat-empty-member-id", streams_topic(), sg("", 0, join=True)),
    S("sg-heartbeat-epoch-below-minus-two", streams_topic(), sg("m1", -3)),
    S("sg-heartbeat-some-task-lists-null", streams_topic(), sg("m1", 1, active_tasks=[])),
    S("sg-heartbeat-topology-after-join", streams_topic(), sg("m1", 1, topology=topology())),

    # --- StreamsGroupHeartbeat: malformed topologies (the hostile cases Kafka also answers)
    S("sg-heartbeat-join-copartition-index-out-of-range", streams_topic(),
      sg("m1", 0, join=True, topology=lambda c: {"epoch": 0, "subtopologies": [{
          **subtopology(c), "copartition_groups": [{"source_topics": [5], "source_topic_regex": [],
                                                    "repartition_source_topics": []}]}]})),
    S("sg-heartbeat-join-duplicate-subtopology", streams_topic(),
      sg("m1", 0, join=True, topology=lambda c: {"epoch": 0, "subtopologies": [subtopology(c), subtopology(c)]})),
    S("sg-heartbeat-join-invalid-topic-name", streams_topic(),
      sg("m1", 0, join=True, topology=lambda c: {"epoch": 0, "subtopologies": [subtopology(c, source="bad name!")]})),
    S("sg-heartbeat-owned-task-out-of-range", (*streams_topic(), joined()),
      Call(STREAMS_GROUP_HEARTBEAT, lambda c: sg_body(
          "m1", c.vars["epoch m1"], active_tasks=[{"subtopology_id": "0", "partitions": [7]}], standby_tasks=[],
          warmup_tasks=[])(c))),
    S("sg-heartbeat-owned-unknown-subtopology", (*streams_topic(), joined()),
      Call(STREAMS_GROUP_HEARTBEAT, lambda c: sg_body(
          "m1", c.vars["epoch m1"], active_tasks=[{"subtopology_id": "9", "partitions": [0]}], standby_tasks=[],
          warmup_tasks=[])(c))),

    # --- StreamsGroupHeartbeat: groups and members
    S("sg-heartbeat-unknown-group", streams_topic(), sg("m1", 1)),
    S("sg-heartbeat-join-missing-source-topic", streams_topic(),
      sg("m1", 0, join=True, topology=lambda c: {"epoch": 0, "subtopologies": [
          subtopology(c, source=c.topic("missing"))]})),
    S("sg-heartbeat-join", streams_topic(), sg("m1", 0, join=True)),
    S("sg-heartbeat-unknown-member", (*streams_topic(), joined()), sg("nobody", 1)),
    S("sg-heartbeat-greater-member-epoch", (*streams_topic(), joined()), sg("m1", 99)),
    S("sg-heartbeat-steady", (*streams_topic(), joined()),
      Call(STREAMS_GROUP_HEARTBEAT, lambda c: sg_body("m1", c.vars["epoch m1"])(c))),
    S("sg-heartbeat-leave", (*streams_topic(), joined()), sg("m1", -1)),
    S("sg-heartbeat-consumer-member-into-streams-group", (*streams_topic(), joined()),
      Call(CONSUMER_GROUP_HEARTBEAT, hb_body("c1", 0, join=True))),

    # --- StreamsGroupDescribe
    S("sg-describe-unknown-group", streams_topic(), Call(STREAMS_GROUP_DESCRIBE, describe)),
    S("sg-describe-empty-group-id", (), Call(STREAMS_GROUP_DESCRIBE, {"group_ids": [""],
                                                                      "include_authorized_operations": False})),
    S("sg-describe-consumer-group", (*streams_topic(), Call(CONSUMER_GROUP_HEARTBEAT, hb_body("c1", 0, join=True),
                                                            until=ok)),
      Call(STREAMS_GROUP_DESCRIBE, describe)),
    S("sg-describe-one-member", (*streams_topic(), joined()), Call(STREAMS_GROUP_DESCRIBE, describe)),

    # --- what the other group APIs say of a streams group
    S("sg-list-groups", (*streams_topic(), joined()),
      Call(LIST_GROUPS, {"states_filter": [], "types_filter": []}, version=5), project=own_groups),
    S("sg-list-groups-streams-only", (*streams_topic(), joined()),
      Call(LIST_GROUPS, {"states_filter": [], "types_filter": ["streams"]}, version=5), project=own_groups),
    S("sg-describe-groups-v6", (*streams_topic(), joined()),
      Call(DESCRIBE_GROUPS, lambda c: {"groups": [group_id(c)], "include_authorized_operations": False},
           version=6)),
    S("sg-consumer-group-describe", (*streams_topic(), joined()),
      Call(69, lambda c: {"group_ids": [group_id(c)], "include_authorized_operations": False})),
]
