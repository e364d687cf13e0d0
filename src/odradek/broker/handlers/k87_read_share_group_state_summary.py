"""ReadShareGroupStateSummary (key 87), versions 0-1 — inter-broker (share coordinator, KIP-932).

Where a share partition stands without its batches: state epoch, leader epoch, start offset (-1: nothing
stored) and, from v1, the delivery-complete count (offsets at or past the start acknowledged or archived),
for DescribeShareGroupOffsets and its lag. Does not fence leaders. Errors per partition: NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS, CLUSTER_AUTHORIZATION_FAILED (not a broker).
"""

from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.broker.share_state_api import REFUSED_READ, answer
from odradek.coordinator.share_coordinator import UNINITIALIZED, StoredState
from odradek.protocol.api_keys import ApiKey


def _shape(index: int, outcome: tuple[int, StoredState | None]) -> dict:
    code, state = outcome
    if code or state is None:
        return {"partition": index, "error_code": code, "error_message": None, "state_epoch": 0, "leader_epoch": -1,
                "start_offset": UNINITIALIZED, "delivery_complete_count": -1}
    return {"partition": index, "error_code": 0, "error_message": None, "state_epoch": state.state_epoch,
            "leader_epoch": state.leader_epoch, "start_offset": state.start,
            "delivery_complete_count": state.delivery_complete()}


@handler(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 0, 1)
async def read_share_group_state_summary(ctx: RequestContext, request: dict) -> dict:
    return await answer(ctx, request, lambda c, key, p: c.summary(key), _shape, REFUSED_READ)
