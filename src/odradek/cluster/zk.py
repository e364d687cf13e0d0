"""ZkClient: kazoo behind the event loop.

kazoo runs its I/O on threads of its own and calls back there. Nothing of the broker may be touched on those
threads, so every call here returns an awaitable that is completed on the event loop, and every watch and
session-state callback is handed to the loop (`loop.call_soon_threadsafe`) before it runs. kazoo's `*_async`
calls are used, so many requests can be in flight at once (a new controller reads hundreds of znodes) and
no thread waits on a network round trip.

Watches fire once; callers re-read after each event. kazoo forgets every watch when its connection drops, even
when the session lives on (it tells each with a pathless NONE event, dropped here): their owners arm them
again on reconnecting (cluster/member.py). Session states reach the listener as "CONNECTED", "SUSPENDED"
(connection lost, session perhaps alive) and "LOST" (session expired: every ephemeral node and watch of it is
gone; kazoo then connects a new session by itself, reported as "CONNECTED" again).

Concurrency: the public methods are called on the event loop; kazoo's threads only post to it.
"""

from __future__ import annotations

import asyncio
import logging
import warnings
from typing import Any, Callable

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (  # noqa: F401 - re-exported for callers
    BadVersionError,
    ConnectionLoss,
    KazooException,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionExpiredError,
)
from kazoo.protocol.states import EventType, WatchedEvent, ZnodeStat

log = logging.getLogger(__name__)
# The chroot of `zookeeper.connect` (host:port/odradek) is created with the first paths the broker makes.
warnings.filterwarnings("ignore", message="No chroot path exists")

Watcher = Callable[[WatchedEvent], None]

# Reconnect forever, 50 ms after a drop and then at most every half second. The backoff must exceed 1: kazoo
# multiplies each jittered delay by it, and with 1 the delay shrinks toward zero over a long outage (a
# busy loop writing thousands of log lines a second).
CONNECTION_RETRY = {"max_tries": -1, "delay": 0.05, "backoff": 2, "max_delay": 0.5}
# Every connection attempt is an INFO line of kazoo's; the session's states are logged by its owner.
logging.getLogger("kazoo.client").setLevel(logging.WARNING)


class TransactionFailed(KazooException):
    """A multi-op was refused as a whole; ``errors`` holds each operation's result (an exception where it
    failed; a failed check is a BadVersionError or NoNodeError)."""

    def __init__(self, errors: list[Any]) -> None:
        super().__init__(f"ZooKeeper transaction failed: {errors}")
        self.errors = errors

    def failed_check(self) -> bool:
        return any(isinstance(e, (BadVersionError, NoNodeError)) for e in self.errors)


