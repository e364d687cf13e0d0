"""One client connection: size-prefixed framing, in-order responses, and flow control.

Kafka frames are `int32 size` + `size` bytes. The size is checked against `socket.request.max.bytes`
before anything is buffered for the frame, so a hostile 2 GiB prefix costs nothing but a closed socket.
The connection is a BufferedProtocol: small frames are read into a scratch buffer and copied out once,
while a frame of OWN_BUFFER_MIN bytes or more is read by the kernel straight into a bytearray of its own,
which the handler gets (Produce patches offsets in that buffer and writes it to the segment as it is).

A dispatched request yields the response bytes, None (no response: Produce acks=0), or a Future for a
handler that waits. Kafka requires responses in request order; that holds because of flow control, which
follows Kafka's channel muting: while a response is outstanding (a long-polling Fetch, a
JoinGroup waiting for the group) or the transport's write buffer is over its high-water mark, no further
request of that connection is dispatched and the socket is not read. Requests answered synchronously are
written at once and never hold the connection, so pipelined produces flow freely, while a client that
pipelines fetches and never reads the responses gets one response in memory, not hundreds.

A response is bytes, or (from an async handler) the list of a frame's parts. Parts that are not bytes are
file regions (storage/segment.py FileRegion: ``len``, ``dup()``): each goes from the page cache to the
socket with sendfile(2), so a large Fetch response is never copied through Python. Such a frame is written
to the socket's fd directly, not through the transport, once the transport's own buffer is empty; the
connection stays muted until its last byte is out, so nothing else is written meanwhile. Waiting for the
socket to take more uses a duplicate of its fd, because event loops refuse a writer on a transport's own
fd. This works alike on asyncio's selector loop and on uvloop (whose loop.sendfile is not implemented).

Not thread-safe; owned by the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from typing import Protocol, Union

log = logging.getLogger(__name__)

Response = Union[bytes, list, None]  # list: a frame's parts, bytes and file regions
Slot = Union[bytes, None, "asyncio.Future[Response]"]
_BYTES = (bytes, bytearray, memoryview)


class CloseConnection(Exception):
    """Raised by a dispatcher when the request is unserviceable: the connection is dropped."""


class Dispatcher(Protocol):
    def dispatch(self, frame: bytes, conn: "KafkaConnection") -> Slot: ...


# Socket reads go to a per-connection scratch buffer of SCRATCH_BYTES. A frame of at least OWN_BUFFER_MIN
# bytes gets a buffer of its own once its size prefix is read, and the rest of it is read straight into that
# buffer: a produced record set reaches the segment file with no copy in Python (the handler patches
# offsets in place). Only what one read put into the scratch buffer is copied over.
SCRATCH_BYTES = 32 * 1024
MIN_READ = 4 * 1024
OWN_BUFFER_MIN = 16 * 1024
# A frame's own buffer starts at most this big and doubles as its bytes arrive, so a peer that announces a
# huge frame and sends little costs what it sent, not what it announced.
OWN_BUFFER_FIRST_MAX = 4 * 1024 * 1024


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(self, dispatcher: Dispatcher, max_request_bytes: int) -> None:
        self._dispatcher = dispatcher
        self._max_request_bytes = max_request_bytes
        # Bytes [_start, _end) of the scratch buffer are read but not yet dispatched.
        self._scratch = bytearray(SCRATCH_BYTES)
        self._view = memoryview(self._scratch)
        self._start = self._end = 0
        self._frame: bytearray | None = None  # a large frame being read into its own buffer
        self._frame_view: memoryview | None = None
        self._frame_size = self._frame_filled = 0
        self._into_frame = False  # where the buffer handed out by get_buffer points
        self._outstanding: asyncio.Future | None = None  # a handler's response, or a send with sendfile
        self._transport: asyncio.Transport | None = None
        self._reading_paused = False
        self._writing_paused = False
        self.peer: str = "?"

    # asyncio.BufferedProtocol -----------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if getattr(self._dispatcher, "fenced", False):  # cut off from its cluster: send the client elsewhere
            transport.close()
            return
        self._transport = transport  # type: ignore[assignment]  # uvloop's transports are not asyncio.Transport
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if peer else "?"

    def get_buffer(self, sizehint: int) -> memoryview:
        # A complete frame waiting for its turn (the connection muted) takes no more bytes: they go to scratch.
        self._into_frame = self._frame is not None and self._frame_filled < self._frame_size
        if self._into_frame:
            if self._frame_filled == len(self._frame):
                self._grow_frame()
            return self._frame_view[self._frame_filled:]
        if len(self._scratch) - self._end < MIN_READ:
            self._make_room()
        return self._view[self._end:]

    def buffer_updated(self, nbytes: int) -> None:
        if self._into_frame:
            self._frame_filled += nbytes
        else:
            self._end += nbytes
        self._process_frames()

    def _start_frame(self, size: int, body: int) -> None:
        """Read the rest of the frame of ``size`` bytes whose first bytes are at ``body`` in the scratch
        buffer into a buffer of its own."""
        have = self._end - body
        self._frame = bytearray(min(size, max(OWN_BUFFER_FIRST_MAX, have)))
        self._frame_view = memoryview(self._frame)
        self._frame_view[:have] = self._view[body:self._end]
        self._frame_size, self._frame_filled = size, have
        self._start = self._end

    def _grow_frame(self) -> None:
        frame = bytearray(min(self._frame_size, 2 * len(self._frame)))
        frame[:self._frame_filled] = self._frame_view
        self._frame, self._frame_view = frame, memoryview(frame)

    def _make_room(self) -> None:
        """Move the pending bytes to the front of the scratch buffer, or into a larger one if they fill it
        (whole frames pile up only while the connection is muted, and then the socket is not read)."""
        pending = self._end - self._start
        if len(self._scratch) - pending < MIN_READ:
            scratch = bytearray(pending + SCRATCH_BYTES)
            scratch[:pending] = self._view[self._start:self._end]
            self._scratch, self._view = scratch, memoryview(scratch)
        else:  # the ranges may overlap, and a slice assignment copies with memcpy
            self._scratch[:pending] = self._view[self._start:self._end].tobytes()
        self._start, self._end = 0, pending

    def _process_frames(self) -> None:
        """Dispatch the whole frames read so far, stopping as soon as back-pressure applies.

        Frames that arrived in one read stay buffered while a response is outstanding or the write side is
        paused (see the module docstring).
        """
        while not self._over_limit():
            if self._frame is not None:
                if self._frame_filled < self._frame_size:
                    return
                frame = self._frame
                self._frame = self._frame_view = None
                if not self._handle_frame(frame):
                    return
                continue
            start = self._start
            available = self._end - start
            if available < 4:
                break
            size = int.from_bytes(self._view[start:start + 4], "big", signed=True)
            if size < 0 or size > self._max_request_bytes:
                log.warning("closing %s: frame size %d outside 0..%d", self.peer, size, self._max_request_bytes)
                self.close()
                return
            body = start + 4
            if available - 4 >= size:
                self._start = body + size
                part = self._view[body:body + size]
                frame = bytearray(part) if size >= OWN_BUFFER_MIN else part.tobytes()
                if not self._handle_frame(frame):
                    return
            elif size >= OWN_BUFFER_MIN:
                self._start_frame(size, body)
            else:
                break
        if self._start == self._end:
            self._start = self._end = 0

    def connection_lost(self, exc: Exception | None) -> None:
        if self._outstanding is not None:
            self._outstanding.cancel()
            self._outstanding = None
        self._transport = None
        self._start = self._end = 0
        self._frame = self._frame_view = None

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._update_reading()
        if self._transport is not None and not self._over_limit():
            self._process_frames()

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
        if isinstance(slot, asyncio.Future):
            self._hold(slot, self._on_response_ready)
        elif slot is not None and self.is_open:
            self._transport.write(slot)
        # A reset seen while writing leaves the transport closing: the rest of the buffer is not served.
        return self.is_open

    def _hold(self, fut: asyncio.Future, done) -> None:
        """Mute the connection until ``fut`` is done."""
        self._outstanding = fut
        fut.add_done_callback(done)
        self._update_reading()

    def _on_response_ready(self, fut: asyncio.Future) -> None:
        self._outstanding = None
        if not self._succeeded(fut, CloseConnection):
            return
        response = fut.result()
        if response is not None and self.is_open:
            if isinstance(response, list):
                if not all(isinstance(part, _BYTES) for part in response):
                    self._hold(asyncio.ensure_future(self._send_parts(response)), self._on_sent)
                    return
                response = b"".join(response)
            self._transport.write(response)
        self._resume()

    def _on_sent(self, fut: asyncio.Future) -> None:
        self._outstanding = None
        # a peer gone mid-send, or a segment deleted before its region went out
        if self._succeeded(fut, (CloseConnection, OSError, ValueError)):
            self._resume()

    def _succeeded(self, fut: asyncio.Future, expected) -> bool:
        """False (and the connection closed) when ``fut`` was cancelled or failed; failures of the
        ``expected`` types are logged as events, any other as a bug."""
        if fut.cancelled():
            return False
        exc = fut.exception()
        if exc is None:
            return True
        if isinstance(exc, expected):
            log.info("closing %s: %s", self.peer, exc)
        else:
            log.error("closing %s: request handling failed", self.peer, exc_info=exc)
        self.close()
        return False

    def _resume(self) -> None:
        self._update_reading()
        if not self._over_limit() and (self._end > self._start or self._frame is not None):
            self._process_frames()

    async def _send_parts(self, parts: list) -> None:
        """Write a frame's parts to the socket in order: bytes with write(2), regions with sendfile(2)."""
        # Every region's fd is duplicated before the first byte goes out, so no segment deleted while an
        # earlier part is being sent can take a region's data with it.
        fds: list[int] = []
        try:
            for part in parts:
                if not isinstance(part, _BYTES):
                    fds.append(part.dup())
            transport = self._transport
            sock = transport.get_extra_info("socket") if transport is not None else None
            if sock is None:
                raise ConnectionError("connection closed before a response was sent")
            sock_fd = sock.fileno()
            while transport.get_write_buffer_size():  # earlier responses go first
                await _writable(sock_fd)
                if transport.is_closing():
                    raise ConnectionError("connection closed before a response was sent")
            region_fds = iter(fds)
            pending: list = []
            for part in parts:
                if isinstance(part, _BYTES):
                    pending.append(part)
                    continue
                if pending:
                    await _write_all(sock_fd, b"".join(pending))
                    pending.clear()
                await _sendfile_all(sock_fd, next(region_fds), part.position, part.length)
            if pending:
                await _write_all(sock_fd, b"".join(pending))
        finally:
            for fd in fds:
                os.close(fd)

    def _over_limit(self) -> bool:
        return self._writing_paused or self._outstanding is not None

    def _update_reading(self) -> None:
        transport = self._transport
        if transport is None:
            return
        over = self._over_limit()
        if over and not self._reading_paused:
            self._reading_paused = True
            transport.pause_reading()
        elif not over and self._reading_paused:
            self._reading_paused = False
            transport.resume_reading()


async def _writable(sock_fd: int) -> None:
    """Wait until the socket can take more bytes (or has failed, which the next write reports)."""
    loop = asyncio.get_running_loop()
    waiter = loop.create_future()
    fd = os.dup(sock_fd)
    loop.add_writer(fd, lambda: waiter.done() or waiter.set_result(None))
    try:
        await waiter
    finally:
        loop.remove_writer(fd)  # before close: an fd closed while registered can leave a stale epoll entry
        os.close(fd)


async def _write_all(sock_fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(sock_fd, view):]
        except BlockingIOError:
            await _writable(sock_fd)


async def _sendfile_all(sock_fd: int, file_fd: int, position: int, length: int) -> None:
    end = position + length
    while position < end:
        try:
            sent = os.sendfile(sock_fd, file_fd, position, end - position)
        except BlockingIOError:
            await _writable(sock_fd)
            continue
        if sent == 0:
            raise OSError(f"segment file ends before byte {end} of a region")
        position += sent
