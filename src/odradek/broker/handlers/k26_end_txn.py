"""EndTxn (key 26), versions 0-5.

Commits or aborts the producer's transaction (coordinator/transactions.py): PrepareCommit/PrepareAbort is
written to `__transaction_state` (and replicated), a COMMIT/ABORT marker is written to every partition of
the transaction by its leader (on the group's `__consumer_offsets` partition it makes the transaction's
offsets committed), then CompleteCommit/CompleteAbort. The reply comes once the outcome is decided (the
Prepare state is stored) and the markers are written, or after at most a few seconds if a partition's
leader cannot be reached (the markers are retried until written; the id answers CONCURRENT_TRANSACTIONS
meanwhile). A repeat of a completed EndTxn with the same
outcome → NONE (a retry); the other outcome, or no open transaction → INVALID_TXN_STATE.
INVALID_PRODUCER_ID_MAPPING, the fenced code for a stale epoch (PRODUCER_FENCED from v2,
INVALID_PRODUCER_EPOCH before; also what a producer whose transaction timed out gets),
CONCURRENT_TRANSACTIONS while an earlier completion is still pending, COORDINATOR_NOT_AVAILABLE on a
storage error, NOT_COORDINATOR on a broker that does not coordinate the id.
v5 (transactions v2, KIP-890 part 2): every commit and abort bumps the producer's epoch, and the reply
carries the producer id and epoch to go on with; a retry with the old epoch gets the same answer (or
INVALID_TXN_STATE when it asks for the other outcome); an abort needs no open transaction (it only bumps the
epoch), a commit does (INVALID_TXN_STATE otherwise).
"""

from odradek.security.authorizer import Operation as Op, ResourceType as Res
from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode


@handler(ApiKey.END_TXN, 0, 5)
async def end_txn(ctx: RequestContext, request: dict) -> dict:
    if not ctx.allowed(Op.WRITE, Res.TRANSACTIONAL_ID, request["transactional_id"]):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED}
    if not ctx.broker.txn_coordinator.owns(request["transactional_id"]):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_COORDINATOR}
    fenced = ErrorCode.PRODUCER_FENCED if ctx.api_version >= 2 else ErrorCode.INVALID_PRODUCER_EPOCH
    error, producer_id, epoch = await ctx.broker.txn_coordinator.end_txn(
        request["transactional_id"], request["producer_id"], request["producer_epoch"], request["committed"], fenced,
        bump=ctx.api_version >= 5)
    return {"throttle_time_ms": 0, "error_code": error, "producer_id": producer_id, "producer_epoch": epoch}
