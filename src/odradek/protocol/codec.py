"""Kafka wire-protocol codec: a schema compiler plus the public encode/decode API.

Representation
--------------
Messages are plain ``dict`` objects keyed by snake_case field names; arrays of
structs are lists of dicts, arrays of primitives are lists.

snake_case rule (applied by ``tools/gen_schema.py``): an ``_`` is inserted before an
upper-case letter that follows a lower-case letter or a digit, and before the last
capital of an acronym run when a lower-case letter follows; then everything is
lower-cased.  ``KRaft`` counts as one word.  Examples: ``ThrottleTimeMs`` ->
``throttle_time_ms``, ``TopicId`` -> ``topic_id``, ``V3AndBelowTopics`` ->
``v3_and_below_topics``, ``KRaftVersion`` -> ``kraft_version``, ``Enable2Pc`` ->
``enable2_pc``.

Types: int8/int16/uint16/int32/uint32/int64 -> int, float64 -> float, bool -> bool,
string -> str, bytes -> bytes, uuid -> 16-byte ``bytes`` (zero uuid = ``bytes(16)``; the
compiled encoder does not check the length of a uuid: give it exactly 16 bytes),
records -> ``memoryview`` slice of the input on decode (or None); on encode records
accept None, bytes, bytearray, memoryview (byte format) or a list/tuple of such
chunks (written with one total length).  Nullable strings/bytes/arrays/structs use
None.  A nullable (non-array) struct is written with a one-byte presence marker
(-1 null, 1 present), like Kafka.

Decode fills every field the schema knows in any version: fields absent from the
decoded version, and tagged fields not sent, get their default.  Unknown tags are
skipped.  Trailing bytes after the body are ignored.

Encode reads only the fields present in the target version; a missing key means
the field's default.  Values for fields that do not exist in the target version are
silently ignored (Kafka's "ignorable" semantics, applied to every field).  Tagged
fields are written only when they differ from their default.  Encoding None into a
non-nullable field raises :class:`EncodeError`.

The compiler of the functions this module calls is compiler.py.
"""
from __future__ import annotations

import struct as _struct

from .api_keys import API_INDEX as _API_INDEX
from .compiler import (
    HEADER_PREFIX,
    DecodeError,
    EncodeError,
    ProtocolError,
    UnsupportedVersionError,
    compiled_api,
    get_decoder,
    get_encoder,
    request_decoders,
    request_encoders,
    response_decoders,
    response_encoders,
    skip_tags,
)

_INT16 = _struct.Struct(">h")
_INT32 = _struct.Struct(">i")

__all__ = [
    "ProtocolError", "DecodeError", "EncodeError", "UnsupportedVersionError",
    "decode_request_header", "decode_request", "encode_response", "encode_response_parts", "encode_request",
    "decode_response", "request_versions", "has_api", "encode_struct", "decode_struct",
    "request_header_version", "response_header_version", "get_decoder", "get_encoder",
]


# ---------------------------------------------------------------- header rules
def request_header_version(api_key, api_version):
    """0, 1 or 2 (unknown API/version -> 1)."""
    info = _API_INDEX.get(api_key)
    if info is None or not info[0] <= api_version <= info[1]:
        return 1
    if api_key == 7 and api_version == 0:
        return 0
    return 2 if info[2] is not None and api_version >= info[2] else 1


def response_header_version(api_key, api_version):
    """0 or 1.  ApiVersions responses always use v0."""
    if api_key == 18:
        return 0
    info = _API_INDEX.get(api_key)
    if info is None:
        return 0
    return 1 if info[3] is not None and api_version >= info[3] else 0


def request_versions(api_key):
    """(min, max) request versions known to the schema tables."""
    info = _API_INDEX.get(api_key)
    if info is None:
        raise UnsupportedVersionError(api_key, None)
    return info[0], info[1]


def has_api(api_key):
    return api_key in _API_INDEX


_DECODE_ERRORS = (_struct.error, IndexError, ValueError, OverflowError, TypeError, MemoryError)


# ---------------------------------------------------------------- public API
def decode_request_header(frame):
    """Decode the request header of ``frame`` (no size prefix).

    Returns ``({"request_api_key", "request_api_version", "correlation_id",
    "client_id"}, body_offset)``.  Works for unknown keys/versions (read as v1).
    """
    buf = frame if isinstance(frame, memoryview) else memoryview(frame)
    try:
        api_key, api_version, corr, n = HEADER_PREFIX.unpack_from(buf, 0)
    except _struct.error:
        if len(buf) >= 8:
            api_key, api_version, corr = _struct.unpack_from(">hhi", buf, 0)
            hv = request_header_version(api_key, api_version)
            if hv == 0:
                return ({"request_api_key": api_key, "request_api_version": api_version,
                         "correlation_id": corr, "client_id": ""}, 8)
        raise DecodeError("truncated request header") from None
    hv = request_header_version(api_key, api_version)
    if hv == 0:
        return ({"request_api_key": api_key, "request_api_version": api_version,
                 "correlation_id": corr, "client_id": ""}, 8)
    pos = 10
    if n < 0:
        if n != -1:
            raise DecodeError(f"invalid client_id length {n}")
        client_id = None
    else:
        end = pos + n
        if end > len(buf):
            raise DecodeError("truncated request header")
        try:
            client_id = str(buf[pos:end], "utf-8")
        except UnicodeDecodeError as e:
            raise DecodeError(f"bad client_id: {e}") from None
        pos = end
    if hv == 2:
        try:
            if buf[pos] == 0:
                pos += 1
            else:
                pos = skip_tags(buf, pos)
        except _DECODE_ERRORS as e:
            raise DecodeError(f"truncated request header: {e}") from None
        if pos > len(buf):
            raise DecodeError("truncated request header")
    return ({"request_api_key": api_key, "request_api_version": api_version,
             "correlation_id": corr, "client_id": client_id}, pos)


