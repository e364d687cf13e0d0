"""The Kafka 0.7 ZooKeeper registry, so that ZooKeeper-based 0.7 producers and consumers find the broker.

With `zookeeper.connect` set and a KAFKA07 listener, the broker keeps, under `legacy.zookeeper.chroot`
(default /kafka07) on the same ZooKeeper ensemble, apart from the cluster's own tree (any chroot of
`zookeeper.connect` is replaced by it)::

    /brokers/ids/<broker id>               ephemeral   "creator:host:port"  (creator: "<host>-<start ms>",
                                                         host:port: the KAFKA07 listener)
    /brokers/topics/<topic>/<broker id>    ephemeral   the topic's partition count, as decimal text

Both come from this broker's session, so they vanish when it stops. Topic entries follow the broker's
metadata (created, updated, deleted on each ``refresh``, called every tick); a new session (after an expiry)
writes everything again. Consumer balancing (/consumers/...) belongs to the 0.7 clients; the broker never
touches it. This module is the one place that knows these paths.

Concurrency: owned by the event loop (ZkClient completes kazoo's calls there).
"""

from __future__ import annotations

import asyncio
import logging
import time

from odradek.broker.core import Broker
from odradek.cluster.zk import KazooException, NodeExistsError, NoNodeError, ZkClient

log = logging.getLogger(__name__)

START_TIMEOUT_S = 10.0


def ids_path(broker_id: int) -> str:
    return f"/brokers/ids/{broker_id}"


def topic_path(topic: str, broker_id: int) -> str:
    return f"/brokers/topics/{topic}/{broker_id}"


def legacy_connect_string(connect: str, chroot: str) -> str:
    """`zookeeper.connect` with its chroot (if any) replaced by ``chroot``."""
    hosts = connect.split("/", 1)[0]
    return hosts + "/" + chroot.strip("/")


def broker_info(host: str, port: int, started_ms: int) -> bytes:
    """The data of /brokers/ids/<id>: creator:host:port, the creator being "<host>-<start ms>" as 0.7 wrote."""
    return f"{host}-{started_ms}:{host}:{port}".encode()


class Kafka07Registry:
    """Keeps this broker's 0.7 entries in ZooKeeper (see the module docstring)."""

    def __init__(self, broker: Broker, host: str, port: int) -> None:
        self.broker = broker
        self.host, self.port = host, port
        self.started_ms = int(time.time() * 1000)
        config = broker.config
        connect = legacy_connect_string(str(config.get("zookeeper.connect")),
                                        str(config.get("legacy.zookeeper.chroot")))
        self.zk = ZkClient(connect, config.int("zookeeper.session.timeout.ms"), asyncio.get_running_loop())
        self._written: dict[str, int] = {}  # topic → partition count in ZooKeeper
        self._refreshing: asyncio.Task | None = None
        self._closed = False
        self.zk.on_state(self._on_state)

    async def start(self) -> None:
        await self.zk.start(START_TIMEOUT_S)
        await self._register()

    async def _register(self) -> None:
        broker_id = self.broker.node_id
        await self.zk.ensure_path("/brokers/ids")
        await self.zk.ensure_path("/brokers/topics")
        try:
            await self.zk.create(ids_path(broker_id), broker_info(self.host, self.port, self.started_ms),
                                 ephemeral=True)
        except NodeExistsError:  # ours from a session that is going away: take it over
            await self.zk.set(ids_path(broker_id), broker_info(self.host, self.port, self.started_ms))
        self._written.clear()
        await self._sync_topics()

    def _on_state(self, state: str) -> None:
        if state == "CONNECTED" and not self._closed and self.zk.session_id is not None:
            # a new session after an expiry has none of our ephemeral nodes: write them again
            self._spawn(self._reregister())

    async def _reregister(self) -> None:
        try:
            if await self.zk.exists(ids_path(self.broker.node_id)) is None:
                await self._register()
        except KazooException as exc:
            log.warning("0.7 registry: cannot register again: %s", exc)

    def refresh(self) -> None:
        """Bring the topic entries in line with the broker's topics (called every tick)."""
        if self._refreshing is None or self._refreshing.done():
            self._refreshing = self._spawn(self._sync_topics())

    def _spawn(self, coro) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coro)
        task.add_done_callback(lambda t: t.cancelled() or t.exception() and log.warning(
            "0.7 registry update failed: %s", t.exception()))
        return task

    async def _sync_topics(self) -> None:
        broker_id = self.broker.node_id
        wanted = {t.name: t.partitions for t in self.broker.metadata.all_topics() if not t.is_internal}
        for name, count in wanted.items():
            if self._written.get(name) == count:
                continue
            path = topic_path(name, broker_id)
            await self.zk.ensure_path(f"/brokers/topics/{name}")
            try:
                await self.zk.create(path, str(count).encode(), ephemeral=True)
            except NodeExistsError:
                await self.zk.set(path, str(count).encode())
            self._written[name] = count
        for name in [n for n in self._written if n not in wanted]:
            try:
                await self.zk.delete(topic_path(name, broker_id))
            except NoNodeError:
                pass
            del self._written[name]

    async def close(self) -> None:
        self._closed = True
        if self._refreshing is not None:
            self._refreshing.cancel()
        await self.zk.close()
