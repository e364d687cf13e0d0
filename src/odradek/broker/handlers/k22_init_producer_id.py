"""InitProducerId (key 22), versions 0-5.

Advertised from v0: librdkafka turns its idempotent producer on only when the range contains 0.

Idempotent producers (null transactional id): every request gets a fresh producer id with epoch 0, from the
persistent allocator (coordinator/producer_ids.py), so ids never repeat, not even after a crash. This is
also Kafka's answer when a v3+ request carries the producer's current id and epoch: for a producer without
a transactional id the coordinator hands out a new id instead of bumping the epoch (KIP-360 epoch bumps of
idempotent producers happen in the client). A v3+ request that sets only one of producer id and epoch →
INVALID_REQUEST, as in Kafka.

Transactional ids (coordinator/transactions.py): `transaction_timeout_ms` must be in
(0, `transaction.max.timeout.ms`] (else INVALID_TRANSACTION_TIMEOUT). A new id gets a fresh producer id at
epoch 0; a known one keeps its producer id and gets the next epoch (a fresh id once the epoch would
overflow), after its open transaction, if any, is aborted with a bumped epoch: the previous incarnation is
fenced. A transaction whose commit/abort cannot complete yet → CONCURRENT_TRANSACTIONS (clients retry).
v3+ may name the current producer id and epoch: a mismatch is fenced (PRODUCER_FENCED from v4,
INVALID_PRODUCER_EPOCH before), a repeat of the last bump gets the same answer again. An empty
transactional id → INVALID_REQUEST.

Only the coordinator of the transactional id answers (the leader of its `__transaction_state` partition;
NOT_COORDINATOR elsewhere). Producer ids are unique in the cluster: a single node reserves blocks of them
on disk, a cluster member reserves blocks in ZooKeeper (`/latest_producer_id_block`). If a block cannot be
reserved → COORDINATOR_NOT_AVAILABLE, which clients retry.
Authorization: a transactional id needs WRITE on it (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an idempotent
producer IDEMPOTENT_WRITE on the cluster or WRITE on some topic (KIP-679; CLUSTER_AUTHORIZATION_FAILED).
v6 (KIP-939 two-phase commit fields) is not advertised.
"""

import logging

from odradek.security.authorizer import CLUSTER_NAME, Operation as Op, ResourceType as Res
from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode

log = logging.getLogger(__name__)

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1


def _error(code: int) -> dict:
    return {"throttle_time_ms": 0, "error_code": code, "producer_id": NO_PRODUCER_ID,
            "producer_epoch": NO_PRODUCER_EPOCH}


@handler(ApiKey.INIT_PRODUCER_ID, 0, 5)
async def init_producer_id(ctx: RequestContext, request: dict) -> dict:
    transactional_id = request["transactional_id"]
    if ctx.api_version >= 3:
        pid, epoch = request["producer_id"], request["producer_epoch"]
        if (pid == NO_PRODUCER_ID) != (epoch == NO_PRODUCER_EPOCH):
            return _error(ErrorCode.INVALID_REQUEST)
    if transactional_id is not None:
        if transactional_id == "":
            return _error(ErrorCode.INVALID_REQUEST)
        if not ctx.allowed(Op.WRITE, Res.TRANSACTIONAL_ID, transactional_id):
            return _error(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        if not ctx.broker.txn_coordinator.owns(transactional_id):
            return _error(ErrorCode.NOT_COORDINATOR)
        fenced = ErrorCode.PRODUCER_FENCED if ctx.api_version >= 4 else ErrorCode.INVALID_PRODUCER_EPOCH
        pid, epoch = (request["producer_id"], request["producer_epoch"]) if ctx.api_version >= 3 else (-1, -1)
        error, producer_id, producer_epoch = await ctx.broker.txn_coordinator.init_producer_id(
            transactional_id, request["transaction_timeout_ms"], pid, epoch, fenced)
        if error:
            return _error(error)
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "producer_id": producer_id,
                "producer_epoch": producer_epoch}
    conn = ctx.connection
    if not (ctx.allowed(Op.IDEMPOTENT_WRITE, Res.CLUSTER, CLUSTER_NAME)
            or ctx.broker.authorizer.authorize_any(conn.principal, conn.peer_host, Op.WRITE, Res.TOPIC)):
        return _error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    try:
        producer_id = await ctx.broker.producer_ids.allocate()
    except OSError as exc:  # the block reservation could not be written: retriable for the client
        log.error("cannot reserve producer ids: %s", exc)
        return _error(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "producer_id": producer_id, "producer_epoch": 0}
