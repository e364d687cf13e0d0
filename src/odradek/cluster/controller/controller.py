"""Controller: the one broker (elected through `/controller`) that decides every partition's leader and ISR.

Its work is an explicit queue of events, handled one at a time, each to its end: what ZooKeeper's watches
report (brokers registering or gone, topics created, grown or marked for deletion, ISR changes made by
leaders), what brokers ask (ControlledShutdown, ElectLeaders), and a periodic check of leader balance. An
event reads what it needs from ZooKeeper, decides (election.py), writes the decisions there through the
epoch-fenced `PartitionStateStore`, and then tells the brokers in one `RequestBatch`. A watch fires once,
so each handler re-arms its watch as it reads.

Broker changes (broker_changes.py), topic changes (topic_changes.py) and partition reassignments
(reassignment.py) are handled in modules of their own;
this one holds the queue, the failover start-up, the shared "elect and write" step, ISR change
notifications and preferred-leader elections.

On becoming controller it bumps `/controller_epoch`, rebuilds its view from ZooKeeper (a new controller
trusts nothing it remembers), elects leaders for partitions that have none or whose leader is gone, and
sends every live broker its LeaderAndIsr and the full metadata. A write refused because the epoch moved
means a newer controller exists: this one stops at once.

Not thread-safe; owned by the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Awaitable, Callable

from odradek.cluster import zk_layout as L
from odradek.cluster.controller import broker_changes, reassignment, topic_changes
from odradek.cluster.controller.context import ControllerContext
from odradek.cluster.controller.election import offline_election, preferred_election
from odradek.cluster.controller.requests import ControllerChannel, RequestBatch
from odradek.cluster.controller.state_store import ControllerMoved, PartitionStateStore
from odradek.cluster.zk import ConnectionLoss, NoNodeError, SessionExpiredError, ZkClient
from odradek.cluster.zk_layout import PartitionState
from odradek.protocol.errors import ErrorCode

if TYPE_CHECKING:
    import ssl

    from odradek.config import BrokerConfig
    from odradek.net.sasl_client import SaslClientSettings

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
Event = Callable[[], Awaitable[None]]


class Controller:
    def __init__(self, broker_id: int, zk: ZkClient, config: "BrokerConfig",
                 on_stop: Callable[["Controller"], None], listener: str = "PLAINTEXT",
                 tls: "ssl.SSLContext | None" = None, sasl: "SaslClientSettings | None" = None) -> None:
        self.broker_id = broker_id
        self.zk = zk
        self.config = config
        self.ctx = ControllerContext()
        self.store = PartitionStateStore(zk, self.ctx)
        self.listener = listener
        self.channel = ControllerChannel(broker_id, config.int("controller.socket.timeout.ms") / 1000.0, listener,
                                         tls, sasl)
        self._queue: asyncio.Queue[Event] = asyncio.Queue()
        self._on_stop = on_stop
        self.active = False
        self._task: asyncio.Task | None = None
        self._rebalance_task: asyncio.Task | None = None
        self.unclean_default = bool(config.get("unclean.leader.election.enable"))
        self.ready = asyncio.Event()

    # -- life ---------------------------------------------------------------------------------------

    def start(self) -> None:
        self.active = True
        self._task = asyncio.ensure_future(self._run())

    def post(self, event: Event) -> None:
        if self.active:
            self._queue.put_nowait(event)

    async def _run(self) -> None:
        try:
            await self._failover()
            self.ready.set()
            if self.config.get("auto.leader.rebalance.enable"):
                self._rebalance_task = asyncio.ensure_future(self._rebalance_timer())
            while self.active:
                event = await self._queue.get()
                try:
                    await event()
                except (ConnectionLoss, SessionExpiredError) as exc:
                    # half done, perhaps: resync() (after a reconnect) or a new controller (after an
                    # expiry) rebuilds everything from ZooKeeper
                    log.warning("controller %d: an event failed, ZooKeeper unreachable (%s)", self.broker_id,
                                type(exc).__name__)
        except ControllerMoved as exc:
            log.info("controller %d: %s; resigning", self.broker_id, exc)
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("controller %d failed; resigning", self.broker_id)
        finally:
            self._shutdown()

    def stop(self) -> None:
        if self._task is not None and not self._task.done():
            self._task.cancel()
        else:
            self._shutdown()

    def _shutdown(self) -> None:
        if not self.active:
            return
        self.active = False
        if self._rebalance_task is not None:
            self._rebalance_task.cancel()
        self.channel.close()
        while not self._queue.empty():
            self._queue.get_nowait()  # events of a controller that resigned are moot
        self._on_stop(self)

    async def call(self, make: Callable[[], Awaitable[object]], timeout_s: float) -> object:
        """Run ``make()`` as an event (in turn with the others) and return its result."""
        loop = asyncio.get_running_loop()
        result = loop.create_future()

        async def event() -> None:
            try:
                value = await make()
            except ControllerMoved:
                if not result.done():
                    result.set_exception(ConnectionError("not the controller any more"))
                raise
            except Exception as exc:
                if not result.done():
                    result.set_exception(exc)
                return
            if not result.done():
                result.set_result(value)

        if not self.active:
            raise ConnectionError("not the controller")
        self.post(event)
        return await asyncio.wait_for(result, timeout_s)

    def resync(self) -> None:
        """After a reconnect within the session: kazoo dropped every watch with the connection, and events may
        have failed half-way, so start over from ZooKeeper as a new controller would (under a new epoch),
        without ever ceasing to be the controller."""
        self.post(self._failover)

    # -- failover start-up -----------------------------------------------------------------------------

    async def _failover(self) -> None:
        started = time.monotonic()
        await self.store.claim_epoch()
        ctx = self.ctx
        snapshot = await self.store.read_cluster()
        ctx.brokers = snapshot.brokers
        ctx.topics = snapshot.topics
        ctx.states = snapshot.states
        for reg in ctx.brokers.values():
            self.channel.add_broker(reg)
        for gone in self.channel.broker_ids - set(ctx.brokers):  # a resync: they left meanwhile
            self.channel.remove_broker(gone)
        await self.zk.children(L.BROKER_IDS, self.brokers_watch)
        await self.zk.children(L.TOPICS, self.topics_watch)
        await self.zk.children(L.DELETE_TOPICS, self.deletions_watch)
        await self.zk.children(L.ISR_CHANGES, self._isr_watch)
        for topic in ctx.topics:
            await self.zk.exists(L.topic_path(topic), self.topic_watch)
            self.post(lambda topic=topic: topic_changes.on_topic_modified(self, topic))  # grown meanwhile?
        batch = self.batch()
        await self.start_new_partitions(batch, [tp for tp in ctx.partitions() if tp not in ctx.states])
        await self.elect_offline(batch, [tp for tp in ctx.partitions()
                                         if tp in ctx.states and ctx.states[tp].leader not in ctx.brokers])
        gone = {r for state in ctx.states.values() for r in state.isr if r not in ctx.brokers}
        if gone:  # replicas that died while there was no controller leave the ISRs
            await broker_changes.leave_isr(self, batch, gone)
        for tp in ctx.partitions():
            if tp in ctx.states:
                batch.add_leader_and_isr(ctx.replicas(tp), tp)
        batch.add_update_metadata(ctx.live, ctx.partitions())
        batch.send(self.channel)
        log.info("broker %d is the controller (epoch %d): %d brokers, %d topics, %d partitions, in %.0f ms",
                 self.broker_id, ctx.epoch, len(ctx.brokers), len(ctx.topics), len(ctx.partitions()),
                 (time.monotonic() - started) * 1000)
        # whatever changed between reading the snapshot and arming the watches fired no watch: look again
        self.post(lambda: broker_changes.on_brokers_changed(self))
        self.post(lambda: topic_changes.on_topics_changed(self))
        self.post(lambda: topic_changes.on_deletions(self))
        await self._drain_isr_notifications()
        self.post(lambda: reassignment.resume(self))

    # -- watches (they post events) ---------------------------------------------------------------------

    def brokers_watch(self, event) -> None:
        self.post(lambda: broker_changes.on_brokers_changed(self))

    def topics_watch(self, event) -> None:
        self.post(lambda: topic_changes.on_topics_changed(self))

    def topic_watch(self, event) -> None:
        topic = event.path.rsplit("/", 1)[-1]
        self.post(lambda: topic_changes.on_topic_modified(self, topic))

    def deletions_watch(self, event) -> None:
        self.post(lambda: topic_changes.on_deletions(self))

    def _isr_watch(self, event) -> None:
        self.post(self._drain_isr_notifications)

    # -- shared steps ------------------------------------------------------------------------------------

    def batch(self) -> RequestBatch:
        return RequestBatch(self.ctx, self.broker_id, self.listener)

    async def _unclean_topics(self, topics: set[str]) -> set[str]:
        """Topics whose unclean.leader.election.enable (their override, else the broker default) is true."""
        out = set()
        for topic in topics:
            found = await self.zk.get_or_none(L.topic_config_path(topic))
            value = L.decode_topic_config(found[0] if found else None).get("unclean.leader.election.enable")
            if (value == "true") if value is not None else self.unclean_default:
                out.add(topic)
        return out

    async def decide_and_write(self, batch: RequestBatch, partitions: list[TopicPartition],
                               decide: Callable[[TopicPartition, PartitionState], PartitionState | None]
                               ) -> set[TopicPartition]:
        """For each partition (with a known state, not being deleted) write the new state ``decide(tp,
        current)`` gives (None: nothing to change). A partition whose znode moved on meanwhile is read again
        and decided again, up to a few times. Every written partition gets LeaderAndIsr (to its live
        replicas) and UpdateMetadata (to every broker). Returns the written ones."""
        ctx = self.ctx
        changes = {}
        for tp in partitions:
            current = ctx.states.get(tp)
            if current is not None and tp[0] not in ctx.deleting:
                decided = decide(tp, current)
                if decided is not None:
                    changes[tp] = decided
        written: set[TopicPartition] = set()
        for _ in range(5):
            if not changes:
                break
            results = await self.store.write_all(changes)
            retry: dict[TopicPartition, PartitionState] = {}
            for tp, state in results.items():
                if state is not None:
                    ctx.states[tp] = state
                    written.add(tp)
                    batch.add_leader_and_isr(ctx.replicas(tp), tp)
                    continue
                current = await self.store.read_state(tp)
                if current is None:
                    continue
                ctx.states[tp] = current
                again = decide(tp, current)
                if again is not None:
                    retry[tp] = again
                else:
                    batch.add_leader_and_isr(ctx.replicas(tp), tp)
            changes = retry
        return written

    async def elect_offline(self, batch: RequestBatch, partitions: list[TopicPartition],
                            force_unclean: bool = False) -> None:
        """Elect leaders for partitions whose leader is not live (Kafka's OfflinePartitionLeaderElection);
        outside the ISR only where unclean elections are allowed (or ``force_unclean``: ElectLeaders)."""
        ctx = self.ctx
        stuck = {tp[0] for tp in partitions if tp in ctx.states and offline_election(
            ctx.replicas(tp), ctx.states[tp].isr, ctx.live - ctx.shutting_down, False) is None}
        unclean = {tp[0] for tp in partitions} if force_unclean else await self._unclean_topics(stuck)

        def decide(tp: TopicPartition, current: PartitionState) -> PartitionState | None:
            if current.leader in ctx.brokers and current.leader not in ctx.shutting_down:
                return None
            elected = offline_election(ctx.replicas(tp), current.isr, ctx.live - ctx.shutting_down,
                                       tp[0] in unclean)
            if elected is None:
                if current.leader == -1:
                    return None
                # nobody may lead: the partition is offline until an ISR member returns
                log.warning("controller: %s-%d has no live in-sync replica (ISR %s); it is offline", tp[0], tp[1],
                            current.isr)
                return current.copy(leader=-1, leader_epoch=current.leader_epoch + 1)
            leader, isr = elected
            if leader not in current.isr:
                log.warning("controller: unclean election of %d for %s-%d (ISR was %s)", leader, tp[0], tp[1],
                            current.isr)
            return current.copy(leader=leader, leader_epoch=current.leader_epoch + 1, isr=isr)

        await self.decide_and_write(batch, partitions, decide)

    async def start_new_partitions(self, batch: RequestBatch, partitions: list[TopicPartition]) -> None:
        """First state of new partitions: the first live replica leads, the live replicas are the ISR."""
        ctx = self.ctx
        changes = {}
        for tp in partitions:
            replicas = ctx.replicas(tp)
            live = [r for r in replicas if r in ctx.brokers]
            if not live:
                log.warning("controller: no replica of new partition %s-%d is live (%s)", tp[0], tp[1], replicas)
                continue
            changes[tp] = PartitionState(live[0], 0, live, ctx.epoch, -1)
        results = await self.store.write_all(changes)
        for tp, state in results.items():
            if state is None:  # it existed after all
                state = await self.store.read_state(tp)
                if state is None:
                    continue
            ctx.states[tp] = state
            batch.add_leader_and_isr(ctx.replicas(tp), tp, is_new=True)

    # -- ISR changes made by leaders -------------------------------------------------------------------

    async def _drain_isr_notifications(self) -> None:
        names = await self.zk.children(L.ISR_CHANGES, self._isr_watch)
        if not names:
            return
        changed: set[TopicPartition] = set()
        for name in sorted(names):
            path = f"{L.ISR_CHANGES}/{name}"
            found = await self.zk.get_or_none(path)
            if found is not None:
                changed.update(L.decode_isr_change(found[0]))
            try:
                await self.zk.delete(path)
            except NoNodeError:
                pass
        ctx = self.ctx
        known = [tp for tp in changed if tp[0] in ctx.topics]
        for tp, state in zip(known, await asyncio.gather(*(self.store.read_state(tp) for tp in known))):
            if state is not None:
                ctx.states[tp] = state
        batch = self.batch()
        # A leader writes its ISR itself, so it may add a broker this controller has taken out of the ISRs
        # (gone, or in controlled shutdown) with a fetch that raced that removal: it leaves again here, as
        # Kafka's controller refuses such a member (KIP-841's INELIGIBLE_REPLICA). Without this it would stay
        # while the partition is idle, since a follower at the leader's log end counts as in sync.
        ineligible = {r for tp in known if tp in ctx.states for r in ctx.states[tp].isr
                      if r not in ctx.brokers or r in ctx.shutting_down}
        if ineligible:
            log.info("controller: broker(s) %s joined an ISR while gone or shutting down; taking them out",
                     sorted(ineligible))
            await broker_changes.leave_isr(self, batch, ineligible, known)
        batch.add_update_metadata(ctx.live, known)
        batch.send(self.channel)
        # an adding replica that joined the ISR may be the last one a reassignment waited for
        await reassignment.check(self, [tp for tp in known if ctx.topics[tp[0]].reassigning(tp[1])])

    # -- preferred leaders --------------------------------------------------------------------------------

    async def elect_preferred(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        """ElectLeaders (preferred): an error code per partition (ELECTION_NOT_NEEDED when the preferred
        replica leads already, PREFERRED_LEADER_NOT_AVAILABLE when it may not lead now)."""
        ctx = self.ctx
        errors: dict[TopicPartition, int] = {}

        def decide(tp: TopicPartition, current: PartitionState) -> PartitionState | None:
            replicas = ctx.replicas(tp)
            if replicas and current.leader == replicas[0]:
                return None
            elected = preferred_election(replicas, current.isr, ctx.live - ctx.shutting_down)
            if elected is None:
                return None
            return current.copy(leader=elected[0], leader_epoch=current.leader_epoch + 1)

        candidates = []
        for tp in partitions:
            state = ctx.states.get(tp)
            replicas = ctx.replicas(tp)
            if state is None or tp[0] in ctx.deleting:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif replicas and state.leader == replicas[0]:
                errors[tp] = ErrorCode.ELECTION_NOT_NEEDED
            else:
                candidates.append(tp)
        batch = self.batch()
        written = await self.decide_and_write(batch, candidates, decide)
        batch.send(self.channel)
        for tp in candidates:
            errors[tp] = ErrorCode.NONE if tp in written else ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
        return errors

    async def elect_unclean(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        """ElectLeaders (unclean): partitions without a leader get any live replica."""
        ctx = self.ctx
        errors: dict[TopicPartition, int] = {}
        offline = []
        for tp in partitions:
            state = ctx.states.get(tp)
            if state is None:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif state.leader in ctx.brokers:
                errors[tp] = ErrorCode.ELECTION_NOT_NEEDED
            else:
                offline.append(tp)
        batch = self.batch()
        await self.elect_offline(batch, offline, force_unclean=True)
        batch.send(self.channel)
        for tp in offline:
            errors[tp] = ErrorCode.NONE if ctx.states[tp].leader in ctx.brokers else ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
        return errors

    # -- reassignments (reassignment.py) ---------------------------------------------------------------

    async def alter_reassignments(self, wanted: dict[TopicPartition, list[int] | None]
                                  ) -> dict[TopicPartition, tuple[int, str | None]]:
        return await reassignment.alter(self, wanted)

    async def list_reassignments(self, partitions: list[TopicPartition] | None
                                 ) -> dict[TopicPartition, tuple[list[int], list[int], list[int]]]:
        return reassignment.ongoing(self, partitions)

    async def _rebalance_timer(self) -> None:
        interval = self.config.int("leader.imbalance.check.interval.seconds")
        while self.active:
            await asyncio.sleep(interval)
            self.post(self._rebalance)

    async def _rebalance(self) -> None:
        """auto.leader.rebalance.enable: move leadership back to preferred replicas on any broker whose share
        of partitions led by others exceeds leader.imbalance.per.broker.percentage."""
        ctx = self.ctx
        threshold = self.config.int("leader.imbalance.per.broker.percentage") / 100.0
        by_preferred: dict[int, list[TopicPartition]] = {}
        for tp in ctx.partitions():
            replicas = ctx.replicas(tp)
            if replicas and tp[0] not in ctx.deleting:
                by_preferred.setdefault(replicas[0], []).append(tp)
        wanted = []
        for broker, tps in by_preferred.items():
            if broker not in ctx.brokers or broker in ctx.shutting_down:
                continue
            misplaced = [tp for tp in tps if tp in ctx.states and ctx.states[tp].leader != broker]
            if misplaced and len(misplaced) / len(tps) > threshold:
                wanted.extend(misplaced)
        if wanted:
            log.info("controller: leader imbalance; moving %d partitions back to their preferred leaders", len(wanted))
            await self.elect_preferred(wanted)
