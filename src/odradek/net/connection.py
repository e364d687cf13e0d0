"""One client connection: size-prefixed framing, in-order responses, and flow control.

Kafka frames are `int32 size` + `size` bytes. The size is checked against `socket.request.max.bytes`
before anything is buffered for the frame, so a hostile 2 GiB prefix costs nothing but a closed socket.

Requests on one connection may complete out of order (a Fetch long-polls while a Metadata answers at
once), but Kafka requires responses in request order. Each request takes a slot in `_pending`; a slot is
either the response bytes, None (no response: Produce acks=0), or a Future still running. Only the head
of the queue is ever written, so a finished response waits behind an unfinished earlier one.

Flow control: reading pauses when more than `max_queued` requests are in flight or the transport's write
buffer is over its high-water mark, and resumes when the queue drops to half (hysteresis, so the socket
does not flap between states on every request).

Not thread-safe; owned by the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections import deque
from typing import Protocol, Union

log = logging.getLogger(__name__)

Slot = Union[bytes, None, "asyncio.Future[bytes | None]"]


class CloseConnection(Exception):
    """Raised by a dispatcher when the request is unserviceable: the connection is dropped."""


class Dispatcher(Protocol):
    def dispatch(self, frame: bytes, conn: "KafkaConnection") -> Slot: ...


class KafkaConnection(asyncio.Protocol):
    def __init__(self, dispatcher: Dispatcher, max_request_bytes: int, max_queued: int) -> None:
        self._dispatcher = dispatcher
        self._max_request_bytes = max_request_bytes
        self._max_queued = max_queued
        self._buf = bytearray()
        self._pending: deque[Slot] = deque()
        self._transport: asyncio.Transport | None = None
        self._reading_paused = False
        self._writing_paused = False
        self.peer: str = "?"

    # asyncio.Protocol -------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"

    def data_received(self, data: bytes) -> None:
        buf = self._buf
        buf += data
        consumed = 0
        total = len(buf)
        while total - consumed >= 4:
            size = int.from_bytes(buf[consumed:consumed + 4], "big", signed=True)
            if size < 0 or size > self._max_request_bytes:
                log.warning("closing %s: frame size %d outside 0..%d", self.peer, size, self._max_request_bytes)
                self.close()
                return
            end = consumed + 4 + size
            if end > total:
                break
            frame = bytes(buf[consumed + 4:end])
            consumed = end
            if not self._handle_frame(frame):
                return
        if consumed:
            del buf[:consumed]

    def connection_lost(self, exc: Exception | None) -> None:
        for slot in self._pending:
            if isinstance(slot, asyncio.Future):
                slot.cancel()
        self._pending.clear()
        self._transport = None
        self._buf = bytearray()

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._update_reading()

    # ------------------------------------------------------------------------------------------------

    @property
    def is_open(self) -> bool:
        return self._transport is not None and not self._transport.is_closing()

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
            self._transport = None

    def _handle_frame(self, frame: bytes) -> bool:
        try:
            slot = self._dispatcher.dispatch(frame, self)
        except CloseConnection as exc:
            log.info("closing %s: %s", self.peer, exc)
            self.close()
            return False
        except Exception:
            log.exception("closing %s: request handling failed", self.peer)
            self.close()
            return False
        pending = self._pending
        if not pending and not isinstance(slot, asyncio.Future):
            if slot is not None and self._transport is not None:
                self._transport.write(slot)
            return self._transport is not None
        pending.append(slot)
        if isinstance(slot, asyncio.Future):
            slot.add_done_callback(self._on_slot_done)
        self._update_reading()
        return True

    def _on_slot_done(self, fut: asyncio.Future) -> None:
        if fut.cancelled():
            return
        if fut.exception() is not None:
            exc = fut.exception()
            if not isinstance(exc, CloseConnection):
                log.error("closing %s: request handling failed", self.peer, exc_info=exc)
            self.close()
            return
        self._flush_ready()

    def _flush_ready(self) -> None:
        pending = self._pending
        transport = self._transport
        while pending and transport is not None:
            head = pending[0]
            if isinstance(head, asyncio.Future):
                if not head.done():
                    break
                head = head.result()
            pending.popleft()
            if head is not None:
                transport.write(head)
        self._update_reading()

    def _update_reading(self) -> None:
        transport = self._transport
        if transport is None:
            return
        queued = len(self._pending)
        if not self._reading_paused:
            if self._writing_paused or queued > self._max_queued:
                self._reading_paused = True
                transport.pause_reading()
        elif not self._writing_paused and queued <= self._max_queued // 2:
            self._reading_paused = False
            transport.resume_reading()
