"""AlterClientQuotas (key 49), versions 0-1.

Sets and removes client quotas (security/quotas.py). An entity is a user, a client id or both (a null name:
the default); each op sets a key (`producer_byte_rate`, `consumer_byte_rate`, `request_percentage`) or
removes it. Per entry, the first failing check wins, all INVALID_REQUEST: an entity that is empty, names a
type other than those two or one type twice; an unknown key; a value that is not positive, or a byte rate
that is not whole. An entry with a failure changes nothing; the others are stored together (single node:
one file write; cluster mode: ZooKeeper) unless `validate_only`.

Needs ALTER_CONFIGS on the cluster (CLUSTER_AUTHORIZATION_FAILED).
"""

import logging

from odradek.security.authorizer import CLUSTER_NAME, Operation as Op, ResourceType as Res
from odradek.broker.context import RequestContext
from odradek.security.quotas import CLIENT_ID, DEFAULT, USER, QuotaEntity, validate_value
from odradek.broker.registry import handler
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode

log = logging.getLogger(__name__)


def _entity(parts: list[dict]) -> QuotaEntity | str:
    """The entity the wire names, or why it is not one."""
    names: dict[str, object] = {}
    for part in parts:
        kind = part["entity_type"]
        if kind not in (USER, CLIENT_ID):
            return f"Unsupported quota entity type {kind!r}"
        if kind in names:
            return f"Duplicate entity type {kind}"
        names[kind] = DEFAULT if part["entity_name"] is None else part["entity_name"]
    if not names:
        return "The entity must name a user or a client id"
    return QuotaEntity(names.get(USER), names.get(CLIENT_ID))


@handler(ApiKey.ALTER_CLIENT_QUOTAS, 0, 1)
async def alter_client_quotas(ctx: RequestContext, request: dict) -> dict:
    entries = request["entries"]
    if not ctx.allowed(Op.ALTER_CONFIGS, Res.CLUSTER, CLUSTER_NAME):
        return {"entries": [{"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "error_message": None,
                             "entity": e["entity"]} for e in entries]}
    errors: dict[int, tuple[int, str]] = {}
    changes: dict[QuotaEntity, dict] = {}
    changed_by: dict[QuotaEntity, list[int]] = {}
    for i, entry in enumerate(entries):
        entity = _entity(entry["entity"])
        if isinstance(entity, str):
            errors[i] = (ErrorCode.INVALID_REQUEST, entity)
            continue
        ops: dict[str, float | None] = {}
        for op in entry["ops"]:
            # a removal names a key only; 1.0 stands for a valid value of any key
            problem = validate_value(op["key"], 1.0 if op["remove"] else op["value"])
            if problem is None and op["key"] in ops:
                problem = f"Duplicate quota key {op['key']} for one entity"
            if problem is not None:
                errors[i] = (ErrorCode.INVALID_REQUEST, problem)
                break
            ops[op["key"]] = None if op["remove"] else op["value"]
        if i not in errors:
            changes.setdefault(entity, {}).update(ops)
            changed_by.setdefault(entity, []).append(i)
    if changes and not request["validate_only"]:
        try:
            await ctx.broker.quotas.alter(changes)
        except Exception as exc:  # the file or ZooKeeper: nothing applied
            log.error("cannot store client quotas: %s", exc)
            for indexes in changed_by.values():
                for i in indexes:
                    errors[i] = (ErrorCode.UNKNOWN_SERVER_ERROR, f"Cannot store the quotas: {exc}")
        else:
            log.info("client quotas changed for %s", ", ".join(sorted(map(repr, changes))))
    ok = (ErrorCode.NONE, None)
    return {"entries": [{"error_code": errors.get(i, ok)[0], "error_message": errors.get(i, ok)[1],
                         "entity": e["entity"]} for i, e in enumerate(entries)]}
