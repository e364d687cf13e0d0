"""EndTxn (key 26), versions 0-4.

Commits or aborts the producer's transaction (coordinator/transactions.py): PrepareCommit/PrepareAbort is
written to `__transaction_state`, a COMMIT/ABORT marker is appended to every data partition of the
transaction (and on commit its staged offsets are written to `__consumer_offsets`), then
CompleteCommit/CompleteAbort; the reply comes after all of it. A repeat of a completed EndTxn with the same
outcome → NONE (a retry); the other outcome, or no open transaction → INVALID_TXN_STATE.
INVALID_PRODUCER_ID_MAPPING, the fenced code for a stale epoch (PRODUCER_FENCED from v2,
INVALID_PRODUCER_EPOCH before; also what a producer whose transaction timed out gets),
CONCURRENT_TRANSACTIONS while an earlier completion is still pending, COORDINATOR_NOT_AVAILABLE on a
storage error.
Gaps: v5 (KIP-890 part 2, the epoch bump on every EndTxn) is not advertised.
"""

from odradek.broker.core import RequestContext
from odradek.broker.registry import handler
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode


@handler(ApiKey.END_TXN, 0, 4)
def end_txn(ctx: RequestContext, request: dict) -> dict:
    fenced = ErrorCode.PRODUCER_FENCED if ctx.api_version >= 2 else ErrorCode.INVALID_PRODUCER_EPOCH
    error = ctx.broker.txn_coordinator.end_txn(request["transactional_id"], request["producer_id"],
                                               request["producer_epoch"], request["committed"], fenced)
    return {"throttle_time_ms": 0, "error_code": error}
