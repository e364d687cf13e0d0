"""Validate-and-apply for topic config changes, shared by AlterConfigs and IncrementalAlterConfigs.

Both APIs compute a topic's new set of overrides differently (replace all vs. per-key operations) and then
go through `apply_overrides`, so validation and persistence have one implementation.

Broker resources (this broker's id, or "" for the cluster-wide default) take what Kafka 4.4 takes
(broker/broker_configs.py: its dynamic broker configs, checked; names it does not know, stored; read-only
broker configs refused with INVALID_REQUEST), stored by the cluster (`apply_broker_configs`).

Group resources (type 32, KIP-848/KIP-932 group configs) take Kafka's group config names
(coordinator/share_groups.py GROUP_CONFIGS), kept by the group's coordinator (`apply_group_configs`). As in
Kafka they are the cluster's, not one broker's: a broker that does not coordinate the group checks the
change and sends it on to the coordinator (one hop: a request that came that way is never sent on again).
"""

from __future__ import annotations

import asyncio

from odradek.broker import broker_configs
from odradek.broker.context import RequestContext
from odradek.broker.core import GROUP_CONFIGS_CLIENT
from odradek.cluster.admin import AdminError
from odradek.config import BROKER_PROPERTIES
from odradek.net.tls import keystore_problem
from odradek.security.authorizer import CLUSTER_NAME, Operation, ResourceType
from odradek.topic_config import validate_topic_config
from odradek.protocol.errors import ErrorCode

RESOURCE_TOPIC, RESOURCE_BROKER, RESOURCE_GROUP = 2, 4, 32


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
        return broker_configs.check_name(name, ctx.broker.node_id)
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


def forwarded(ctx: RequestContext) -> bool:
    """Whether this request was sent on by another broker (it is answered here, never sent on again)."""
    return (ctx.client_id or "").startswith("broker-") and (ctx.client_id or "").endswith(f"-{GROUP_CONFIGS_CLIENT}")


async def apply_group_configs(ctx: RequestContext, resource: dict, changes: dict[str, str | None],
                              validate_only: bool) -> tuple[int, str | None]:
    """Validate and, unless ``validate_only``, store a group's config changes (a value; None: back to the
    default); they are kept by the group's coordinator (coordinator/share_groups.py), here or elsewhere."""
    group_id = resource["resource_name"]
    coordinator = ctx.broker.coordinator
    problem = coordinator.share_groups.check_configs(changes)
    if problem:
        return ErrorCode.INVALID_CONFIG, problem
    if not coordinator.owns(group_id):
        if forwarded(ctx):
            return ErrorCode.NOT_COORDINATOR, None
        return await ctx.broker.alter_group_configs_at_coordinator(resource, validate_only)
    if not validate_only:
        try:
            await asyncio.wrap_future(coordinator.share_groups.set_group_configs(group_id, changes))
        except Exception as exc:  # the coordinator's partition moved or storage failed
            return ErrorCode.COORDINATOR_NOT_AVAILABLE, str(exc)
    return ErrorCode.NONE, None


def response_entry(resource: dict, error: int, message: str | None) -> dict:
    return {"error_code": error, "error_message": message,
            "resource_type": resource["resource_type"], "resource_name": resource["resource_name"]}


async def apply_broker_configs(ctx: RequestContext, resource_name: str, changes: dict[str, str | None],
                               replace: bool, validate_only: bool) -> tuple[int, str | None]:
    """Set (a value) or delete (None) dynamic configs of this broker (``resource_name`` its id, "" the
    cluster-wide default), checked as Kafka checks them (broker/broker_configs.py); ``replace`` drops the
    ones not named (AlterConfigs)."""
    broker_id = int(resource_name) if resource_name else None
    current = {name: str(ctx.broker.config.get(name)) for name in broker_configs.RESIZABLE_POOLS
               if name in BROKER_PROPERTIES}  # the pools' sizes now: static, then dynamic
    current.update(await current_broker_values(ctx))
    problem = broker_configs.check_changes(changes, broker_id is None, current) or _keystore_problem(ctx, changes)
    if problem is not None:
        return problem
    if validate_only:
        return ErrorCode.NONE, None
    try:
        await ctx.broker.admin.alter_broker_configs(broker_id, changes, replace)
    except AdminError as exc:
        return exc.error_code, exc.message
    return ErrorCode.NONE, None


def _keystore_problem(ctx: RequestContext, changes: dict[str, str | None]) -> tuple[int, str] | None:
    """A new keystore for one of this broker's TLS listeners (`listener.name.L.ssl.keystore.location`, or its
    key's password) must load, as Kafka checks it before it takes the change; other listeners have none to
    check, as in Kafka."""
    tls_listeners = {b.name for b in ctx.broker.listeners.bind if b.uses_tls}
    for listener in tls_listeners:
        prefix = f"listener.name.{listener.lower()}."
        given = {name[len(prefix):]: value for name, value in changes.items() if name.lower().startswith(prefix)}
        if given.get("ssl.keystore.location") is None and given.get("ssl.key.password") is None:
            continue
        config = ctx.broker.live_config
        keystore = given.get("ssl.keystore.location") or str(config.for_listener(listener, "ssl.keystore.location"))
        password = given.get("ssl.key.password") or config.for_listener(listener, "ssl.key.password") or None
        problem = keystore_problem(keystore.strip(), password) if keystore.strip() else None
        if problem is not None:
            return ErrorCode.INVALID_REQUEST, f"Validation of dynamic config update of SSLFactory failed: {problem}"
    return None


async def current_broker_values(ctx: RequestContext) -> dict[str, str]:
    """The dynamic broker configs in force on this broker: its own over the cluster-wide defaults."""
    return {**await ctx.broker.admin.dynamic_broker_configs(None),
            **await ctx.broker.admin.dynamic_broker_configs(ctx.broker.node_id)}
