"""InitializeShareGroupState (key 83), version 0 — inter-broker (share coordinator, KIP-932).

Sets a share partition's state to a new state epoch and start offset with nothing in flight (sent by the
group coordinator for AlterShareGroupOffsets). The state epoch must be above the stored one, else
FENCED_STATE_EPOCH; later writes with the older epoch are refused FENCED_STATE_EPOCH, so the partition's
leader reads the state again. Answered once the state is durable and replicated. Errors per partition:
NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, CLUSTER_AUTHORIZATION_FAILED (not a broker).
"""

from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.broker.share_state_api import REFUSED, answer, code_only
from odradek.protocol.api_keys import ApiKey


@handler(ApiKey.INITIALIZE_SHARE_GROUP_STATE, 0, 0)
async def initialize_share_group_state(ctx: RequestContext, request: dict) -> dict:
    return await answer(ctx, request, lambda c, key, p: c.initialize(key, p["state_epoch"], p["start_offset"]),
                        code_only, REFUSED)
