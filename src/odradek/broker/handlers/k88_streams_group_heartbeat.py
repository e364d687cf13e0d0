"""StreamsGroupHeartbeat (key 88), versions 0-1: the streams rebalance protocol of KIP-1071.

A Kafka Streams member joins (member epoch 0, with its topology), heartbeats (reporting the tasks it owns
when they changed, and its task offsets) and leaves (epoch -1; -2 for a static member); the coordinator
(`coordinator.streams_groups`) keeps the group's topology, creates the internal topics it implies, assigns
active and standby tasks and hands them out step by step with member epochs. v1 differs only in the answer
(`acceptable_recovery_lag` as int64, `topology_description_required`, never set here).
Checks before the group is looked at, in Kafka's order and with its messages (INVALID_REQUEST): source topic
regexes ("not supported yet"), empty ids, what a join must and must not carry, the member epoch, task lists
all null or all given, a topology only on a join; STREAMS_INVALID_TOPOLOGY for a changelog topic with a
partition count and for copartition groups or topic names no topology can have. Then GROUP_AUTHORIZATION_FAILED
(READ on the group), TOPIC_AUTHORIZATION_FAILED (DESCRIBE on every topic the topology names), NOT_COORDINATOR.
Internal topics the topology needs and the cluster lacks are created in the background (with the counts and
configs the coordinator decided; the principal needs CREATE on the cluster or the topics), while the
heartbeat reports MISSING_INTERNAL_TOPICS; once they exist the group's tasks are assigned.
Static members (`instance_id`), warm-up tasks (none, as Kafka 4.4) and the interactive-query endpoint
information (`endpoint_information_epoch`, `partitions_by_user_endpoint`): coordinator.streams_groups.
Gaps: Kafka 4.4's `group.streams.assignment.interval.ms` (a new assignment within a second of the last one
is delayed, status ASSIGNMENT_DELAYED) is not implemented: odradek assigns at once; topology updates are
refused as in Kafka 4.4.
"""

from __future__ import annotations

import asyncio
import logging

from odradek.security.authorizer import CLUSTER_NAME, Operation as Op, ResourceType as Res
from odradek.broker.context import RequestContext
from odradek.broker.handlers.k11_join_group import client_host
from odradek.broker.registry import handler
from odradek.cluster.admin import AdminError
from odradek.cluster.topics import topic_name_error
from odradek.coordinator.consumer_group import STATIC_LEAVE_EPOCH
from odradek.coordinator.streams_group import Subtopology, TaskSets, TopicInfo, Topology
from odradek.coordinator.streams_groups import StreamsHeartbeatRequest, error_body
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode
from odradek.topic_config import validate_topic_config

log = logging.getLogger(__name__)
PROVEN_BY = ("tests/streams (Kafka Streams 4.4 word count on odradek and Kafka 4.4; raw members: standbys, "
             "revocation, restart, hostile input), differential suite (scenarios_streams.py)")
CREATE_TIMEOUT_MS = 30_000


