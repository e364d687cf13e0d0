"""Slow, straightforward reference encoder/decoder that walks the schema tables.

Used only by the tests, as an independent check of the compiled codec in
:mod:`odradek.protocol.codec` (same representation and rules, no code generation,
no batching).  Not for production use.
"""
from __future__ import annotations

import struct

from .codec import DecodeError, EncodeError
from .schema_tables import MESSAGES

_FMT = {"int8": ">b", "int16": ">h", "uint16": ">H", "int32": ">i", "uint32": ">I",
        "int64": ">q", "float64": ">d"}


def _has(r, v):
    return len(r) == 2 and r[0] <= v <= r[1]


def default_of(field):
    """A fresh default value for a table field."""
    name, ftype, _vers, _null, _tagged, _tag, default, _flex, sub = field
    if sub is not None and not ftype.startswith("[]"):
        if default is None:
            return None
        return {f[0]: default_of(f) for f in sub}
    if isinstance(default, list):
        return []
    return default


class Reader:
    def __init__(self, data, pos=0):
        self.buf = memoryview(data) if not isinstance(data, memoryview) else data
        self.pos = pos

    def take(self, n):
        if n < 0 or self.pos + n > len(self.buf):
            raise DecodeError("truncated")
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out

    def fixed(self, fmt):
        size = struct.calcsize(fmt)
        return struct.unpack(fmt, self.take(size))[0]

    def uvarint(self):
        result = 0
        shift = 0
        while True:
            b = self.take(1)[0]
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 28:
                raise DecodeError("varint too long")


class Writer:
    def __init__(self):
        self.buf = bytearray()

    def fixed(self, fmt, value):
        self.buf += struct.pack(fmt, value)

    def uvarint(self, n):
        while n >= 0x80:
            self.buf.append((n & 0x7F) | 0x80)
            n >>= 7
        self.buf.append(n)

    def raw(self, b):
        self.buf += b


