"""IncrementalAlterConfigs (key 44), versions 0-1.

Per-key operations on a topic's overrides: SET (0), DELETE (1, back to the default), APPEND (2) and
SUBTRACT (3) for list configs (`cleanup.policy`). The result is validated as a whole (INVALID_CONFIG) and
applied atomically; `validate_only` changes nothing. A non-list config with APPEND/SUBTRACT or an unknown
operation → INVALID_CONFIG / INVALID_REQUEST. Broker resources (an id, or "" for the cluster default) take
SET and DELETE of the replication throttle rates (`leader/follower.replication.throttled.rate`) only;
anything else → INVALID_REQUEST. Group resources (32) take SET and DELETE of the group configs
(`share.auto.offset.reset`, `share.isolation.level`, `share.record.lock.duration.ms`, ...; see
docs/share-groups.md): unknown names and bad values → INVALID_CONFIG. Any broker takes them; another
broker's group is forwarded to its coordinator (broker/topic_configs.py `apply_group_configs`).
BROKER_LOGGER resources (8) change the broker's log levels at run time (broker/broker_loggers.py), checked
in Kafka's order: a config named twice or a null value to SET (INVALID_REQUEST, before authorization), then
ALTER_CONFIGS on the cluster (CLUSTER_AUTHORIZATION_FAILED), then this node's id as the name, then each
change (SET to TRACE/DEBUG/INFO/WARN/ERROR/FATAL, DELETE back to the parent's level).
"""

from odradek.broker import broker_loggers
from odradek.broker.authorizer import CLUSTER_NAME, Operation as Op, ResourceType as Res
from odradek.broker.core import RequestContext
from odradek.broker.registry import handler
from odradek.broker.topic_configs import RESOURCE_BROKER, RESOURCE_GROUP, apply_broker_configs, \
    apply_group_configs, apply_overrides, resource_error, response_entry
from odradek.config import CONFIG_TYPE_LIST, topic_config_type
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


@handler(ApiKey.INCREMENTAL_ALTER_CONFIGS, 0, 1)
async def incremental_alter_configs(ctx: RequestContext, request: dict) -> dict:
    responses = []
    for resource in request["resources"]:
        if resource["resource_type"] == broker_loggers.RESOURCE_BROKER_LOGGER:
            responses.append(response_entry(resource, *_alter_loggers(ctx, resource, request["validate_only"])))
            continue
        problem = resource_error(ctx, resource)
        if problem is None and resource["resource_type"] == RESOURCE_BROKER:
            problem = await _alter_broker(ctx, resource, request["validate_only"])
        elif problem is None and resource["resource_type"] == RESOURCE_GROUP:
            problem = await _alter_group(ctx, resource, request["validate_only"])
        elif problem is None:
            problem = await _alter(ctx, resource, request["validate_only"])
        responses.append(response_entry(resource, *problem))
    return {"throttle_time_ms": 0, "responses": responses}


async def _alter(ctx: RequestContext, resource: dict, validate_only: bool) -> tuple[int, str | None]:
    topic = ctx.broker.metadata.topic(resource["resource_name"])
    effective = ctx.broker.effective_configs(topic)
    overrides = dict(topic.configs)
    for change in resource["configs"]:
        name, op, value = change["name"], change["config_operation"], change["value"]
        if op == SET:
            overrides[name] = value
        elif op == DELETE:
            overrides.pop(name, None)
        elif op in (APPEND, SUBTRACT):
            if topic_config_type(name) != CONFIG_TYPE_LIST:
                return ErrorCode.INVALID_CONFIG, f"Config {name} is not a list; APPEND/SUBTRACT do not apply"
            current = [v for v in overrides.get(name, effective.get(name, "")).split(",") if v]
            given = [v for v in (value or "").split(",") if v]
            if op == APPEND:
                current += [v for v in given if v not in current]
            else:
                current = [v for v in current if v not in given]
            overrides[name] = ",".join(current)
        else:
            return ErrorCode.INVALID_REQUEST, f"Unknown config operation {op}"
    return await apply_overrides(ctx, topic.name, overrides, validate_only)


def _set_or_delete(resource: dict) -> dict[str, str | None] | tuple[int, str]:
    """A resource's changes as name -> value (None: DELETE), or the error when another operation is asked."""
    changes: dict[str, str | None] = {}
    for change in resource["configs"]:
        if change["config_operation"] not in (SET, DELETE):
            return ErrorCode.INVALID_REQUEST, f"Only SET and DELETE apply to {change['name']}"
        changes[change["name"]] = change["value"] if change["config_operation"] == SET else None
    return changes


async def _alter_broker(ctx: RequestContext, resource: dict, validate_only: bool) -> tuple[int, str | None]:
    changes = _set_or_delete(resource)
    if isinstance(changes, tuple):
        return changes
    return await apply_broker_configs(ctx, resource["resource_name"], changes, False, validate_only)


async def _alter_group(ctx: RequestContext, resource: dict, validate_only: bool) -> tuple[int, str | None]:
    changes = _set_or_delete(resource)
    if isinstance(changes, tuple):
        return changes
    return await apply_group_configs(ctx, resource["resource_name"], changes, validate_only)


def _alter_loggers(ctx: RequestContext, resource: dict, validate_only: bool) -> tuple[int, str | None]:
    problem = broker_loggers.check_shape(resource["configs"])
    if problem is not None:
        return problem
    if not ctx.allowed(Op.ALTER_CONFIGS, Res.CLUSTER, CLUSTER_NAME):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None
    return broker_loggers.alter(ctx.broker.node_id, resource["resource_name"], resource["configs"], validate_only)
