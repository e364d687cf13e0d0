"""ReadShareGroupState (key 84), version 0 — inter-broker (share coordinator, KIP-932).

A share partition's new leader reads its stored state: state epoch, start offset and state batches (first,
last, delivery state 0 available / 2 acknowledged / 4 archived, delivery count). Nothing stored: start
offset -1, and the leader starts at the group's `share.auto.offset.reset`. A read with a leader epoch
above the stored one records it, so writes of an older leader are refused (FENCED_LEADER_EPOCH); a read
with an older one is refused the same way. Errors per partition: NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS, CLUSTER_AUTHORIZATION_FAILED (not a broker).
"""

from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.broker.share_state_api import REFUSED_READ, answer
from odradek.coordinator.share_coordinator import UNINITIALIZED, StoredState
from odradek.protocol.api_keys import ApiKey


def _shape(index: int, outcome: tuple[int, StoredState | None]) -> dict:
    code, state = outcome
    state = state or StoredState()
    return {"partition": index, "error_code": code, "error_message": None, "state_epoch": state.state_epoch,
            "start_offset": state.start if not code else UNINITIALIZED,
            "state_batches": [] if code else [
                {"first_offset": f, "last_offset": la, "delivery_state": s, "delivery_count": c}
                for f, la, s, c in state.runs]}


@handler(ApiKey.READ_SHARE_GROUP_STATE, 0, 0)
async def read_share_group_state(ctx: RequestContext, request: dict) -> dict:
    return await answer(ctx, request, lambda c, key, p: c.read(key, p["leader_epoch"]), _shape, REFUSED_READ)
