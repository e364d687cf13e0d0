"""Validate-and-apply for topic config changes, shared by AlterConfigs and IncrementalAlterConfigs.

Both APIs compute a topic's new set of overrides differently (replace all vs. per-key operations) and then
go through `apply_overrides`, so validation and persistence have one implementation.

Broker resources (a broker id, or "" for the cluster-wide default) take the dynamic broker configs odradek
applies at run time, the replication throttle rates (`apply_broker_configs`); any other name is refused
with INVALID_REQUEST, as Kafka refuses configs that cannot be updated dynamically.

Group resources (type 32, KIP-848/KIP-932 group configs) take Kafka's group config names
(coordinator/share_groups.py GROUP_CONFIGS), kept by the group's coordinator (`apply_group_configs`).
"""

from __future__ import annotations

import asyncio

from odradek.broker.authorizer import CLUSTER_NAME, Operation, ResourceType
from odradek.broker.core import RequestContext
from odradek.cluster.admin import AdminError
from odradek.config import validate_topic_config
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode

RESOURCE_TOPIC, RESOURCE_BROKER, RESOURCE_GROUP = 2, 4, 32
# Broker configs that may change at run time (Kafka's dynamic broker configs, the part odradek applies).
FORWARDED = "-group-configs-forward"  # the client id's tail on a group-config change forwarded to its coordinator
FORWARD_FOR_S, FORWARD_BACKOFF_S = 10.0, 0.2
DYNAMIC_BROKER_CONFIGS = frozenset({"leader.replication.throttled.rate", "follower.replication.throttled.rate"})


def resource_error(ctx: RequestContext, resource: dict) -> tuple[int, str] | None:
    """Why a resource cannot be altered, or None for an existing topic."""
    kind, name = resource["resource_type"], resource["resource_name"]
    if kind == RESOURCE_BROKER and not ctx.allowed(Operation.ALTER_CONFIGS, ResourceType.CLUSTER, CLUSTER_NAME):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Authorization failed."
    if kind == RESOURCE_TOPIC and not ctx.allowed(Operation.ALTER_CONFIGS, ResourceType.TOPIC, name):
        return ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed."
    if kind == RESOURCE_GROUP:
        if not ctx.allowed(Operation.ALTER_CONFIGS, ResourceType.GROUP, name):
            return ErrorCode.GROUP_AUTHORIZATION_FAILED, "Authorization failed."
        if not name:
            return ErrorCode.INVALID_REQUEST, "Group name can't be empty."
        return None
    if kind == RESOURCE_BROKER:
        if name != "" and not name.isdigit():
            return ErrorCode.INVALID_REQUEST, f"Invalid broker id {name!r}"
        return None
    if kind != RESOURCE_TOPIC:
        return ErrorCode.INVALID_REQUEST, f"Unknown resource type {kind}"  # Kafka's words
    if ctx.broker.metadata.topic(name) is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist"
    return None


async def apply_overrides(ctx: RequestContext, topic_name: str, overrides: dict[str, str],
                          validate_only: bool) -> tuple[int, str | None]:
    """Validate the topic's new overrides and, unless ``validate_only``, store them (the local registry, or
    ZooKeeper in a cluster, whose brokers then apply them)."""
    for name, value in overrides.items():
        problem = validate_topic_config(name, value)
        if problem:
            return ErrorCode.INVALID_CONFIG, problem
    if not validate_only:
        try:
            await ctx.broker.admin.alter_topic_configs(topic_name, overrides)
        except AdminError as exc:
            return exc.error_code, exc.message
    return ErrorCode.NONE, None


async def apply_group_configs(ctx: RequestContext, group_id: str, changes: dict[str, str | None],
                              validate_only: bool) -> tuple[int, str | None]:
    """Validate and, unless ``validate_only``, store a group's config changes (a value; None: back to the
    default); they are kept by the group's coordinator (coordinator/share_groups.py). Any broker takes them,
    as in Kafka (where the controller keeps group configs): another broker's group is forwarded there."""
    coordinator = ctx.broker.coordinator
    problem = coordinator.share_groups.check_configs(changes)
    if problem:
        return ErrorCode.INVALID_CONFIG, problem
    if not coordinator.owns(group_id):
        if (ctx.client_id or "").endswith(FORWARDED):  # one hop only: the coordinator moved meanwhile
            return ErrorCode.NOT_COORDINATOR, None
        return await _forward_group_configs(ctx, group_id, changes, validate_only)
    if not validate_only:
        try:
            await asyncio.wrap_future(coordinator.share_groups.set_group_configs(group_id, changes))
        except Exception as exc:  # the coordinator's partition moved or storage failed
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, str(exc)
    return ErrorCode.NONE, None


async def _forward_group_configs(ctx: RequestContext, group_id: str, changes: dict[str, str | None],
                                 validate_only: bool) -> tuple[int, str | None]:
    """IncrementalAlterConfigs of the group's configs at its coordinator; waits (for at most
    `FORWARD_FOR_S`) while there is none yet (the offsets topic being created) or it is moving."""
    broker = ctx.broker
    resource = {"resource_type": RESOURCE_GROUP, "resource_name": group_id, "configs": [
        {"name": name, "config_operation": 1 if value is None else 0, "value": value}
        for name, value in changes.items()]}
    loop = asyncio.get_running_loop()
    give_up = loop.time() + FORWARD_FOR_S
    outcome: tuple[int, str | None] = (ErrorCode.COORDINATOR_NOT_AVAILABLE, None)
    while loop.time() < give_up:
        node = broker.coordinator_node(False, group_id)
        if node is not None and node.node_id == broker.node_id:
            if broker.coordinator.owns(group_id):
                return await apply_group_configs(ctx, group_id, changes, validate_only)
            outcome = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, None
        elif node is not None:
            client = broker.cluster.client_for(node.node_id, FORWARDED[1:])
            if client is not None:
                try:
                    body = {"resources": [resource], "validate_only": validate_only}
                    response = await client.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body, timeout_s=FORWARD_FOR_S)
                    (answer,) = response["responses"]
                    outcome = answer["error_code"], answer["error_message"]
                except (ConnectionError, asyncio.TimeoutError, ValueError) as exc:
                    outcome = ErrorCode.COORDINATOR_NOT_AVAILABLE, str(exc)
                if outcome[0] not in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                      ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
                    return outcome
        await asyncio.sleep(FORWARD_BACKOFF_S)
    return outcome


def response_entry(resource: dict, error: int, message: str | None) -> dict:
    return {"error_code": error, "error_message": message,
            "resource_type": resource["resource_type"], "resource_name": resource["resource_name"]}


async def apply_broker_configs(ctx: RequestContext, resource_name: str, changes: dict[str, str | None],
                               replace: bool, validate_only: bool) -> tuple[int, str | None]:
    """Set (a value) or delete (None) dynamic configs of one broker (``resource_name`` its id, "" the
    cluster-wide default); ``replace`` drops the ones not named (AlterConfigs)."""
    for name, value in changes.items():
        if name not in DYNAMIC_BROKER_CONFIGS:
            return ErrorCode.INVALID_REQUEST, f"Config {name} cannot be updated dynamically; set it at start-up"
        if value is not None and not (value.isdigit() and int(value) >= 1):
            return ErrorCode.INVALID_CONFIG, f"Invalid value {value} for configuration {name}"
    if validate_only:
        return ErrorCode.NONE, None
    try:
        await ctx.broker.admin.alter_broker_configs(int(resource_name) if resource_name else None, changes, replace)
    except AdminError as exc:
        return exc.error_code, exc.message
    return ErrorCode.NONE, None
