"""WriteShareGroupState (key 85), versions 0-1 — inter-broker (share coordinator, KIP-932).

A share partition's leader stores its state: the start offset (-1: unchanged) and state batches, merged into
the stored state (offsets below the start go, the batches replace what they cover; odradek's leaders send
their whole window each time). A state epoch below the stored one is refused FENCED_STATE_EPOCH, a leader
epoch below it FENCED_LEADER_EPOCH. Answered once the state is durable and replicated in
`__share_group_state`. Errors per partition: NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
CLUSTER_AUTHORIZATION_FAILED (not a broker), and the replication errors of the append.
Gaps: v1's `delivery_complete_count` is not used (the summary counts it from the batches).
"""

from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.broker.share_state_api import REFUSED, answer, code_only
from odradek.protocol.api_keys import ApiKey


def _write(coordinator, key, p: dict):
    runs = [(b["first_offset"], b["last_offset"], b["delivery_state"], b["delivery_count"])
            for b in p["state_batches"]]
    return coordinator.write(key, p["state_epoch"], p["leader_epoch"], p["start_offset"], runs)


@handler(ApiKey.WRITE_SHARE_GROUP_STATE, 0, 1)
async def write_share_group_state(ctx: RequestContext, request: dict) -> dict:
    return await answer(ctx, request, _write, code_only, REFUSED)
