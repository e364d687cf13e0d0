"""FrameReader: Kafka's size-prefixed frames, read from an asyncio.BufferedProtocol's buffers.

A frame is `int32 size` + `size` bytes, in both directions (requests to a broker, responses to a broker's
clients, among them other brokers). The size is checked against the reader's limit before anything is
buffered for the frame, so a hostile 2 GiB prefix costs nothing but a FrameTooLarge.

Socket reads go to a scratch buffer of SCRATCH_BYTES; a small frame is copied out of it once. A frame of
OWN_BUFFER_MIN bytes or more gets a bytearray of its own once its size prefix is read, and the rest of it
is read by the kernel straight into that buffer: a produced record set reaches the segment file, and a
fetched one the follower's segment file, without a copy in Python (only what one read put into the scratch
buffer is copied over). That buffer is sized from the bytes that have arrived, not from the size announced:
twice what is there, at least OWN_BUFFER_FIRST_MIN, never past the frame; it doubles each time it fills. A
peer that announces a 100 MiB frame and sends 64 KiB of it holds a buffer of at most twice what it sent
(128 KiB), not 100 MiB.

With a `RequestMemory` (`queued.max.request.bytes`), those own buffers are taken from one budget shared by
every connection: a frame whose buffer (or its next doubling) does not fit waits, with `blocked` set and its
bytes left where they are, until memory is given back (a frame handed out, a connection closed); its owner
stops reading the socket meanwhile and asks `RequestMemory.when_available` to be called back. Thousands of
connections that announce large frames and trickle them in then hold at most the budget, not a buffer each.

A protocol hands out `get_buffer()` and reports `buffer_updated(n)`, then takes whole frames with
`next_frame()` as long as it wants them. A complete frame it has not taken yet (a connection muted by flow
control) takes no more bytes: they go to the scratch buffer, which grows while whole frames pile up there
(the owner stops reading the socket meanwhile).

Not thread-safe; owned by the event loop.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Callable

SCRATCH_BYTES = 32 * 1024
MIN_READ = 4 * 1024
OWN_BUFFER_MIN = 16 * 1024
OWN_BUFFER_FIRST_MIN = 64 * 1024  # a frame's first own buffer: twice the bytes present, at least this


class FrameTooLarge(Exception):
    """A size prefix outside 0..limit: the stream cannot be trusted further."""


class RequestMemory:
    """The budget of `queued.max.request.bytes`: the bytes of large frames' own buffers, over every
    connection that shares it."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self._waiting: deque[Callable[[], None]] = deque()

    def take(self, nbytes: int) -> bool:
        if self.used + nbytes > self.limit and self.used > 0:  # one frame alone may always be read
            return False
        self.used += nbytes
        return True

    def give_back(self, nbytes: int) -> None:
        self.used -= nbytes
        waiting, self._waiting = self._waiting, deque()
        if waiting:  # each tries again, on its own turn of the loop; those that still do not fit ask again
            loop = asyncio.get_running_loop()
            for callback in waiting:
                loop.call_soon(callback)

    def when_available(self, callback: Callable[[], None]) -> None:
        self._waiting.append(callback)

    async def reserve(self, nbytes: int) -> None:
        """Take ``nbytes``, waiting for memory to be given back while they do not fit (for stream readers)."""
        while not self.take(nbytes):
            waiter = asyncio.get_running_loop().create_future()
            self.when_available(lambda: waiter.done() or waiter.set_result(None))
            await waiter