class Walker:
    """Reference codec for one message at one version."""

    def __init__(self, name, version):
        m = MESSAGES[name]
        self.name = name
        self.version = version
        lo, hi = m[2]
        if not lo <= version <= hi:
            raise ValueError(f"{name} has no version {version}")
        self.flexible = m[3] is not None and version >= m[3]
        self.fields = m[4]

    # -- helpers
    def _flex(self, f):
        return self.flexible if f[7] is None else _has(f[7], self.version)

    def _is_tagged(self, f):
        return self.flexible and _has(f[4], self.version)

    # -- decoding
    def decode(self, data, pos=0):
        r = Reader(data, pos)
        value = self._read_struct(r, self.fields)
        return value, r.pos

    def _read_len(self, r, flex, width):
        if flex:
            return r.uvarint() - 1
        return r.fixed(">h" if width == 2 else ">i")

    def _read_struct(self, r, fields):
        v = self.version
        out = {}
        for f in fields:
            out[f[0]] = default_of(f)
        for f in fields:
            if _has(f[2], v) and not self._is_tagged(f):
                out[f[0]] = self._read_value(r, f)
        if self.flexible:
            by_tag = {f[5]: f for f in fields if _has(f[2], v) and self._is_tagged(f)}
            count = r.uvarint()
            for _ in range(count):
                tag = r.uvarint()
                size = r.uvarint()
                chunk = r.take(size)
                f = by_tag.get(tag)
                if f is not None:
                    sub = Reader(r.buf, r.pos - size)
                    out[f[0]] = self._read_value(sub, f)
                _ = chunk
        return out

    def _read_value(self, r, f):
        ftype = f[1]
        flex = self._flex(f)
        nullable = _has(f[3], self.version)
        if ftype in _FMT:
            return r.fixed(_FMT[ftype])
        if ftype == "bool":
            return r.take(1)[0] != 0
        if ftype == "uuid":
            return bytes(r.take(16))
        if ftype in ("string", "bytes", "records"):
            n = self._read_len(r, flex, 2 if ftype == "string" else 4)
            if n < 0:
                if nullable and n == -1:
                    return None
                raise DecodeError("bad length")
            raw = r.take(n)
            if ftype == "string":
                try:
                    return str(raw, "utf-8")
                except UnicodeDecodeError as e:
                    raise DecodeError(str(e)) from None
            if ftype == "bytes":
                return bytes(raw)
            return raw
        if ftype.startswith("[]"):
            n = self._read_len(r, flex, 4)
            if n < 0:
                if nullable and n == -1:
                    return None
                raise DecodeError("bad length")
            if n > len(r.buf) - r.pos:
                raise DecodeError("bad array length")
            elem = ftype[2:]
            out = []
            for _ in range(n):
                if f[8] is not None:
                    out.append(self._read_struct(r, f[8]))
                else:
                    ef = (f[0], elem, f[2], (), (), None, None, f[7], None)
                    out.append(self._read_value(r, ef))
            return out
        if f[8] is not None:
            if nullable:
                marker = r.fixed(">b")
                if marker < 0:
                    return None
            return self._read_struct(r, f[8])
        raise DecodeError(f"unknown type {ftype}")

    # -- encoding
    def encode(self, value):
        w = Writer()
        self._write_struct(w, self.fields, value)
        return bytes(w.buf)

    def _write_len(self, w, flex, width, n):
        if flex:
            w.uvarint(n + 1)
        else:
            w.fixed(">h" if width == 2 else ">i", n)

    def _write_struct(self, w, fields, value):
        v = self.version
        tagged = []
        for f in fields:
            if not _has(f[2], v):
                continue
            x = value.get(f[0], default_of(f)) if value is not None else default_of(f)
            if self._is_tagged(f):
                sub = Writer()
                self._write_value(sub, f, x)
                dflt = Writer()
                self._write_value(dflt, f, default_of(f))
                if sub.buf != dflt.buf:
                    tagged.append((f[5], bytes(sub.buf)))
            else:
                self._write_value(w, f, x)
        if self.flexible:
            tagged.sort()
            w.uvarint(len(tagged))
            for tag, data in tagged:
                w.uvarint(tag)
                w.uvarint(len(data))
                w.raw(data)

    def _write_value(self, w, f, x):
        ftype = f[1]
        flex = self._flex(f)
        nullable = _has(f[3], self.version)
        if ftype in _FMT:
            w.fixed(_FMT[ftype], x)
            return
        if ftype == "bool":
            w.raw(b"\x01" if x else b"\x00")
            return
        if ftype == "uuid":
            if len(x) != 16:
                raise EncodeError("uuid must be 16 bytes")
            w.raw(x)
            return
        if x is None and (ftype in ("string", "bytes", "records") or ftype.startswith("[]")):
            if not nullable:
                raise EncodeError(f"{f[0]} not nullable")
            self._write_len(w, flex, 2 if ftype == "string" else 4, -1)
            return
        if ftype == "string":
            b = x.encode("utf-8")
            self._write_len(w, flex, 2, len(b))
            w.raw(b)
            return
        if ftype == "bytes":
            b = bytes(x)
            self._write_len(w, flex, 4, len(b))
            w.raw(b)
            return
        if ftype == "records":
            if isinstance(x, (list, tuple)):
                b = b"".join(bytes(c) for c in x)
            else:
                b = bytes(x)
            self._write_len(w, flex, 4, len(b))
            w.raw(b)
            return
        if ftype.startswith("[]"):
            elem = ftype[2:]
            self._write_len(w, flex, 4, len(x))
            for e in x:
                if f[8] is not None:
                    self._write_struct(w, f[8], e)
                else:
                    ef = (f[0], elem, f[2], (), (), None, None, f[7], None)
                    self._write_value(w, ef, e)
            return
        if f[8] is not None:
            if nullable:
                if x is None:
                    w.raw(b"\xff")
                    return
                w.raw(b"\x01")
            elif x is None:
                raise EncodeError(f"{f[0]} not nullable")
            self._write_struct(w, f[8], x)
            return
        raise EncodeError(f"unknown type {ftype}")


def encode(name, version, value):
    return Walker(name, version).encode(value)


def decode(name, version, data, pos=0):
    return Walker(name, version).decode(data, pos)
