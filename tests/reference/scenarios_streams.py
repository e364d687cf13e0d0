"""Differential scenarios of KIP-1071, the streams rebalance protocol: StreamsGroupHeartbeat (88) and
StreamsGroupDescribe (89), the request checks and errors (unknown group, unknown member, fenced epochs, bad
topologies), a simple join, static members (group.instance.id: leave for now with epoch -2, rejoin, duplicate,
fenced and unknown instance ids), interactive-query endpoints (EndpointInformationEpoch,
PartitionsByUserEndpoint), the warm-up group configs and a moved stateful task (no warm-up in Kafka 4.4),
compared with Apache Kafka 4.4. Same DSL as scenarios_kip848.py.

The topology of the joins is the smallest a Streams application sends: one subtopology "0" reading the
scenario's topic, no internal topics (`stateless`), or with a changelog topic (`stateful`), whose creation by
the coordinator the heartbeat reports as status MISSING_INTERNAL_TOPICS.
"""

from __future__ import annotations

from typing import Any, Callable

from .differential import Body, Call, Ctx, Scenario
from .scenarios import (DESCRIBE_GROUPS, INCREMENTAL_ALTER_CONFIGS, LIST_GROUPS, create_topic, group_id, group_ready,
                        own_groups)
from .scenarios_kip848 import (CONSUMER_GROUP_HEARTBEAT, API_VERSIONS, api_range, hb_body, members_sorted, ok)
from .scenarios_share import group_config, group_config_body

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


def save_epochs(member: str) -> Callable[[Ctx, Body], None]:
    def save(c: Ctx, r: Body) -> None:
        c.vars[f"epoch {member}"] = r["member_epoch"]
        c.vars[f"endpoint epoch {member}"] = r["endpoint_information_epoch"]
    return save


def joined_with(member: str, **fields: Any) -> Call:
    """Setup: as `joined`, with more join fields (an endpoint, a stateful topology)."""
    return Call(STREAMS_GROUP_HEARTBEAT, sg_body(member, 0, join=True, **fields),
                until=lambda r: ok(r) and not r["status"] and r["member_epoch"] > 0, save=save_epochs(member))


def static_joined(member: str = "m1", instance: str = "i1") -> tuple[Call, ...]:
    """Setup: a static member joins once (a second join with its instance id would be refused, the instance
    id being in use), then heartbeats, saying it owns nothing yet, until its tasks are assigned."""
    return (Call(STREAMS_GROUP_HEARTBEAT, sg_body(member, 0, join=True, instance_id=instance), until=ok,
                 save=save_epochs(member)),
            Call(STREAMS_GROUP_HEARTBEAT, lambda c: sg_body(
                member, c.vars[f"epoch {member}"], instance_id=instance, active_tasks=[], standby_tasks=[],
                warmup_tasks=[])(c), until=lambda r: ok(r) and not r["status"] and r["member_epoch"] > 0,
                 save=save_epochs(member)))


def settled(member: str) -> Call:
    """Setup: a member that joined heartbeats, saying it owns nothing yet, until its answer has no status
    (Kafka 4.4 delays an assignment that follows another within `group.streams.assignment.interval.ms`)."""
    return Call(STREAMS_GROUP_HEARTBEAT, lambda c: sg_body(
        member, c.vars[f"epoch {member}"], active_tasks=[], standby_tasks=[], warmup_tasks=[])(c),
        until=lambda r: ok(r) and not r["status"], save=save_epochs(member))


def static_left(member: str = "m1", instance: str = "i1") -> Call:
    """Setup: the static member leaves for now (epoch -2)."""
    return Call(STREAMS_GROUP_HEARTBEAT, sg_body(member, -2, instance_id=instance), until=ok)


def endpoint(port: int) -> Body:
    return {"host": "app-host", "port": port}


