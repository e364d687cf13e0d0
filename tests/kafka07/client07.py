"""A small Kafka 0.7 client for the tests, on the broker's own I/O-free codec (legacy07/codec.py)."""

from __future__ import annotations

import socket
import struct

from odradek.legacy07 import codec

TIMEOUT_S = 10.0


class Client07:
    """One blocking connection to a KAFKA07 listener; requests answered in order."""

    def __init__(self, host: str, port: int) -> None:
        self.sock = socket.create_connection((host, port), timeout=TIMEOUT_S)

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "Client07":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, frame: bytes) -> None:
        self.sock.sendall(frame)

    def _read_exactly(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            out += chunk
        return bytes(out)

    def response(self) -> tuple[int, bytes]:
        (length,) = struct.unpack(">i", self._read_exactly(4))
        return codec.decode_response(self._read_exactly(length))

    def is_closed_by_peer(self) -> bool:
        """Whether the broker closed the connection (waits up to the socket timeout for it)."""
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True
        except socket.timeout:
            return False

    def produce(self, topic: str, partition: int, payloads: list[bytes], compression: int = 0) -> None:
        if compression:
            messages = codec.encode_compressed(payloads, compression)
        else:
            messages = b"".join(codec.encode_message(p) for p in payloads)
        self.send(codec.encode_produce(topic, partition, messages))

    def fetch(self, topic: str, partition: int, offset: int, max_size: int = 1 << 20
              ) -> tuple[int, list[codec.Message07]]:
        self.send(codec.encode_fetch(topic, partition, offset, max_size))
        error, body = self.response()
        return error, codec.decode_message_set(body, partial_tail=True)

    def offsets(self, topic: str, partition: int, time: int, max_offsets: int = 10) -> tuple[int, list[int]]:
        self.send(codec.encode_offsets(topic, partition, time, max_offsets))
        error, body = self.response()
        return error, codec.decode_offsets_body(body) if error == 0 else []


def payloads(messages: list[codec.Message07]) -> list[bytes]:
    """The payloads of a fetched set, compressed wrappers opened."""
    from odradek.records import compression as codecs

    out: list[bytes] = []
    for m in messages:
        if m.codec:
            out += payloads(codec.decode_message_set(codecs.decompress(m.codec, m.payload)))
        else:
            out.append(m.payload)
    return out


def next_offset(offset: int, messages: list[codec.Message07]) -> int:
    """The position after ``messages`` fetched from ``offset``."""
    return offset + sum(codec.message_size(len(m.payload)) for m in messages)
