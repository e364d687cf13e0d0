"""The Kafka 0.7 wire format, without I/O: requests, responses and message sets as bytes.

Every integer is big-endian. A request frame::

    length        int32    bytes that follow
    request type  int16    0 PRODUCE, 1 FETCH, 2 MULTIFETCH, 3 MULTIPRODUCE, 4 OFFSETS
    body

Single-partition bodies start with the partition they act on::

    topic         int16 length + ASCII
    partition     int32

    PRODUCE       partition header, messages length int32, message set       (no response)
    FETCH         partition header, offset int64, max size int32
    OFFSETS       partition header, time int64 (-1 latest, -2 earliest), max offsets int32
    MULTIFETCH    count int16, then count times a FETCH body
    MULTIPRODUCE  count int16, then count times a PRODUCE body                 (no response)

There is no API version and no correlation id: responses come back in request order. A response frame::

    length        int32    bytes that follow
    error code    int16    the 0.7 codes of ``ErrorCode07``
    body          FETCH: a message set; OFFSETS: count int32 + count times int64;
                  MULTIFETCH: per fetch, in request order, length int32 + error int16 + message set

A message (the unit a message set concatenates, with no count)::

    length        int32    bytes that follow
    magic         int8     0 (0.6) or 1 (0.7)
    attributes    int8     magic 1 only: bits 0-1 the codec (0 none, 1 gzip, 2 snappy)
    crc           uint32   CRC-32 (IEEE) of the payload
    payload       bytes    the value; for a compressed message, a whole message set compressed

Offsets are byte positions: the next message starts at offset + 4 + length.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass
from enum import IntEnum

from odradek.records import compression

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_PARTITION = struct.Struct(">i")
_FETCH = struct.Struct(">qi")  # offset, max size
_OFFSETS = struct.Struct(">qi")  # time, max offsets
_MESSAGE_V0 = struct.Struct(">ibI")  # length, magic, crc
_MESSAGE_V1 = struct.Struct(">ibbI")  # length, magic, attributes, crc
_RESPONSE_HEADER = struct.Struct(">ih")  # length, error code

MESSAGE_V1_OVERHEAD = 10  # length, magic, attributes, crc: a payload of n bytes takes n + 10
CODEC_MASK = 0x03
CODECS_07 = (compression.NONE, compression.GZIP, compression.SNAPPY)
LATEST_TIME = -1
EARLIEST_TIME = -2


class RequestType(IntEnum):
    PRODUCE = 0
    FETCH = 1
    MULTIFETCH = 2
    MULTIPRODUCE = 3
    OFFSETS = 4


class ErrorCode07(IntEnum):
    UNKNOWN = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    INVALID_MESSAGE = 2
    WRONG_PARTITION = 3
    INVALID_FETCH_SIZE = 4


class MalformedRequest(ValueError):
    """A frame that does not parse: the connection that sent it is closed."""


class InvalidMessage(ValueError):
    """A produced message that fails its CRC, size, magic or codec check (0.7's InvalidMessage)."""


@dataclass(frozen=True)
class ProduceRequest:
    topic: str
    partition: int
    messages: bytes


@dataclass(frozen=True)
class FetchRequest:
    topic: str
    partition: int
    offset: int
    max_size: int


@dataclass(frozen=True)
class OffsetsRequest:
    topic: str
    partition: int
    time: int
    max_offsets: int


@dataclass(frozen=True)
class MultiProduceRequest:
    parts: list[ProduceRequest]


@dataclass(frozen=True)
class MultiFetchRequest:
    fetches: list[FetchRequest]


Request = ProduceRequest | FetchRequest | OffsetsRequest | MultiProduceRequest | MultiFetchRequest


@dataclass(frozen=True)
class Message07:
    magic: int
    codec: int
    payload: bytes


# -- requests ----------------------------------------------------------------------------------------------

class _Reader:
    """Reads fields off a frame; running past its end is a MalformedRequest."""

    def __init__(self, frame: bytes | bytearray | memoryview) -> None:
        self.view = memoryview(frame)
        self.pos = 0

    def take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.view):
            raise MalformedRequest(f"frame ends at byte {len(self.view)}, {n} more bytes wanted at {self.pos}")
        out = self.view[self.pos:self.pos + n]
        self.pos += n
        return out

    def unpack(self, fmt: struct.Struct) -> tuple:
        return fmt.unpack(self.take(fmt.size))

    def topic(self) -> str:
        (length,) = self.unpack(_INT16)
        raw = bytes(self.take(length))
        try:
            return raw.decode("ascii")
        except UnicodeDecodeError:
            raise MalformedRequest(f"topic name {raw!r} is not ASCII") from None

    def partition_header(self) -> tuple[str, int]:
        topic = self.topic()
        (partition,) = self.unpack(_PARTITION)
        return topic, partition

    def produce(self) -> ProduceRequest:
        topic, partition = self.partition_header()
        (length,) = self.unpack(_INT32)
        return ProduceRequest(topic, partition, bytes(self.take(length)))

    def fetch(self) -> FetchRequest:
        topic, partition = self.partition_header()
        offset, max_size = self.unpack(_FETCH)
        return FetchRequest(topic, partition, offset, max_size)

    def count(self) -> int:
        (n,) = self.unpack(_INT16)
        if n < 0:
            raise MalformedRequest(f"negative count {n}")
        return n

    def done(self) -> None:
        if self.pos != len(self.view):
            raise MalformedRequest(f"{len(self.view) - self.pos} stray bytes after the request")


