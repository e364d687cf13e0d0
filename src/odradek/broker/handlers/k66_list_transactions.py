"""ListTransactions (key 66), versions 0-2.

Every transactional id the coordinator knows, filtered by state names (`state_filters`, Kafka's names;
unknown ones are echoed in `unknown_state_filters`), by producer ids, and (v1) by `duration_filter`: only
transactions open for at least that many milliseconds, and (v2, KIP-1152) by `transactional_id_pattern`, a
regular expression the whole id must match (null or empty: no filter; one that does not compile:
INVALID_REGULAR_EXPRESSION). Gaps: the pattern is a Python regular expression, which agrees with Java's
on common patterns but not on every construct.
"""

import re

from odradek.security.authorizer import Operation as Op, ResourceType as Res
from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode


@handler(ApiKey.LIST_TRANSACTIONS, 0, 2)
def list_transactions(ctx: RequestContext, request: dict) -> dict:
    duration = request["duration_filter"] if ctx.api_version >= 1 else -1
    pattern = request["transactional_id_pattern"] if ctx.api_version >= 2 else None
    try:
        matcher = re.compile(pattern).fullmatch if pattern else None
    except re.error:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.INVALID_REGULAR_EXPRESSION, "unknown_state_filters": [],
                "transaction_states": []}
    found, unknown = ctx.broker.txn_coordinator.list(list(request["state_filters"]),
                                                     list(request["producer_id_filters"]), duration)
    return {"throttle_time_ms": 0, "error_code": 0, "unknown_state_filters": unknown,
            "transaction_states": [{"transactional_id": m.transactional_id, "producer_id": m.producer_id,
                                    "transaction_state": m.state.kafka_name} for m in found
                                   if (matcher is None or matcher(m.transactional_id))
                                   and ctx.allowed(Op.DESCRIBE, Res.TRANSACTIONAL_ID, m.transactional_id)]}
