"""AddOffsetsToTxn (key 25), versions 0-4.

The group's `__consumer_offsets` partition joins the producer's transaction, after which TxnOffsetCommit
may stage offsets for the group (coordinator/transactions.py). Errors as AddPartitionsToTxn:
INVALID_PRODUCER_ID_MAPPING, the fenced code (PRODUCER_FENCED from v2, INVALID_PRODUCER_EPOCH before),
CONCURRENT_TRANSACTIONS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR; an empty group id → INVALID_GROUP_ID.
"""

from odradek.security.authorizer import Operation as Op, ResourceType as Res
from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode


@handler(ApiKey.ADD_OFFSETS_TO_TXN, 0, 4)
async def add_offsets_to_txn(ctx: RequestContext, request: dict) -> dict:
    if not request["group_id"]:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_GROUP_ID}
    if not ctx.allowed(Op.WRITE, Res.TRANSACTIONAL_ID, request["transactional_id"]):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    if not ctx.allowed(Op.READ, Res.GROUP, request["group_id"]):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.GROUP_AUTHORIZATION_FAILED}
    if not ctx.broker.txn_coordinator.owns(request["transactional_id"]):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_COORDINATOR}
    fenced = ErrorCode.PRODUCER_FENCED if ctx.api_version >= 2 else ErrorCode.INVALID_PRODUCER_EPOCH
    error = await ctx.broker.txn_coordinator.add_offsets(request["transactional_id"], request["producer_id"],
                                                   request["producer_epoch"], request["group_id"], fenced)
    return {"throttle_time_ms": 0, "error_code": error}