def endpoints_sorted(c: Ctx, r: Body) -> Body:
    """A heartbeat answer with its endpoints in port order (Kafka lists them in hash order)."""
    out = heartbeat_answer(c, r)
    if out.get("partitions_by_user_endpoint"):
        out["partitions_by_user_endpoint"] = sorted(
            ({**e, "active_partitions": sorted(e["active_partitions"], key=lambda t: t["topic"]),
              "standby_partitions": sorted(e["standby_partitions"], key=lambda t: t["topic"])}
             for e in out["partitions_by_user_endpoint"]), key=lambda e: e["user_endpoint"]["port"])
    return out


def task_counts(c: Ctx, r: Body) -> Body:
    """A heartbeat answer with the number of tasks of each kind instead of which ones (which of two tasks
    a member keeps is the assignor's choice; that a moved stateful task comes as an active task straight
    away, never as a warm-up first, is what is compared)."""
    out = heartbeat_answer(c, r)
    for kind in ("active_tasks", "standby_tasks", "warmup_tasks"):
        if out.get(kind) is not None:
            out[kind] = sum(len(t["partitions"]) for t in out[kind])
    return out


def stateful_task_moves() -> tuple[Call, ...]:
    """Setup: m1 holds both tasks of a stateful topology (a changelog topic); m2 of another process joins;
    m1 reports its tasks, is asked to give one up, and reports that it did. m2's next heartbeat is compared."""
    stateful = topology(changelog=True)
    both = [{"subtopology_id": "0", "partitions": [0, 1]}]

    def m1_reports(tasks_of: Callable[[Ctx], Any]) -> Call:
        def save(c: Ctx, r: Body) -> None:
            save_epochs("m1")(c, r)
            if r["active_tasks"] is not None:
                c.vars["m1 active"] = r["active_tasks"]
        return Call(STREAMS_GROUP_HEARTBEAT, lambda c: sg_body(
            "m1", c.vars["epoch m1"], active_tasks=tasks_of(c), standby_tasks=[], warmup_tasks=[])(c),
                    until=ok, save=save)

    return (*streams_topic(),
            joined_with("m1", topology=stateful),
            Call(STREAMS_GROUP_HEARTBEAT, sg_body("m2", 0, join=True, topology=stateful), until=ok,
                 save=save_epochs("m2")),
            settled("m2"),
            m1_reports(lambda c: both),
            m1_reports(lambda c: c.vars.get("m1 active", both)))


