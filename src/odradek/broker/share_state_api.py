"""The share coordinator's side of the inter-broker share-state APIs (keys 83-87): one loop for all five.

Each request names a group and (topic id, partitions); each partition is one call on this broker's
`ShareCoordinator` (coordinator/share_coordinator.py), answered per partition. Only brokers may call them
(CLUSTER_ACTION on the cluster, as for the other inter-broker APIs; CLUSTER_AUTHORIZATION_FAILED otherwise).
A key whose `__share_group_state` partition is not led here answers NOT_COORDINATOR, one led but still being
replayed COORDINATOR_LOAD_IN_PROGRESS; the caller (broker/share_persister.py) looks the coordinator up again
and retries.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Callable

from odradek.security.authorizer import CLUSTER_NAME, Operation as Op, ResourceType as Res
from odradek.coordinator.share_coordinator import ShareCoordinator
from odradek.coordinator.share_state import StateKey
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.context import RequestContext

# (the share coordinator, the key, the request's partition entry) -> a future of the call's outcome
Call = Callable[[ShareCoordinator, StateKey, dict], Future]
# (partition index, outcome) -> the response's partition entry
Shape = Callable[[int, Any], dict]


async def answer(ctx: "RequestContext", request: dict, call: Call, shape: Shape, refused: Any) -> dict:
    """The response body: ``call`` on every partition of the request (``refused`` as the outcome of each
    when the caller is no broker)."""
    allowed = ctx.allowed(Op.CLUSTER_ACTION, Res.CLUSTER, CLUSTER_NAME)
    coordinator = ctx.broker.coordinator.share_coordinator
    results = []
    for topic in request["topics"]:
        partitions = []
        for entry in topic["partitions"]:
            key = (request["group_id"], topic["topic_id"], entry["partition"])
            outcome = await asyncio.wrap_future(call(coordinator, key, entry)) if allowed else refused
            partitions.append(shape(entry["partition"], outcome))
        results.append({"topic_id": topic["topic_id"], "partitions": partitions})
    return {"results": results}


def code_only(index: int, code: int) -> dict:
    return {"partition": index, "error_code": code, "error_message": None}


REFUSED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
REFUSED_READ = (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
