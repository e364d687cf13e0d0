"""DeleteShareGroupState (key 86), version 0 — inter-broker (share coordinator, KIP-932).

Deletes a share partition's stored state (a tombstone in `__share_group_state`), for DeleteGroups and
DeleteShareGroupOffsets; a key with no state answers NONE. Answered once durable and replicated. Errors per
partition: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, CLUSTER_AUTHORIZATION_FAILED (not a broker).
"""

from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.broker.share_state_api import REFUSED, answer, code_only
from odradek.protocol.api_keys import ApiKey


@handler(ApiKey.DELETE_SHARE_GROUP_STATE, 0, 0)
async def delete_share_group_state(ctx: RequestContext, request: dict) -> dict:
    return await answer(ctx, request, lambda c, key, p: c.delete(key), code_only, REFUSED)