def partition_counts(c: Ctx, r: Body) -> Body:
    """As `endpoints_sorted`, each endpoint's partitions as counts (which task a member keeps is the
    assignor's choice), without the member's own tasks."""
    out = {k: v for k, v in endpoints_sorted(c, r).items() if k != "active_tasks"}
    for e in out.get("partitions_by_user_endpoint") or ():
        for kind in ("active_partitions", "standby_partitions"):
            e[kind] = sum(len(t["partitions"]) for t in e[kind])
    return out


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

    # --- static members (group.instance.id): a second member with the instance id in use is refused, a
    # heartbeat naming another member's instance id fenced; one that leaves with epoch -2 keeps its tasks
    # and gets them back, at the same group epoch, when it rejoins under a new member id from the same process
    # (a Kafka Streams instance keeps its process id in its state directory)
    S("sg-static-join", streams_topic(), sg("m1", 0, join=True, instance_id="i1")),
    S("sg-static-duplicate-instance-id", (*streams_topic(), *static_joined()),
      sg("m2", 0, join=True, instance_id="i1")),
    S("sg-static-fenced-instance-id", (*streams_topic(), *static_joined()),
      Call(STREAMS_GROUP_HEARTBEAT, lambda c: sg_body("m2", c.vars["epoch m1"], instance_id="i1")(c))),
    S("sg-static-unknown-instance-id", (*streams_topic(), *static_joined()),
      Call(STREAMS_GROUP_HEARTBEAT, lambda c: sg_body("m1", c.vars["epoch m1"], instance_id="i9")(c))),
    S("sg-static-leave", (*streams_topic(), *static_joined()), sg("m1", -2, instance_id="i1")),
    S("sg-static-leave-unknown-instance-id", (*streams_topic(), *static_joined()), sg("m1", -2, instance_id="i9")),
    S("sg-static-leave-describe", (*streams_topic(), *static_joined(), static_left()),
      Call(STREAMS_GROUP_DESCRIBE, describe)),
    S("sg-static-heartbeat-after-leave", (*streams_topic(), *static_joined(), static_left()),
      Call(STREAMS_GROUP_HEARTBEAT, lambda c: sg_body("m1", c.vars["epoch m1"], instance_id="i1")(c))),
    S("sg-static-rejoin", (*streams_topic(), *static_joined(), static_left()),
      sg("m1-again", 0, join=True, instance_id="i1", process_id="process-m1")),
    S("sg-static-rejoin-describe", (*streams_topic(), *static_joined(), static_left(),
                                    Call(STREAMS_GROUP_HEARTBEAT, sg_body("m1-again", 0, join=True, instance_id="i1",
                                                 process_id="process-m1"),
                                         until=ok)),
      Call(STREAMS_GROUP_DESCRIBE, describe)),

    # --- warm-up tasks: Kafka 4.4's assignment refiner hands the assignor's target out as it is, so a
    # stateful task that moves is an active task of its new owner at once, never a warm-up first
    S("sg-stateful-task-moves-without-warmup", stateful_task_moves(),
      Call(STREAMS_GROUP_HEARTBEAT, lambda c: sg_body("m2", c.vars["epoch m2"], active_tasks=[], standby_tasks=[],
                                                      warmup_tasks=[])(c)), project=task_counts),

    # the warm-up configs Kafka 4.4 has (and ignores in its assignment): accepted within their bounds; the
    # group's acceptable recovery lag goes to its members
    S("sg-config-num-warmup-replicas", streams_topic(),
      Call(INCREMENTAL_ALTER_CONFIGS, group_config_body("streams.num.warmup.replicas", "5"))),
    S("sg-config-num-warmup-replicas-too-many", streams_topic(),
      Call(INCREMENTAL_ALTER_CONFIGS, group_config_body("streams.num.warmup.replicas", "21"))),
    S("sg-config-acceptable-recovery-lag-negative", streams_topic(),
      Call(INCREMENTAL_ALTER_CONFIGS, group_config_body("streams.acceptable.recovery.lag", "-1"))),
    S("sg-heartbeat-acceptable-recovery-lag", (*streams_topic(), group_config("streams.acceptable.recovery.lag",
                                                                              "500"), joined()),
      Call(STREAMS_GROUP_HEARTBEAT, lambda c: sg_body("m1", c.vars["epoch m1"])(c)),
      project=lambda c, r: {"error_code": r["error_code"], "acceptable_recovery_lag": r["acceptable_recovery_lag"]}),

    # --- interactive queries: application.server (the member's endpoint) and the partitions behind each
    S("sg-endpoint-partitions", (*streams_topic(), joined_with("m1", user_endpoint=endpoint(8080))),
      Call(STREAMS_GROUP_HEARTBEAT, lambda c: sg_body("m1", c.vars["epoch m1"])(c)), project=endpoints_sorted),
    S("sg-endpoint-current-epoch", (*streams_topic(), joined_with("m1", user_endpoint=endpoint(8080))),
      Call(STREAMS_GROUP_HEARTBEAT, lambda c: sg_body(
          "m1", c.vars["epoch m1"], endpoint_information_epoch=c.vars["endpoint epoch m1"])(c)),
      project=endpoints_sorted),
    S("sg-endpoint-two-members", (*streams_topic(), joined_with("m1", user_endpoint=endpoint(8080)),
                                  Call(STREAMS_GROUP_HEARTBEAT, sg_body("m2", 0, join=True,
                                                                        user_endpoint=endpoint(8081)),
                                       until=ok, save=save_epochs("m2")),
                                  settled("m2")),
      Call(STREAMS_GROUP_HEARTBEAT, lambda c: sg_body("m1", c.vars["epoch m1"], active_tasks=[
          {"subtopology_id": "0", "partitions": [0, 1]}], standby_tasks=[], warmup_tasks=[])(c)),
      project=partition_counts),

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