def decode_request(api_key, api_version, frame, offset):
    """Decode a request body starting at ``offset`` of ``frame``."""
    fn = request_decoders.get((api_key, api_version))
    if fn is None:
        fn = compiled_api(request_decoders, api_key, api_version, "request", "decode")
    buf = frame if isinstance(frame, memoryview) else memoryview(frame)
    try:
        d, pos = fn(buf, offset)
    except DecodeError:
        raise
    except _DECODE_ERRORS as e:
        raise DecodeError(f"malformed api {api_key} v{api_version} request: {e!r}") from None
    if pos > len(buf):
        raise DecodeError(f"truncated api {api_key} v{api_version} request")
    return d


def _sized_frame(out):
    out[0] = _INT32.pack(sum(map(len, out)))
    return out


def _join_frame(out):
    return b"".join(_sized_frame(out))


def encode_response(api_key, api_version, correlation_id, body):
    """Complete response frame (4-byte size prefix + response header + body)."""
    return b"".join(encode_response_parts(api_key, api_version, correlation_id, body))


def encode_response_parts(api_key, api_version, correlation_id, body):
    """The frame of ``encode_response`` as the list of its parts, size prefix first, not joined.

    A records value may hold objects other than bytes that have a length (file regions to be sent with
    sendfile): they appear in the list as they are, and the size prefix counts their length.
    """
    fn = response_encoders.get((api_key, api_version))
    if fn is None:
        fn = compiled_api(response_encoders, api_key, api_version, "response", "encode")
    if response_header_version(api_key, api_version):
        out = [b"", _INT32.pack(correlation_id), b"\x00"]
    else:
        out = [b"", _INT32.pack(correlation_id)]
    try:
        fn(body, out)
    except ProtocolError:
        raise
    except (_struct.error, TypeError, AttributeError, ValueError, KeyError) as e:
        raise EncodeError(f"cannot encode api {api_key} v{api_version} response: {e!r}") from None
    return _sized_frame(out)


def encode_request(api_key, api_version, correlation_id, client_id, body):
    """Complete request frame (size prefix + request header + body)."""
    fn = compiled_api(request_encoders, api_key, api_version, "request", "encode")
    hv = request_header_version(api_key, api_version)
    out = [b"", _struct.pack(">hhi", api_key, api_version, correlation_id)]
    if hv >= 1:
        if client_id is None:
            out.append(b"\xff\xff")
        else:
            b = client_id.encode()
            out.append(_INT16.pack(len(b)))
            out.append(b)
    if hv == 2:
        out.append(b"\x00")
    try:
        fn(body, out)
    except ProtocolError:
        raise
    except (_struct.error, TypeError, AttributeError, ValueError, KeyError) as e:
        raise EncodeError(f"cannot encode api {api_key} v{api_version} request: {e!r}") from None
    return _join_frame(out)


def decode_response(api_key, api_version, frame):
    """Decode a response frame (no size prefix) -> (correlation_id, body)."""
    fn = compiled_api(response_decoders, api_key, api_version, "response", "decode")
    buf = frame if isinstance(frame, memoryview) else memoryview(frame)
    try:
        corr = _INT32.unpack_from(buf, 0)[0]
        pos = 4
        if response_header_version(api_key, api_version):
            if buf[pos] == 0:
                pos += 1
            else:
                pos = skip_tags(buf, pos)
        d, pos = fn(buf, pos)
    except DecodeError:
        raise
    except _DECODE_ERRORS as e:
        raise DecodeError(f"malformed api {api_key} v{api_version} response: {e!r}") from None
    if pos > len(buf):
        raise DecodeError(f"truncated api {api_key} v{api_version} response")
    return corr, d


def encode_struct(name, version, value):
    """Encode a non-API struct (e.g. ConsumerProtocolAssignment) without any header.

    Note: Kafka's consumer protocol prefixes the struct with an int16 version; that
    prefix is the caller's business.
    """
    fn = get_encoder(name, version)
    out = []
    try:
        fn(value, out)
    except ProtocolError:
        raise
    except (_struct.error, TypeError, AttributeError, ValueError, KeyError) as e:
        raise EncodeError(f"cannot encode {name} v{version}: {e!r}") from None
    return b"".join(out)


def decode_struct(name, version, buf):
    """Decode a non-API struct occupying ``buf`` (no header)."""
    fn = get_decoder(name, version)
    mv = buf if isinstance(buf, memoryview) else memoryview(buf)
    try:
        d, pos = fn(mv, 0)
    except DecodeError:
        raise
    except _DECODE_ERRORS as e:
        raise DecodeError(f"malformed {name} v{version}: {e!r}") from None
    if pos > len(mv):
        raise DecodeError(f"truncated {name} v{version}")
    return d
