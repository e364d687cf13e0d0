"""The KAFKA07 listeners: accept 0.7 connections and answer their requests in order.

A connection reads one frame at a time (int32 length, then that many bytes), hands it to the service and
writes the answer, if the request has one, before reading the next: 0.7 has no correlation ids, so answers
must come back in request order, and its clients wait for each. A frame shorter than its request type,
longer than `socket.request.max.bytes`, one that does not parse, or a produced set that is corrupt closes the
connection (0.7's brokers did the same); an unexpected error closes it too, logged, and the broker goes on.

Each listener serves messages of its `legacy.message.magic` (1, or 0 for 0.6-format readers), and its
connections act as its `legacy.principal` (User:ANONYMOUS unless set; 0.7 has no authentication) from the
client's address, which the authorizer judges each request by (service.py). A produce it refuses closes the
connection.
With `zookeeper.connect` set, the first KAFKA07 listener is also registered for 0.7 clients (registry.py).

Strangers get what the Kafka listeners give them: a large frame's body takes `queued.max.request.bytes`
(the budget the Kafka listeners share, net/framing.py) as its bytes arrive, and reading stops while the budget
is spent; `connections.max.idle.ms` closes a connection that starts no frame, or stalls inside one, that long.

Concurrency: owned by the event loop.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import struct

from odradek.broker.core import Broker
from odradek.net.framing import OWN_BUFFER_MIN, RequestMemory
from odradek.net.listeners import Listener

from .codec import InvalidMessage, MalformedRequest
from .registry import Kafka07Registry
from .service import Identity, Kafka07Service, ProduceRefused

log = logging.getLogger(__name__)

_LENGTH = struct.Struct(">i")
_CHUNK = 256 * 1024  # a large frame's body is read (and its memory taken) this much at a time


class Kafka07Server:
    """The broker's KAFKA07 listeners, their connections and their ZooKeeper registry."""

    def __init__(self, broker: Broker, listeners: tuple[Listener, ...], memory: RequestMemory | None = None) -> None:
        self.broker = broker
        self.listeners = listeners
        self.memory = memory  # queued.max.request.bytes, shared with the Kafka listeners (net/framing.py)
        # the magic each listener serves (legacy.message.magic, per listener)
        self.magics = {b.name: int(broker.config.for_listener(b.name, "legacy.message.magic")) for b in listeners}
        # the principal each listener's connections act as (legacy.principal, per listener)
        self.principals = {b.name: str(broker.config.for_listener(b.name, "legacy.principal")) for b in listeners}
        # connections.max.idle.ms per listener, in seconds (None: never): a connection that starts no frame for
        # that long, or takes longer than that over one frame's body, is closed
        self.max_idle_s: dict[str, float | None] = {}
        for b in listeners:
            idle_ms = int(broker.config.for_listener(b.name, "connections.max.idle.ms"))
            self.max_idle_s[b.name] = idle_ms / 1000.0 if idle_ms > 0 else None
        self.service = Kafka07Service(broker, set(self.magics.values()))
        self.max_request = broker.config.int("socket.request.max.bytes")
        self.ports: dict[str, int] = {}  # listener name → bound port
        self._servers: list[asyncio.Server] = []
        self._connections: set[asyncio.Task] = set()
        self.registry: Kafka07Registry | None = None

    async def start(self) -> None:
        """Bind every listener (OSError when one cannot be) and keep the positions files current."""
        try:
            for listener in self.listeners:
                serve = functools.partial(self._serve, self.magics[listener.name], self.principals[listener.name],
                                          self.max_idle_s[listener.name])
                server = await asyncio.start_server(serve, listener.host or None, listener.port,
                                                    reuse_address=True)
                self._servers.append(server)
                self.ports[listener.name] = server.sockets[0].getsockname()[1]
                principal = self.principals[listener.name]
                log.info("listener %s (Kafka 0.7, messages of magic %d, clients acting as %s) on %s:%d",
                         listener.name, self.magics[listener.name], principal, listener.host,
                         self.ports[listener.name])
                if self.broker.authorizer.enabled and principal in self.broker.authorizer.super_users:
                    log.warning("listener %s: %s is among super.users, so every 0.7 client, unauthenticated, "
                                "may do anything", listener.name, principal)
        except OSError:
            self._close_servers()
            raise
        self.service.positions.install()

    async def register(self) -> None:
        """With `zookeeper.connect`, register the first listener for ZooKeeper-based 0.7 clients."""
        if not self.broker.config.get("zookeeper.connect") or not self.listeners:
            return
        listener = self.listeners[0]
        host = listener.host if listener.host not in ("", "0.0.0.0", "::") else "127.0.0.1"
        self.registry = Kafka07Registry(self.broker, host, self.ports[listener.name])
        await self.registry.start()

    def tick(self) -> None:
        if self.registry is not None:
            self.registry.refresh()

    async def _serve(self, magic: int, principal: str, idle_s: float | None, reader: asyncio.StreamReader,
                     writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        peer = writer.get_extra_info("peername")
        identity = Identity(principal, peer[0] if peer else "")
        try:
            while True:
                try:
                    (length,) = _LENGTH.unpack(await asyncio.wait_for(reader.readexactly(4), idle_s))
                except asyncio.IncompleteReadError:
                    return  # the client closed
                if not 2 <= length <= self.max_request:
                    log.info("0.7 connection %s: frame of %d bytes, closing", peer, length)
                    return
                held = 0
                try:
                    if self.memory is None or length < OWN_BUFFER_MIN:
                        frame = await asyncio.wait_for(reader.readexactly(length), idle_s)
                    else:  # taken from the budget as its bytes arrive, not as announced
                        body = bytearray()
                        while len(body) < length:
                            chunk = min(length - len(body), _CHUNK)
                            await self.memory.reserve(chunk)
                            held += chunk
                            body += await asyncio.wait_for(reader.readexactly(chunk), idle_s)
                        frame = bytes(body)
                        del body
                    await self.broker.until_cluster_known()  # as the Kafka listeners do (Broker.knows_cluster)
                    response = await self.service.handle(frame, identity, magic)
                    del frame
                finally:
                    if held:
                        self.memory.give_back(held)
                if response is not None:
                    writer.write(response)
                    await writer.drain()
        except asyncio.IncompleteReadError:
            log.info("0.7 connection %s: closed inside a frame", peer)
        except asyncio.TimeoutError:
            log.info("0.7 connection %s: idle for connections.max.idle.ms (%d ms), closing", peer,
                     int((idle_s or 0) * 1000))
        except (MalformedRequest, InvalidMessage, ProduceRefused) as exc:
            log.info("0.7 connection %s: %s, closing", peer, exc)
        except (ConnectionError, asyncio.CancelledError):
            pass
        except Exception:
            log.exception("0.7 connection %s failed, closing", peer)
        finally:
            writer.close()
            if task is not None:
                self._connections.discard(task)

    def _close_servers(self) -> None:
        for server in self._servers:
            server.close()

    async def close(self) -> None:
        self.service.positions.uninstall()
        self._close_servers()
        for task in list(self._connections):
            task.cancel()
        for server in self._servers:
            await server.wait_closed()
        if self.registry is not None:
            await self.registry.close()
