"""ShareAcknowledge (key 79), versions 1-2: acknowledgements of records a share-group member holds (KIP-932).

Works in the member's share session as ShareFetch does, except that it cannot open one (epoch 0:
INVALID_SHARE_SESSION_EPOCH); epoch -1 applies the acknowledgements, then closes the session and releases
whatever the member still holds. Each acknowledgement batch names offsets [first, last] and one type for all
of them or one per offset: 0 gap, 1 accept, 2 release (delivered again, or archived at
`group.share.delivery.count.limit`), 3 reject. A batch with an offset the member does not hold is not applied
and its partition answers INVALID_RECORD_STATE; malformed types INVALID_REQUEST. The answer comes once the
new delivery state is durable in `__share_group_state`.
v2 (KIP-1222) adds `is_renew_ack`: with it the batches may hold renew (type 4), which keeps the records
acquired and restarts their locks for `share.record.lock.duration.ms`; without it a renew is INVALID_REQUEST
for its partition. v2's answer carries `acquisition_lock_timeout_ms`. v0 (Kafka 4.0's early access) is not
served. Gaps: no leader hints.
"""

import asyncio

from odradek.broker.context import RequestContext
from odradek.broker.handlers.k78_share_fetch import NO_LEADER, acknowledgements, refusal
from odradek.broker.registry import handler
from odradek.coordinator.share_groups import FINAL_SESSION_EPOCH, ShareError
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode

PROVEN_BY = "interop and cluster suites, franz-go's share tests"


def _failed(code: int, message: str | None = None) -> dict:
    return {"throttle_time_ms": 0, "error_code": code, "error_message": message, "acquisition_lock_timeout_ms": 0,
            "responses": [], "node_endpoints": []}


@handler(ApiKey.SHARE_ACKNOWLEDGE, 1, 2)
async def share_acknowledge(ctx: RequestContext, request: dict) -> dict:
    group_id, member_id, epoch = request["group_id"], request["member_id"], request["share_session_epoch"]
    refused = refusal(ctx, request)
    if refused is not None:
        return _failed(*refused)
    coordinator = ctx.broker.coordinator.share_groups
    try:
        coordinator.begin_session(group_id, member_id, epoch, acknowledge_only=True)
    except ShareError as exc:
        return _failed(exc.error_code, exc.message)
    results, durable = coordinator.acknowledge(group_id, member_id, acknowledgements(request),
                                               renew=bool(request["is_renew_ack"]))
    if epoch == FINAL_SESSION_EPOCH:
        coordinator.release_member(group_id, member_id)
    for (_, topic_id, index), stored in durable.items():  # acknowledged means stored
        stored_code = await asyncio.wrap_future(stored)
        results[(topic_id, index)] = results.get((topic_id, index)) or stored_code
    responses: dict[bytes, list[dict]] = {}
    for (topic_id, index), code in sorted(results.items()):
        if ctx.broker.metadata.topic_by_id(topic_id) is None:
            code = ErrorCode.UNKNOWN_TOPIC_ID
        responses.setdefault(topic_id, []).append({"partition_index": index, "error_code": code,
                                                    "error_message": None, "current_leader": NO_LEADER})
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None,
            "acquisition_lock_timeout_ms": coordinator.lock_duration_ms(group_id),
            "responses": [{"topic_id": t, "partitions": parts} for t, parts in responses.items()],
            "node_endpoints": []}
