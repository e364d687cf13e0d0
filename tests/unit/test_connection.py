"""KafkaConnection's framing and muting, driven through the BufferedProtocol calls an event loop makes."""

from __future__ import annotations

import asyncio
import random
import struct

import pytest

from odradek.net.connection import KafkaConnection
from odradek.net.framing import OWN_BUFFER_FIRST_MIN, OWN_BUFFER_MIN, SCRATCH_BYTES, FrameReader, RequestMemory


class Transport:
    """The few transport calls KafkaConnection makes."""

    def __init__(self) -> None:
        self.written: list[bytes] = []
        self.paused = False
        self.closed = False

    def get_extra_info(self, name: str, default=None):
        return default

    def write(self, data: bytes) -> None:
        self.written.append(bytes(data))

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_write_buffer_size(self) -> int:
        return 0


class Recorder:
    """Answers every frame with its first 4 bytes; frames starting with b"wait" are answered by a future."""

    def __init__(self) -> None:
        self.frames: list[bytes | bytearray] = []
        self.waiting: list[asyncio.Future] = []

    def dispatch(self, frame, conn):
        self.frames.append(frame)
        if bytes(frame[:4]) == b"wait":
            fut = asyncio.get_running_loop().create_future()
            self.waiting.append(fut)
            return fut
        return bytes(frame[:4])


def framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def feed(conn: KafkaConnection, data: bytes, rng: random.Random) -> None:
    """Deliver ``data`` as an event loop would, in reads of random sizes no larger than offered."""
    pos = 0
    while pos < len(data):
        buf = conn.get_buffer(-1)
        assert len(buf) > 0
        n = min(len(buf), len(data) - pos, rng.choice([1, 3, 7, 100, 5000, 70_000, 1 << 20]))
        buf[:n] = data[pos:pos + n]
        conn.buffer_updated(n)
        pos += n


def make(max_bytes: int = 100 << 20) -> tuple[KafkaConnection, Recorder, Transport]:
    recorder, transport = Recorder(), Transport()
    conn = KafkaConnection(recorder, max_bytes)
    conn.connection_made(transport)
    return conn, recorder, transport


@pytest.mark.parametrize("seed", range(5))
def test_frames_of_every_size_arrive_whole_and_in_order(seed: int) -> None:
    rng = random.Random(seed)
    sizes = [4, 100, OWN_BUFFER_MIN - 1, OWN_BUFFER_MIN, SCRATCH_BYTES + 1, 300_000, (5 << 20) + 12_345, 9]
    payloads = [rng.randbytes(size) for size in sizes]
    conn, recorder, transport = make()
    feed(conn, b"".join(framed(p) for p in payloads), rng)
    assert [bytes(f) for f in recorder.frames] == payloads
    # large frames come as a buffer of their own, which the handler may patch in place
    assert [type(f) for f in recorder.frames] == [bytearray if s >= OWN_BUFFER_MIN else bytes for s in sizes]
    assert transport.written == [p[:4] for p in payloads]


def test_a_muted_connection_holds_later_frames_until_the_answer() -> None:
    async def run() -> None:
        rng = random.Random(1)
        big = b"big!" + rng.randbytes(200_000)
        conn, recorder, transport = make()
        # one read: a request answered later, then a large and a small one behind it
        data = framed(b"wait" + b"x" * 10) + framed(big) + framed(b"tiny")
        buf = conn.get_buffer(-1)
        n = len(buf)
        buf[:n] = data[:n]
        conn.buffer_updated(n)
        assert transport.paused and len(recorder.frames) == 1
        # the loop keeps delivering what was already read before the pause took effect
        feed(conn, data[n:], rng)
        assert len(recorder.frames) == 1
        recorder.waiting[0].set_result(b"done")
        await asyncio.sleep(0)
        assert [bytes(f[:4]) for f in recorder.frames] == [b"wait", b"big!", b"tiny"]
        assert bytes(recorder.frames[1]) == big
        assert transport.written == [b"done", b"big!", b"tiny"] and not transport.paused

    asyncio.run(run())


