"""StreamsGroupDescribe (key 89), versions 0-1: groups of the streams rebalance protocol (KIP-1071).

Per group: state (Empty, NotReady, Assigning, Reconciling, Stable), group epoch, assignment epoch, the
topology (each subtopology's source, repartition sink, changelog and repartition source topics, with the
partition counts the coordinator decided for the internal ones) and per member its epoch, process id,
topology epoch, endpoint, client tags, reported task offsets, current assignment (tasks it has still to
revoke included) and target assignment, each as active, standby and warm-up task lists. An unknown group,
a group of another type and a dead group are answered GROUP_ID_NOT_FOUND with Kafka's messages; errors
before the lookup as ConsumerGroupDescribe (GROUP_AUTHORIZATION_FAILED, INVALID_GROUP_ID, NOT_COORDINATOR).
v1: `include_topology_description` is accepted, but no topology description plugin exists here, so the
description is null with status 0, and `assignor_name` is "sticky" (Kafka's only streams assignor).
"""

from odradek.broker.context import RequestContext
from odradek.broker.handlers.k69_consumer_group_describe import (
    NOT_REQUESTED, authorized_operations, describe_refusal)
from odradek.broker.registry import handler
from odradek.coordinator.streams_group import StreamsGroup, TaskSets, TopicInfo
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode

ASSIGNOR_NAME = "sticky"
PROVEN_BY = "tests/streams/test_streams_group_protocol.py, differential suite (scenarios_streams.py)"


def _failed(group_id: str, code: int, message: str | None = None) -> dict:
    return {"error_code": code, "error_message": message, "group_id": group_id, "group_state": "",
            "group_epoch": 0, "assignment_epoch": 0, "topology": None, "members": [],
            "authorized_operations": NOT_REQUESTED, "topology_description": None, "topology_description_status": 0,
            "assignor_name": None}


def _task_ids(tasks: set) -> list[dict]:
    by_sub: dict[str, list[int]] = {}
    for s, p in tasks:
        by_sub.setdefault(s, []).append(p)
    return [{"subtopology_id": s, "partitions": sorted(ps)} for s, ps in sorted(by_sub.items())]


def _assignment(ts: TaskSets | None) -> dict:
    ts = ts or TaskSets()
    return {"active_tasks": _task_ids(ts.active), "standby_tasks": _task_ids(ts.standby),
            "warmup_tasks": _task_ids(ts.warmup)}


def _topic(t: TopicInfo, decided: dict[str, int]) -> dict:
    return {"name": t.name, "partitions": t.partitions or decided.get(t.name, 0),
            "replication_factor": t.replication_factor,
            "topic_configs": [{"key": k, "value": v} for k, v in t.configs]}


def _topology(group: StreamsGroup) -> dict | None:
    if group.topology is None:
        return None
    decided = group.configured.internal_partitions if group.configured is not None else {}
    return {"epoch": group.topology.epoch, "subtopologies": [{
        "subtopology_id": s.subtopology_id, "source_topics": list(s.source_topics),
        "repartition_sink_topics": list(s.repartition_sinks),
        "state_changelog_topics": [_topic(t, decided) for t in s.changelogs],
        "repartition_source_topics": [_topic(t, decided) for t in s.repartition_sources],
    } for s in sorted(group.topology.subtopologies, key=lambda s: s.subtopology_id)]}


def _offsets(offsets: list[tuple[str, int, int]]) -> list[dict]:
    return [{"subtopology_id": s, "partition": p, "offset": o} for s, p, o in offsets]


@handler(ApiKey.STREAMS_GROUP_DESCRIBE, 0, 1)
def streams_group_describe(ctx: RequestContext, request: dict) -> dict:
    coordinator = ctx.broker.coordinator
    out = []
    for gid in request["group_ids"]:
        refused = describe_refusal(ctx, gid)
        if refused:
            out.append(_failed(gid, refused))
            continue
        group = coordinator.groups.groups.get(gid)
        if group is None and gid in coordinator.share_groups.groups:
            out.append(_failed(gid, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} is not a streams group."))
            continue
        if group is None or group.is_("Dead"):
            out.append(_failed(gid, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} not found."))
            continue
        if not isinstance(group, StreamsGroup):
            out.append(_failed(gid, ErrorCode.GROUP_ID_NOT_FOUND, f"Group {gid} is not a streams group."))
            continue
        members = [{
            "member_id": m.member_id, "member_epoch": m.member_epoch, "instance_id": m.instance_id,
            "rack_id": m.rack_id, "client_id": m.client_id, "client_host": m.client_host,
            "topology_epoch": m.topology_epoch, "process_id": m.process_id,
            "user_endpoint": {"host": m.user_endpoint[0], "port": m.user_endpoint[1]} if m.user_endpoint else None,
            "client_tags": [{"key": k, "value": v} for k, v in sorted(m.client_tags.items())],
            "task_offsets": _offsets(m.task_offsets), "task_end_offsets": _offsets(m.task_end_offsets),
            "assignment": _assignment(TaskSets(m.assigned.active | m.pending_revocation.active,
                                               m.assigned.standby | m.pending_revocation.standby,
                                               m.assigned.warmup | m.pending_revocation.warmup)),
            "target_assignment": _assignment(group.target.get(m.member_id)),
            "is_classic": False,
        } for m in group.members.values()]
        described = {"error_code": 0, "error_message": None, "group_id": gid, "group_state": group.state.value,
                     "group_epoch": group.group_epoch, "assignment_epoch": group.assignment_epoch,
                     "topology": _topology(group), "members": members, "authorized_operations": NOT_REQUESTED,
                     "topology_description": None, "topology_description_status": 0,
                     "assignor_name": ASSIGNOR_NAME}
        if request["include_authorized_operations"]:
            described["authorized_operations"] = authorized_operations(ctx, gid)
        out.append(described)
    return {"throttle_time_ms": 0, "groups": out}