class RequestRefused(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code, self.message = code, message


def _invalid(message: str) -> RequestRefused:
    return RequestRefused(ErrorCode.INVALID_REQUEST, message)


def _topology_error(message: str) -> RequestRefused:
    return RequestRefused(ErrorCode.STREAMS_INVALID_TOPOLOGY, message)


def _tasks(raw: list[dict] | None) -> set | None:
    if raw is None:
        return None
    return {(t["subtopology_id"], p) for t in raw for p in t["partitions"]}


def _topic_info(raw: dict) -> TopicInfo:
    return TopicInfo(raw["name"], raw["partitions"], raw["replication_factor"],
                     tuple((kv["key"], kv["value"]) for kv in raw["topic_configs"]))


def _topology(raw: dict) -> Topology:
    """The request's topology, checked the way Kafka's streams group coordinator checks it."""
    subtopologies = []
    seen: set[str] = set()
    for s in raw["subtopologies"]:
        sid = s["subtopology_id"]
        if sid in seen:
            raise _topology_error(f"Duplicate subtopology {sid}.")
        seen.add(sid)
        changelogs = tuple(_topic_info(t) for t in s["state_changelog_topics"])
        for t in changelogs:
            if t.partitions != 0:
                raise _topology_error(f"Changelog topic {t.name} must have an undefined partition count, but it is "
                                      f"set to {t.partitions}.")
        repartitions = tuple(_topic_info(t) for t in s["repartition_source_topics"])
        for t in repartitions:
            if t.partitions < 0:
                raise _topology_error(f"Repartition topic {t.name} has a negative partition count {t.partitions}.")
        names = list(s["source_topics"]) + list(s["repartition_sink_topics"]) + [
            t.name for t in changelogs + repartitions]
        for name in names:
            problem = topic_name_error(name)
            if problem:
                raise _topology_error(f"Topic name {name!r} is invalid: {problem}")
        groups = []
        for g in s["copartition_groups"]:
            if any(i < 0 or i >= len(s["source_topics"]) for i in g["source_topics"]) or any(
                    i < 0 or i >= len(repartitions) for i in g["repartition_source_topics"]):
                raise _topology_error(f"Copartition group of subtopology {sid} refers to a topic it does not have.")
            groups.append((tuple(g["source_topics"]), tuple(g["repartition_source_topics"])))
        subtopologies.append(Subtopology(sid, tuple(s["source_topics"]), tuple(s["repartition_sink_topics"]),
                                         changelogs, repartitions, tuple(groups)))
    return Topology(raw["epoch"], tuple(subtopologies))


def validate(request: dict) -> Topology | None:
    """GroupCoordinatorService's checks of a StreamsGroupHeartbeat, in Kafka's order; the parsed topology."""
    topology = request["topology"]
    if topology is not None and any(s["source_topic_regex"] for s in topology["subtopologies"]):
        raise _invalid("Regular expressions for source topics are not supported yet.")
    for field, what in (("member_id", "MemberId"), ("group_id", "GroupId"), ("instance_id", "InstanceId"),
                        ("rack_id", "RackId")):
        if request[field] == "":
            raise _invalid(f"{what} can't be empty.")
    epoch = request["member_epoch"]
    task_lists = (request["active_tasks"], request["standby_tasks"], request["warmup_tasks"])
    parsed = None
    if epoch == 0:
        if request["rebalance_timeout_ms"] == -1:
            raise _invalid("RebalanceTimeoutMs must be provided in first request.")
        for tasks, what in zip(task_lists, ("ActiveTasks", "StandbyTasks", "WarmupTasks")):
            if tasks:
                raise _invalid(f"{what} must be empty when (re-)joining.")
        if topology is None:
            raise _invalid("Topology must be non-null when (re-)joining.")
        parsed = _topology(topology)
    elif epoch == STATIC_LEAVE_EPOCH:
        if request["instance_id"] is None:
            raise _invalid("InstanceId can't be null.")
    elif epoch < STATIC_LEAVE_EPOCH:
        raise _invalid(f"MemberEpoch is {epoch}, but must be greater than or equal to -2.")
    if any(t is not None for t in task_lists) and any(t is None for t in task_lists):
        raise _invalid("If one task-type is non-null, all must be non-null.")
    if epoch != 0 and topology is not None:
        raise _invalid("Topology can only be provided when (re-)joining.")
    return parsed


def _offsets(raw: list[dict] | None) -> list[tuple[str, int, int]] | None:
    if raw is None:
        return None
    return [(t["subtopology_id"], t["partition"], t["offset"]) for t in raw]


def _create_internal_topics(ctx: RequestContext, topics) -> None:
    broker = ctx.broker
    creating = broker.coordinator.streams_groups.creating
    for info in topics:
        if info.name in creating:
            continue
        if not (ctx.allowed(Op.CREATE, Res.CLUSTER, CLUSTER_NAME) or ctx.allowed(Op.CREATE, Res.TOPIC, info.name)):
            log.warning("streams internal topic %s: the principal may not create it", info.name)
            continue
        configs = dict(info.configs)
        problems = [p for p in (validate_topic_config(k, v) for k, v in configs.items()) if p]
        if problems:
            log.warning("streams internal topic %s: not created: %s", info.name, problems[0])
            continue
        replication = info.replication_factor if info.replication_factor > 0 else broker.config.int(
            "default.replication.factor")

        async def create(info=info, replication=replication, configs=configs) -> None:
            try:
                await broker.admin.create_topic(info.name, info.partitions, replication, None, configs, False,
                                                CREATE_TIMEOUT_MS)
                log.info("created streams internal topic %s with %d partitions", info.name, info.partitions)
            except AdminError as exc:
                if exc.error_code != ErrorCode.TOPIC_ALREADY_EXISTS:
                    log.warning("streams internal topic %s: %s", info.name, exc.message)
            except Exception as exc:  # the cluster is changing; the next heartbeat tries again
                log.warning("streams internal topic %s: %s", info.name, exc)
            finally:
                creating.pop(info.name, None)

        creating[info.name] = asyncio.get_running_loop().create_task(create())


@handler(ApiKey.STREAMS_GROUP_HEARTBEAT, 0, 1)
async def streams_group_heartbeat(ctx: RequestContext, request: dict) -> dict:
    try:
        topology = validate(request)
    except RequestRefused as exc:
        return {"throttle_time_ms": 0, **error_body(exc.code, exc.message)}
    group_id = request["group_id"]
    if not ctx.allowed(Op.READ, Res.GROUP, group_id):
        return {"throttle_time_ms": 0, **error_body(ErrorCode.GROUP_AUTHORIZATION_FAILED, None)}
    if topology is not None:
        names = {t for s in topology.subtopologies for t in s.source_topics + s.repartition_sinks} | \
            topology.internal_topics()
        if any(not ctx.allowed(Op.DESCRIBE, Res.TOPIC, n) for n in sorted(names)):
            return {"throttle_time_ms": 0, **error_body(ErrorCode.TOPIC_AUTHORIZATION_FAILED, None)}
    coordinator = ctx.broker.coordinator
    if not coordinator.owns(group_id):
        return {"throttle_time_ms": 0, **error_body(ErrorCode.NOT_COORDINATOR, None)}
    owned = None
    if request["active_tasks"] is not None:
        owned = TaskSets(_tasks(request["active_tasks"]), _tasks(request["standby_tasks"]),
                         _tasks(request["warmup_tasks"]))
    endpoint = request["user_endpoint"]
    tags = request["client_tags"]
    result = coordinator.streams_groups.heartbeat(StreamsHeartbeatRequest(
        group_id=group_id, member_id=request["member_id"], member_epoch=request["member_epoch"],
        endpoint_information_epoch=request["endpoint_information_epoch"], instance_id=request["instance_id"],
        rack_id=request["rack_id"], rebalance_timeout_ms=request["rebalance_timeout_ms"], topology=topology,
        owned=owned, process_id=request["process_id"],
        user_endpoint=(endpoint["host"], endpoint["port"]) if endpoint is not None else None,
        client_tags={kv["key"]: kv["value"] for kv in tags} if tags is not None else None,
        task_offsets=_offsets(request["task_offsets"]), task_end_offsets=_offsets(request["task_end_offsets"]),
        shutdown_application=request["shutdown_application"], client_id=ctx.client_id or "",
        client_host=client_host(ctx)))
    if result.to_create:
        _create_internal_topics(ctx, result.to_create)
    return {"throttle_time_ms": 0, **result.body}