def test_a_frame_over_the_limit_closes_the_connection() -> None:
    conn, recorder, transport = make(max_bytes=1000)
    feed(conn, struct.pack(">i", 1001) + b"x" * 10, random.Random(0))
    assert transport.closed and recorder.frames == []


def test_a_large_frame_completed_while_writing_is_paused_waits_for_resume() -> None:
    rng = random.Random(2)
    big = b"big!" + rng.randbytes(100_000)
    conn, recorder, transport = make()
    data = framed(big) + framed(b"next")
    feed(conn, data[:50_000], rng)
    conn.pause_writing()  # the transport's buffer went over its high-water mark meanwhile
    assert transport.paused
    feed(conn, data[50_000:], rng)  # the rest of the frame, and what followed it, were already on their way
    assert recorder.frames == []
    conn.resume_writing()
    assert [bytes(f) for f in recorder.frames] == [big, b"next"]
    assert transport.written == [b"big!", b"next"]


def test_a_large_frame_buffer_grows_with_the_bytes_that_arrive_not_the_size_announced() -> None:
    memory = RequestMemory(1 << 30)
    reader = FrameReader(200 << 20, memory)
    sent = 0

    def read(data: bytes) -> None:
        nonlocal sent
        while data:
            buf = reader.get_buffer()
            n = min(len(buf), len(data))
            buf[:n] = data[:n]
            reader.buffer_updated(n)
            data = data[n:]
            sent += n
            assert reader.next_frame() is None

    read(struct.pack(">i", 100 << 20) + bytes(100))
    assert memory.used == OWN_BUFFER_FIRST_MIN  # the floor, not 100 MiB
    read(bytes(300_000))
    # never more than twice what arrived (the buffer doubles once full)
    assert OWN_BUFFER_FIRST_MIN < memory.used <= 2 * sent
    assert reader.clear() == memory.used or memory.used == 0
    assert memory.used == 0


def test_a_sasl_listener_caps_frames_until_the_login_completes() -> None:
    from odradek.net.sasl import SaslListener, SaslSession

    listener = SaslListener("SASL_PLAINTEXT", ("PLAIN",), {"u": "p"}, lambda *_: None, 0, max_receive_size=1000)
    recorder, transport = Recorder(), Transport()
    conn = KafkaConnection(recorder, 100 << 20)
    conn.sasl = SaslSession(listener, "?")
    conn.connection_made(transport)
    feed(conn, struct.pack(">i", 1001) + b"x" * 10, random.Random(0))
    assert transport.closed and recorder.frames == []
    # once authenticated, socket.request.max.bytes applies again
    recorder, transport = Recorder(), Transport()
    conn = KafkaConnection(recorder, 100 << 20)
    conn.sasl = SaslSession(listener, "?")
    conn.sasl.state = SaslSession.AUTHENTICATED
    conn.connection_made(transport)
    big = b"\x00\x00" + bytes(5000)
    feed(conn, framed(big), random.Random(0))
    assert not transport.closed and [bytes(f) for f in recorder.frames] == [big]


def test_the_idle_sweep_closes_a_connection_only_after_a_whole_idle_period_without_reads() -> None:
    conn, recorder, transport = make()
    conn.max_idle_s = 10.0
    assert not conn.sweep_idle(100.0)  # the first sweep starts its idle period
    assert not conn.sweep_idle(109.0)
    feed(conn, framed(b"ping"), random.Random(0))
    assert not conn.sweep_idle(115.0)  # a read: idle again from this sweep
    assert not conn.sweep_idle(124.0) and not transport.closed
    assert conn.sweep_idle(125.0) and transport.closed


def test_a_connection_with_a_request_in_flight_is_not_idle() -> None:
    async def run() -> None:
        conn, recorder, transport = make()
        conn.max_idle_s = 1.0
        feed(conn, framed(b"wait"), random.Random(0))
        assert not conn.sweep_idle(0.0)
        assert not conn.sweep_idle(50.0) and not transport.closed
        recorder.waiting[0].set_result(b"done")
        await asyncio.sleep(0)
        assert not conn.sweep_idle(50.5)  # idle from the last sweep that saw the request in flight
        assert conn.sweep_idle(51.0)

    asyncio.run(run())