def decode_request(frame: bytes | bytearray | memoryview) -> Request:
    """Decode one request frame (without its length prefix); MalformedRequest when it does not parse."""
    reader = _Reader(frame)
    (kind,) = reader.unpack(_INT16)
    try:
        request_type = RequestType(kind)
    except ValueError:
        raise MalformedRequest(f"unknown request type {kind}") from None
    request: Request
    if request_type == RequestType.PRODUCE:
        request = reader.produce()
    elif request_type == RequestType.FETCH:
        request = reader.fetch()
    elif request_type == RequestType.OFFSETS:
        topic, partition = reader.partition_header()
        time, max_offsets = reader.unpack(_OFFSETS)
        request = OffsetsRequest(topic, partition, time, max_offsets)
    elif request_type == RequestType.MULTIFETCH:
        request = MultiFetchRequest([reader.fetch() for _ in range(reader.count())])
    else:
        request = MultiProduceRequest([reader.produce() for _ in range(reader.count())])
    reader.done()
    return request


def _partition_header(topic: str, partition: int) -> bytes:
    raw = topic.encode("ascii")
    return _INT16.pack(len(raw)) + raw + _PARTITION.pack(partition)


def _frame(body: bytes) -> bytes:
    return _INT32.pack(len(body)) + body


def encode_produce(topic: str, partition: int, messages: bytes) -> bytes:
    """A PRODUCE frame (length prefix included)."""
    return _frame(_INT16.pack(RequestType.PRODUCE) + _partition_header(topic, partition)
                  + _INT32.pack(len(messages)) + messages)


def encode_multiproduce(parts: list[tuple[str, int, bytes]]) -> bytes:
    """A MULTIPRODUCE frame of (topic, partition, message set) entries."""
    body = b"".join(_partition_header(t, p) + _INT32.pack(len(m)) + m for t, p, m in parts)
    return _frame(_INT16.pack(RequestType.MULTIPRODUCE) + _INT16.pack(len(parts)) + body)


def encode_fetch(topic: str, partition: int, offset: int, max_size: int) -> bytes:
    """A FETCH frame."""
    return _frame(_INT16.pack(RequestType.FETCH) + _partition_header(topic, partition)
                  + _FETCH.pack(offset, max_size))


def encode_multifetch(fetches: list[tuple[str, int, int, int]]) -> bytes:
    """A MULTIFETCH frame of (topic, partition, offset, max size) entries."""
    body = b"".join(_partition_header(t, p) + _FETCH.pack(o, s) for t, p, o, s in fetches)
    return _frame(_INT16.pack(RequestType.MULTIFETCH) + _INT16.pack(len(fetches)) + body)


def encode_offsets(topic: str, partition: int, time: int, max_offsets: int) -> bytes:
    """An OFFSETS frame."""
    return _frame(_INT16.pack(RequestType.OFFSETS) + _partition_header(topic, partition)
                  + _OFFSETS.pack(time, max_offsets))


# -- responses ---------------------------------------------------------------------------------------------

def encode_fetch_response(error: int, messages: bytes = b"") -> bytes:
    """A FETCH response frame: error code, then the message set."""
    return _RESPONSE_HEADER.pack(2 + len(messages), error) + messages