class FrameReader:
    def __init__(self, max_frame_bytes: int, memory: RequestMemory | None = None) -> None:
        self.max_frame_bytes = max_frame_bytes
        self.memory = memory
        self.blocked = False  # a large frame waits for memory (see RequestMemory)
        self._held = 0  # bytes of memory held for the frame being read
        # Bytes [_start, _end) of the scratch buffer are read but not yet taken.
        self._scratch = bytearray(SCRATCH_BYTES)
        self._view = memoryview(self._scratch)
        self._start = self._end = 0
        self._frame: bytearray | None = None  # a large frame being read into its own buffer
        self._frame_view: memoryview | None = None
        self._frame_size = self._frame_filled = 0
        self._into_frame = False  # where the buffer handed out by get_buffer points

    def get_buffer(self) -> memoryview:
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
            if self._frame_filled == len(self._frame) < self._frame_size and self.memory is not None:
                # the buffer is full: its next doubling must be had before anything more is read
                self.blocked = not self._reserve(self._next_size() - len(self._frame))
        else:
            self._end += nbytes

    @property
    def has_pending(self) -> bool:
        """Whether bytes have been read that no taken frame held (a whole frame may be among them)."""
        return self._end > self._start or self._frame is not None

    def next_frame(self) -> bytes | bytearray | None:
        """The next whole frame's body (a bytearray of its own when large, else bytes), or None until more
        has been read. Raises FrameTooLarge for a size prefix outside 0..max_frame_bytes."""
        if self._frame is not None:
            if self._frame_filled < self._frame_size:
                if self.blocked and self._reserve(self._next_size() - len(self._frame)):
                    self.blocked = False
                return None
            frame = self._frame
            self._frame = self._frame_view = None
            self._release()
            return frame
        start = self._start
        available = self._end - start
        if available >= 4:
            size = int.from_bytes(self._view[start:start + 4], "big", signed=True)
            if size < 0 or size > self.max_frame_bytes:
                raise FrameTooLarge(f"frame size {size} outside 0..{self.max_frame_bytes}")
            body = start + 4
            if available - 4 >= size:
                self._start = body + size
                part = self._view[body:body + size]
                return bytearray(part) if size >= OWN_BUFFER_MIN else part.tobytes()
            if size >= OWN_BUFFER_MIN:
                first = min(size, max(OWN_BUFFER_FIRST_MIN, 2 * (self._end - body)))
                if self.memory is not None and not self._reserve(first):
                    self.blocked = True  # its bytes stay in the scratch buffer until memory is had
                    return None
                self.blocked = False
                self._start_frame(size, body, first)
                return self.next_frame()
        if self._start == self._end:
            self._start = self._end = 0
        return None

    def clear(self) -> int:
        """Drop every byte read and not taken (a connection closed): the frame's own buffer and a scratch
        buffer grown past SCRATCH_BYTES go back to the allocator, and its memory to the budget. Returns the
        bytes of buffers dropped."""
        dropped = len(self._frame) if self._frame is not None else 0
        if len(self._scratch) > SCRATCH_BYTES:
            dropped += len(self._scratch)
            self._scratch = bytearray(SCRATCH_BYTES)
            self._view = memoryview(self._scratch)
        self._start = self._end = 0
        self._frame = self._frame_view = None
        self._release()
        return dropped

    def _reserve(self, nbytes: int) -> bool:
        if self.memory is None:
            return True
        if not self.memory.take(nbytes):
            return False
        self._held += nbytes
        return True

    def _release(self) -> None:
        held, self._held = self._held, 0
        if held and self.memory is not None:
            self.memory.give_back(held)

    def _start_frame(self, size: int, body: int, first: int) -> None:
        """Read the rest of the frame of ``size`` bytes whose first bytes are at ``body`` in the scratch
        buffer into a buffer of its own, ``first`` bytes big to begin with."""
        have = self._end - body
        self._frame = bytearray(first)
        self._frame_view = memoryview(self._frame)
        self._frame_view[:have] = self._view[body:self._end]
        self._frame_size, self._frame_filled = size, have
        self._start = self._end

    def _grow_frame(self) -> None:
        """Double the frame's buffer (its memory was reserved when the buffer filled, if there is a budget)."""
        frame = bytearray(self._next_size())
        frame[:self._frame_filled] = self._frame_view
        self._frame, self._frame_view = frame, memoryview(frame)

    def _next_size(self) -> int:
        """The frame buffer's size once doubled (never past the frame)."""
        return min(self._frame_size, 2 * len(self._frame))

    def _make_room(self) -> None:
        """Move the pending bytes to the front of the scratch buffer, or into a larger one if they fill it
        (whole frames pile up only while the owner does not take them, and then it does not read)."""
        pending = self._end - self._start
        if len(self._scratch) - pending < MIN_READ:
            scratch = bytearray(pending + SCRATCH_BYTES)
            scratch[:pending] = self._view[self._start:self._end]
            self._scratch, self._view = scratch, memoryview(scratch)
        else:  # the ranges may overlap, and a slice assignment copies with memcpy
            self._scratch[:pending] = self._view[self._start:self._end].tobytes()
        self._start, self._end = 0, pending
