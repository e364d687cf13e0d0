"""RemotePersister: a share-partition leader's way to the share coordinator of a key in a cluster.

The share coordinator of `group:topic-id:partition` is the leader of the `__share_group_state` partition the
key hashes to (coordinator/share_state.py), found in the metadata cache as FindCoordinator (key type 2,
SHARE) finds it. When that is this broker, the call goes to the local `ShareCoordinator`
(coordinator/share_coordinator.py `LocalPersister`: no network hop); otherwise one inter-broker request is
sent over the brokers' own client (cluster/broker_client.py), on one connection per coordinator kept for this
purpose:

    InitializeShareGroupState v0, ReadShareGroupState v0, WriteShareGroupState v0,
    DeleteShareGroupState v0, ReadShareGroupStateSummary v1 (with the delivery-complete count)

Calls on one key run one after the other (a later write waits for the earlier one's answer), so a state
can never be overwritten by an older one that overtook it. Writes, initializations and deletions are retried
while the coordinator is moving or loading (NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
COORDINATOR_NOT_AVAILABLE, unreachable), for at most `RETRY_FOR_S`, looking the coordinator up again each
time: an acknowledgement waits through a failover of `__share_group_state` instead of being lost. Summaries
(the admin APIs' reads: AlterShareGroupOffsets, DescribeShareGroupOffsets) are retried the same way, so the
first one in a cluster waits for `__share_group_state` to be created, as Kafka's persister waits for its
share coordinator. Reads are not retried: the leader's fetch waits and reads again on the next one.

Not thread-safe; owned by the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Protocol

from odradek.cluster.broker_client import BrokerUnavailable
from odradek.cluster.metadata import BrokerInfo
from odradek.coordinator.share_coordinator import RETRIABLE, LocalPersister, Run, StoredState
from odradek.coordinator.share_state import StateKey, key_text
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode


if TYPE_CHECKING:  # the cluster member imports kazoo, which a single node never loads
    from odradek.cluster.local import LocalController
    from odradek.cluster.member import ClusterMember

log = logging.getLogger(__name__)


class PersisterBroker(Protocol):
    """What the persister needs of the broker (core.py's Broker)."""

    node_id: int
    cluster: "LocalController | ClusterMember"

    def share_coordinator_node(self, key: str) -> BrokerInfo | None: ...

REQUEST_TIMEOUT_S = 10.0
RETRY_FOR_S = 20.0
RETRY_BACKOFF_S = 0.25


class RemotePersister:
    def __init__(self, broker: PersisterBroker, local: LocalPersister) -> None:
        self.broker = broker
        self.local = local
        self._last: dict[StateKey, asyncio.Future] = {}  # the latest call on each key

    def coordinator_of(self, key: StateKey) -> int | None:
        """The node id of ``key``'s share coordinator (as FindCoordinator with key type SHARE finds it), None
        while there is none."""
        leader = self.broker.share_coordinator_node(key_text(*key))
        return leader.node_id if leader is not None else None

    # -- the interface -----------------------------------------------------------------------------------

    def initialize(self, key: StateKey, state_epoch: int, start: int) -> Future:
        body = {"partition": key[2], "state_epoch": state_epoch, "start_offset": start}
        return self._call(key, lambda: self.local.initialize(key, state_epoch, start),
                          ApiKey.INITIALIZE_SHARE_GROUP_STATE, 0, body, _code, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                          retry=True)

    def read(self, key: StateKey, leader_epoch: int) -> Future:
        return self._call(key, lambda: self.local.read(key, leader_epoch), ApiKey.READ_SHARE_GROUP_STATE, 0,
                          {"partition": key[2], "leader_epoch": leader_epoch}, _read_result,
                          (ErrorCode.COORDINATOR_NOT_AVAILABLE, None), retry=False)

    def summary(self, key: StateKey) -> Future:
        return self._call(key, lambda: self.local.summary(key), ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 1,
                          {"partition": key[2], "leader_epoch": -1}, _summary_result,
                          (ErrorCode.COORDINATOR_NOT_AVAILABLE, None), retry=True)

    def write(self, key: StateKey, state_epoch: int, leader_epoch: int, start: int, runs: list[Run]) -> Future:
        body = {"partition": key[2], "state_epoch": state_epoch, "leader_epoch": leader_epoch, "start_offset": start,
                "state_batches": [{"first_offset": f, "last_offset": la, "delivery_state": s, "delivery_count": c}
                                  for f, la, s, c in runs]}
        return self._call(key, lambda: self.local.write(key, state_epoch, leader_epoch, start, runs),
                          ApiKey.WRITE_SHARE_GROUP_STATE, 0, body, _code, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                          retry=True)

    def delete(self, key: StateKey) -> Future:
        return self._call(key, lambda: self.local.delete(key), ApiKey.DELETE_SHARE_GROUP_STATE, 0,
                          {"partition": key[2]}, _code, ErrorCode.COORDINATOR_NOT_AVAILABLE, retry=True)

    # -- the machinery -----------------------------------------------------------------------------------

    def _call(self, key: StateKey, local: Callable[[], Future], api_key: int, version: int, partition: dict,
              parse: Callable[[dict], Any], unavailable: Any, retry: bool) -> Future:
        result: Future = Future()
        previous = self._last.get(key)
        task = asyncio.ensure_future(self._run(key, previous, local, api_key, version, partition, parse,
                                               unavailable, retry))
        self._last[key] = task

        def finished(t: asyncio.Future) -> None:
            if self._last.get(key) is t:
                del self._last[key]
            if t.cancelled():
                result.set_result(unavailable)
            elif t.exception() is not None:
                log.warning("share state call failed", exc_info=t.exception())
                result.set_result(unavailable)
            else:
                result.set_result(t.result())

        task.add_done_callback(finished)
        return result

    async def _run(self, key: StateKey, previous: asyncio.Future | None, local: Callable[[], Future],
                   api_key: int, version: int, partition: dict, parse: Callable[[dict], Any], unavailable: Any,
                   retry: bool) -> Any:
        if previous is not None:
            await asyncio.wait([previous])  # in order per key; its outcome is its caller's business
        loop = asyncio.get_running_loop()
        give_up = loop.time() + RETRY_FOR_S
        while True:
            outcome = await self._once(key, local, api_key, version, partition, parse, unavailable)
            code = outcome[0] if isinstance(outcome, tuple) else outcome
            if not retry or code not in RETRIABLE or loop.time() >= give_up:
                return outcome
            await asyncio.sleep(RETRY_BACKOFF_S)

    async def _once(self, key: StateKey, local: Callable[[], Future], api_key: int, version: int, partition: dict,
                    parse: Callable[[dict], Any], unavailable: Any) -> Any:
        node = self.coordinator_of(key)
        if node is None:
            return unavailable
        if node == self.broker.node_id:
            return await asyncio.wrap_future(local())
        client = self.broker.cluster.client_for(node, "share-state")
        if client is None:
            return unavailable
        body = {"group_id": key[0], "topics": [{"topic_id": key[1], "partitions": [partition]}]}
        request: Awaitable[dict] = client.request(api_key, version, body, timeout_s=REQUEST_TIMEOUT_S)
        try:
            response = await request
        except (BrokerUnavailable, ConnectionError, asyncio.TimeoutError):
            return unavailable
        for topic in response["results"]:
            for answer in topic["partitions"]:
                if answer["partition"] == key[2]:
                    return parse(answer)
        return unavailable


def _code(answer: dict) -> int:
    return answer["error_code"]


def _read_result(answer: dict) -> tuple[int, StoredState | None]:
    if answer["error_code"]:
        return answer["error_code"], None
    runs = [(b["first_offset"], b["last_offset"], b["delivery_state"], b["delivery_count"])
            for b in answer["state_batches"]]
    return ErrorCode.NONE, StoredState(answer["state_epoch"], -1, answer["start_offset"], runs)


def _summary_result(answer: dict) -> tuple[int, StoredState | None]:
    """The summary has no runs: a state carrying the answer's delivery-complete count instead."""
    if answer["error_code"] or answer["start_offset"] < 0:
        return answer["error_code"], None
    return ErrorCode.NONE, StoredState(answer["state_epoch"], answer["leader_epoch"], answer["start_offset"],
                                       complete_count=answer["delivery_complete_count"])
