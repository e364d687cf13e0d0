"""One client connection: size-prefixed framing, in-order responses, and flow control.

Frames are read by a FrameReader (net/framing.py), whose limit is `socket.request.max.bytes`: a frame
outside it closes the socket. A frame of OWN_BUFFER_MIN bytes or more is read by the kernel straight into
a bytearray of its own, which the handler gets (Produce patches offsets in that buffer and writes it to the
segment as it is).

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
On a TLS listener the bytes must pass through the encryption in user space: regions are read (pread) and
written through the transport like any other response, whose flow control then applies.

A client over one of its quotas (security/quotas.py) is muted the same way for its throttle time: its
response goes out at once, and nothing more is read from it until the time has passed (KIP-219).

On a SASL listener, until the login completes (and again from a re-authentication's SaslHandshake until
it completes), the frame limit is the listener's `sasl.server.max.receive.size` (512 KiB by default), as
Kafka's SaslServerAuthenticator reads with: a stranger cannot make the broker buffer more than that.

`connections.max.idle.ms`: a read marks the connection active (an attribute store, nothing more); the
server's sweep (odradek/server.py) calls `sweep_idle` a few times per idle period, and a connection neither
read from nor holding a request in flight (a handler's answer awaited, its frame waiting for request
memory, a quota's throttle, a client not reading its responses) for the whole period is closed, as
Kafka's Selector closes a connection by the time of its last activity. A TLS connection is a
KafkaConnection only once its handshake is done; before that, the listener's ssl_handshake_timeout bounds it.

Each connection knows its listener (Metadata answers with that listener's endpoints) and its principal:
`User:ANONYMOUS`, or from a client certificate on a TLS listener (net/tls.py).

Not thread-safe; owned by the event loop.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from typing import Protocol, Union

from odradek.net.allocator import FreedMemory
from odradek.net.framing import SCRATCH_BYTES, FrameReader, FrameTooLarge, RequestMemory
from odradek.net.limits import ConnectionLimits
from odradek.net.listeners import Listener
from odradek.net.sasl import AuthenticationFailed, SaslSession
from odradek.net.tls import ANONYMOUS, TlsListener

log = logging.getLogger(__name__)

Response = Union[bytes, list, None]  # list: a frame's parts, bytes and file regions
Slot = Union[bytes, None, "asyncio.Future[Response]"]
_BYTES = (bytes, bytearray, memoryview)
_SASL_EXCHANGE = (18, 17, 36)  # ApiVersions, SaslHandshake, SaslAuthenticate: all that may come before a login


class CloseConnection(Exception):
    """Raised by a dispatcher when the request is unserviceable: the connection is dropped."""


class Dispatcher(Protocol):
    def dispatch(self, frame: bytes, conn: "KafkaConnection") -> Slot: ...


class KafkaConnection(asyncio.BufferedProtocol):
    def __init__(self, dispatcher: Dispatcher, max_request_bytes: int, listener: Listener | None = None,
                 tls: TlsListener | None = None, memory: RequestMemory | None = None) -> None:
        self._dispatcher = dispatcher
        self.listener = listener.name if listener is not None else "PLAINTEXT"
        self._tls = tls
        self.principal = ANONYMOUS
        self.sasl: SaslSession | None = None  # on a SASL listener: set by the listener, nothing passes before it
        self._refusing = False  # a failed login: nothing more is read; the answer waits, then the socket closes
        self._throttled_until = 0.0  # a client over its quota: nothing is read before this (loop time)
        self.limits: ConnectionLimits | None = None  # counted there while open
        self._counted = False
        self._max_request_bytes = max_request_bytes
        self._frames = FrameReader(max_request_bytes, memory)
        self.freed: FreedMemory | None = None  # told what a closing connection's buffers held (net/allocator.py)
        self.max_idle_s = -1.0  # connections.max.idle.ms of its listener, in seconds; < 0: never idle
        self._read_since_sweep = False
        self._idle_since = time.monotonic()
        self._awaiting_memory = False  # a large frame waits for queued.max.request.bytes (net/framing.py)
        self._outstanding: asyncio.Future | None = None  # a handler's response, or a send with sendfile
        self._transport: asyncio.Transport | None = None
        self._reading_paused = False
        self._writing_paused = False
        self.peer: str = "?"
        self.peer_host: str = ""  # the client's address, as ACL hosts name it
        # with the broker's metrics on (broker/metrics.py): perf_counter() of the latest read, from which a
        # request's queue time counts (reads stop while the connection is muted, so it is its frame's read)
        self._stamp_reads = getattr(dispatcher, "metrics", None) is not None
        self.read_at = 0.0

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
        self.peer_host = peer[0] if peer else ""
        if self.limits is not None:
            if not self.limits.admit(self.listener, self.peer_host):
                self._transport = None
                transport.close()
                return
            self._counted = True
        if self.sasl is not None:
            self.sasl.peer = self.peer
            self._limit_frames(self.sasl)
        if self._tls is not None:
            self.principal = self._tls.principal(transport.get_extra_info("ssl_object"))

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._frames.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self._read_since_sweep = True
        if self._stamp_reads:
            self.read_at = time.perf_counter()
        self._frames.buffer_updated(nbytes)
        self._process_frames()

    def _process_frames(self) -> None:
        """Dispatch the whole frames read so far, stopping as soon as back-pressure applies.

        Frames that arrived in one read stay buffered while a response is outstanding or the write side is
        paused (see the module docstring).
        """
        while not self._over_limit():
            try:
                frame = self._frames.next_frame()
            except FrameTooLarge as exc:
                log.warning("closing %s: %s", self.peer, exc)
                self.close()
                return
            if frame is None:
                if self._frames.blocked:
                    self._wait_for_memory()
                return
            if not self._handle_frame(frame):
                return

    def _wait_for_memory(self) -> None:
        """Stop reading until queued.max.request.bytes has room for the frame being read."""
        self._update_reading()
        if not self._awaiting_memory and self._frames.memory is not None:
            self._awaiting_memory = True
            self._frames.memory.when_available(self._memory_given_back)

    def _memory_given_back(self) -> None:
        self._awaiting_memory = False
        if self._transport is None:
            return
        self._process_frames()  # takes the memory now, if it fits (or asks again)
        self._update_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._counted and self.limits is not None:
            self._counted = False
            self.limits.release(self.listener, self.peer_host)
        if self._outstanding is not None:
            self._outstanding.cancel()
            self._outstanding = None
        self._transport = None
        dropped = self._frames.clear() + SCRATCH_BYTES  # the scratch buffer goes with this object
        if self.freed is not None:
            self.freed.dropped(dropped)

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

    def sweep_idle(self, now: float) -> bool:
        """The server's idle sweep, at time.monotonic() ``now``: close the connection if nothing was read from
        it and no request of it was in flight for max_idle_s (see the module docstring). True if closed."""
        if self._read_since_sweep or self._transport is None or self._over_limit() or self._frames.blocked:
            self._read_since_sweep = False
            self._idle_since = now
            return False
        if self.max_idle_s < 0 or now - self._idle_since < self.max_idle_s:
            return False
        log.info("closing %s: idle for connections.max.idle.ms (%d ms)", self.peer, int(self.max_idle_s * 1000))
        self.close()
        return True

    def _limit_frames(self, sasl: SaslSession) -> None:
        """The frame limit for the SASL state: sasl.server.max.receive.size until a login completes."""
        if sasl.state == SaslSession.AUTHENTICATED:
            self._frames.max_frame_bytes = self._max_request_bytes
        else:
            self._frames.max_frame_bytes = min(self._max_request_bytes, sasl.listener.max_receive_size)

    def _handle_frame(self, frame: bytes) -> bool:
        sasl = self.sasl
        if sasl is not None and (sasl.state != SaslSession.AUTHENTICATED or sasl.expired()):
            if sasl.state == SaslSession.RAW:
                return self._raw_sasl_token(frame, sasl)
            api_key = int.from_bytes(frame[:2], "big") if len(frame) >= 2 else -1
            if api_key not in _SASL_EXCHANGE:
                log.info("closing %s: request (api key %d) %s", self.peer, api_key,
                         "after its SASL session expired" if sasl.authenticated else "before SASL authentication")
                self.close()
                return False
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
        if sasl is not None:
            if sasl.state == SaslSession.FAILED:
                self._refuse_later(sasl, slot)
                return False
            self._limit_frames(sasl)  # a login completed, or a re-authentication began
        if isinstance(slot, asyncio.Future):
            self._hold(slot, self._on_response_ready)
        elif slot is not None and self.is_open:
            self._transport.write(slot)
        # A reset seen while writing leaves the transport closing: the rest of the buffer is not served.
        return self.is_open

    def throttle(self, delay_ms: int) -> None:
        """Read nothing more for ``delay_ms`` (a client over its quota: security/quotas.py); the responses
        already due still go out."""
        loop = asyncio.get_running_loop()
        until = loop.time() + delay_ms / 1000.0
        if until <= self._throttled_until or self._transport is None:
            return
        self._throttled_until = until
        self._update_reading()
        loop.call_at(until, self._throttle_over, until)

    def _throttle_over(self, until: float) -> None:
        if until != self._throttled_until or self._transport is None:
            return  # a longer throttle replaced this one
        self._throttled_until = 0.0
        self._resume()

    def _refuse_later(self, sasl: SaslSession, answer: Slot) -> None:
        """A failed login: read nothing more; ``answer`` (None: none) goes out after
        connection.failed.authentication.delay.ms, then the connection closes, so a client guessing
        passwords gets one guess per delay and connection."""
        self._refusing = True
        self._update_reading()
        asyncio.get_running_loop().call_later(sasl.listener.failed_delay_ms / 1000.0, self._refuse, answer)

    def _refuse(self, answer: Slot) -> None:
        if isinstance(answer, _BYTES) and self.is_open:
            self._transport.write(answer)
        self.close()  # what is written goes out before the transport closes

    def _raw_sasl_token(self, frame: bytes, sasl: SaslSession) -> bool:
        """A SASL token as a bare frame (after a v0 SaslHandshake); the answer goes back the same way. A
        failure closes the connection without an answer, as Kafka does in this mode."""
        try:
            answer = sasl.authenticate(bytes(frame))
        except AuthenticationFailed:
            self._refuse_later(sasl, None)
            return False
        if sasl.authenticated:
            self.principal = sasl.principal or ANONYMOUS
        self._limit_frames(sasl)
        if self.is_open:
            self._transport.write(len(answer).to_bytes(4, "big") + answer)
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
                    if self._tls is not None:
                        try:
                            response = [p if isinstance(p, _BYTES) else p.read() for p in response]
                        except (OSError, ValueError) as exc:  # a segment deleted since the response was built
                            log.info("closing %s: %s", self.peer, exc)
                            self.close()
                            return
                    else:
                        self._hold(asyncio.ensure_future(self._send_parts(response)), self._on_sent)
                        return
                # uvloop writes the parts with one writev, without joining them first
                self._transport.writelines(response)
            else:
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
        if not self._over_limit() and self._frames.has_pending:
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
        return self._writing_paused or self._outstanding is not None or self._refusing or self._throttled_until > 0.0

    def _update_reading(self) -> None:
        transport = self._transport
        if transport is None:
            return
        over = self._over_limit() or self._frames.blocked
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