class ZkClient:
    def __init__(self, connect: str, session_timeout_ms: int, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self.connect = connect
        self._client = KazooClient(hosts=connect, timeout=session_timeout_ms / 1000.0,
                                   connection_retry=CONNECTION_RETRY,
                                   command_retry={"max_tries": 0})
        self._state_listeners: list[Callable[[str], None]] = []
        # one kazoo-side wrapper per watch function, so re-arming a watch never registers it twice
        self._wrappers: dict[Watcher, Watcher] = {}
        self._client.add_listener(self._on_state)

    # -- session --------------------------------------------------------------------------------------

    async def start(self, timeout_s: float) -> None:
        """Connect (a first session); raises TimeoutError when ZooKeeper cannot be reached in time."""
        await self._loop.run_in_executor(None, lambda: self._client.start(timeout=timeout_s))

    @property
    def session_id(self) -> int | None:
        ids = self._client.client_id
        return ids[0] if ids else None

    @property
    def connected(self) -> bool:
        return self._client.connected

    def on_state(self, listener: Callable[[str], None]) -> None:
        """``listener(state)`` runs on the loop for every session state change."""
        self._state_listeners.append(listener)

    def _on_state(self, state: str) -> None:  # kazoo's thread
        name = {KazooState.CONNECTED: "CONNECTED", KazooState.SUSPENDED: "SUSPENDED",
                KazooState.LOST: "LOST"}.get(state, str(state))
        for listener in self._state_listeners:
            self._loop.call_soon_threadsafe(listener, name)

    async def close(self) -> None:
        def stop() -> None:
            try:
                self._client.stop()
                self._client.close()
            except Exception:  # noqa: BLE001 - closing a dead connection
                log.debug("closing the ZooKeeper client failed", exc_info=True)
        await self._loop.run_in_executor(None, stop)

    # -- calls ----------------------------------------------------------------------------------------

    def _await(self, result: Any) -> "asyncio.Future[Any]":
        future = self._loop.create_future()

        def settle() -> None:
            if future.done():
                return
            try:
                future.set_result(result.get_nowait())
            except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine
                future.set_exception(exc)

        def ready(_: Any) -> None:  # kazoo's thread
            try:
                self._loop.call_soon_threadsafe(settle)
            except RuntimeError:
                pass  # the loop is closed: nobody waits any more
        result.rawlink(ready)
        return future

    def _watch(self, watch: Watcher | None) -> Watcher | None:
        if watch is None:
            return None
        wrapper = self._wrappers.get(watch)
        if wrapper is None:
            loop = self._loop
            def wrapper(event: WatchedEvent) -> None:  # kazoo's thread
                if event.type == EventType.NONE:
                    # kazoo drops every watch when the connection drops or the session expires, and tells
                    # each with a pathless NONE event; the member arms them again (ClusterMember._resume)
                    return
                try:
                    loop.call_soon_threadsafe(watch, event)
                except RuntimeError:
                    pass  # the loop is closed
            self._wrappers[watch] = wrapper
        return wrapper

    async def get(self, path: str, watch: Watcher | None = None) -> tuple[bytes, ZnodeStat]:
        return await self._await(self._client.get_async(path, self._watch(watch)))

    async def get_or_none(self, path: str, watch: Watcher | None = None) -> tuple[bytes, ZnodeStat] | None:
        try:
            return await self.get(path, watch)
        except NoNodeError:
            return None

    async def children(self, path: str, watch: Watcher | None = None) -> list[str]:
        return await self._await(self._client.get_children_async(path, self._watch(watch)))

    async def exists(self, path: str, watch: Watcher | None = None) -> ZnodeStat | None:
        return await self._await(self._client.exists_async(path, self._watch(watch)))

    async def create(self, path: str, value: bytes = b"", *, ephemeral: bool = False, sequence: bool = False,
                     makepath: bool = False) -> str:
        return await self._await(self._client.create_async(path, value, ephemeral=ephemeral, sequence=sequence,
                                                            makepath=makepath))

    async def set(self, path: str, value: bytes, version: int = -1) -> ZnodeStat:
        return await self._await(self._client.set_async(path, value, version))

    async def set_or_create(self, path: str, value: bytes) -> None:
        """Write ``path`` whether or not it exists (creating its parents)."""
        try:
            await self.set(path, value)
        except NoNodeError:
            try:
                await self.create(path, value, makepath=True)
            except NodeExistsError:
                await self.set(path, value)

    async def delete(self, path: str, version: int = -1) -> None:
        await self._await(self._client.delete_async(path, version))

    async def delete_recursive(self, path: str) -> None:
        """Delete ``path`` and everything below it (missing: nothing to do)."""
        try:
            for child in await self.children(path):
                await self.delete_recursive(f"{path}/{child}")
            await self.delete(path)
        except NoNodeError:
            pass

    async def ensure_path(self, path: str) -> None:
        await self._await(self._client.ensure_path_async(path))

    async def transaction(self, build: Callable[[Any], None]) -> list[Any]:
        """Run the operations ``build(txn)`` adds (txn.check / create / set_data / delete) atomically;
        raises TransactionFailed when any of them fails."""
        txn = self._client.transaction()
        build(txn)
        results = await self._await(txn.commit_async())
        if any(isinstance(r, Exception) for r in results):
            raise TransactionFailed(results)
        return results


def report_background_failure(task: asyncio.Task, who: str) -> None:
    """Done-callback body for a background step of a ZooKeeper user: its failure is retrieved (never "Task
    exception was never retrieved") and logged once with its reason. A connection loss or session expiry is
    logged at INFO: the session's next state change runs the step again."""
    exc = None if task.cancelled() else task.exception()
    if exc is None:
        return
    step = getattr(task.get_coro(), "__qualname__", "a background step")
    if isinstance(exc, (ConnectionLoss, SessionExpiredError)):
        log.info("%s: %s stopped: ZooKeeper %s; it runs again once the session is back", who, step,
                 type(exc).__name__)
    else:
        log.error("%s: %s failed", who, step, exc_info=exc)