def encode_multifetch_response(parts: list[tuple[int, bytes]]) -> bytes:
    """A MULTIFETCH response frame: error 0, then each fetch's (error, message set) as a sized entry."""
    body = b"".join(_RESPONSE_HEADER.pack(2 + len(m), e) + m for e, m in parts)
    return _RESPONSE_HEADER.pack(2 + len(body), ErrorCode07.NONE) + body


def encode_offsets_response(error: int, offsets: list[int]) -> bytes:
    """An OFFSETS response frame: error code, count, the offsets."""
    body = _INT32.pack(len(offsets)) + b"".join(_INT64.pack(o) for o in offsets)
    return _RESPONSE_HEADER.pack(2 + len(body), error) + body


def decode_response(frame: bytes) -> tuple[int, bytes]:
    """(error code, body) of a response frame without its length prefix."""
    if len(frame) < 2:
        raise MalformedRequest("response shorter than its error code")
    return _INT16.unpack_from(frame)[0], frame[2:]


def decode_multifetch_body(body: bytes) -> list[tuple[int, bytes]]:
    """The (error, message set) entries of a MULTIFETCH response body."""
    out, pos = [], 0
    while pos < len(body):
        length, error = _RESPONSE_HEADER.unpack_from(body, pos)
        out.append((error, body[pos + 6:pos + 4 + length]))
        pos += 4 + length
    return out


def decode_offsets_body(body: bytes) -> list[int]:
    """The offsets of an OFFSETS response body."""
    (count,) = _INT32.unpack_from(body)
    return [_INT64.unpack_from(body, 4 + 8 * i)[0] for i in range(count)]


# -- messages ----------------------------------------------------------------------------------------------

def encode_message(payload: bytes | bytearray | memoryview, codec: int = compression.NONE, magic: int = 1) -> bytes:
    """One message: length, magic, attributes (the codec; magic 1 only), CRC-32 of the payload, payload."""
    if magic == 0:
        return _MESSAGE_V0.pack(len(payload) + 5, 0, zlib.crc32(payload)) + bytes(payload)
    return _MESSAGE_V1.pack(len(payload) + 6, 1, codec, zlib.crc32(payload)) + bytes(payload)


def message_size(payload_length: int, magic: int = 1) -> int:
    """The bytes a message with a payload of ``payload_length`` bytes takes, length field included."""
    return payload_length + MESSAGE_V1_OVERHEAD - (1 - magic)


def encode_compressed(payloads: list[bytes], codec: int) -> bytes:
    """One wrapper message holding ``payloads`` as an inner message set compressed with ``codec``."""
    inner = b"".join(encode_message(p) for p in payloads)
    return encode_message(compression.compress(codec, inner), codec)


def decode_message_set(buf: bytes | bytearray | memoryview, *, partial_tail: bool = False) -> list[Message07]:
    """The messages of a set, CRCs checked. ``partial_tail``: a truncated last message (a fetch response may
    end inside one) is dropped; otherwise it is an InvalidMessage, as is any bad size, magic, codec or CRC."""
    view = memoryview(buf)
    out: list[Message07] = []
    pos = 0
    while pos < len(view):
        if len(view) - pos < 4:
            if partial_tail:
                break
            raise InvalidMessage(f"truncated message length at byte {pos}")
        (length,) = _INT32.unpack_from(view, pos)
        if length < 5:
            raise InvalidMessage(f"message length {length} at byte {pos}")
        end = pos + 4 + length
        if end > len(view):
            if partial_tail:
                break
            raise InvalidMessage(f"message at byte {pos} runs past the set")
        magic = view[pos + 4]
        if magic == 0:
            codec, crc_at = compression.NONE, pos + 5
        elif magic == 1:
            if length < 6:
                raise InvalidMessage(f"magic-1 message length {length} at byte {pos}")
            codec, crc_at = view[pos + 5] & CODEC_MASK, pos + 6
            if view[pos + 5] & ~CODEC_MASK:
                raise InvalidMessage(f"unknown attributes {view[pos + 5]:#x} at byte {pos}")
        else:
            raise InvalidMessage(f"unknown magic {magic} at byte {pos}")
        if codec not in CODECS_07:
            raise InvalidMessage(f"unknown codec {codec} at byte {pos}")
        (crc,) = struct.unpack_from(">I", view, crc_at)
        payload = view[crc_at + 4:end]
        if zlib.crc32(payload) != crc:
            raise InvalidMessage(f"CRC mismatch in the message at byte {pos}")
        out.append(Message07(magic, codec, bytes(payload)))
        pos = end
    return out

