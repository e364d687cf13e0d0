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

Implementation
--------------
For every (message, version) pair used, Python source is generated and compiled
once (lazily, cached) under a pseudo file name such as
``<odradek codec ProduceRequest v9 decode>``; adjacent fixed-width fields are
batched into one precompiled :class:`struct.Struct`.  The schema tables module is
imported lazily, on the first compile, so ``import odradek.protocol`` stays cheap.
"""
from __future__ import annotations

import struct as _struct

from .api_keys import API_INDEX as _API_INDEX

__all__ = [
    "ProtocolError", "DecodeError", "EncodeError", "UnsupportedVersionError",
    "decode_request_header", "decode_request", "encode_response", "encode_response_parts", "encode_request",
    "decode_response", "request_versions", "has_api", "encode_struct", "decode_struct",
    "request_header_version", "response_header_version", "get_decoder", "get_encoder",
]


# ---------------------------------------------------------------- errors
class ProtocolError(Exception):
    """Base class of codec errors."""


class DecodeError(ProtocolError):
    """Malformed or truncated bytes."""


class EncodeError(ProtocolError):
    """A value cannot be encoded (wrong type, None for a non-nullable field, ...)."""


class UnsupportedVersionError(ProtocolError):
    """Unknown API key or version (or unknown struct name / version)."""

    def __init__(self, api_key, api_version, msg=None):
        self.api_key = api_key
        self.api_version = api_version
        super().__init__(msg or f"unsupported api key {api_key} version {api_version}")


# ---------------------------------------------------------------- varints & small helpers
_UV = [bytes((i,)) for i in range(128)]


def _uvarint(n):
    """Encode an unsigned varint."""
    if n < 0x80:
        return _UV[n]
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _uvarint_cont(buf, pos, first):
    """Continue reading an unsigned varint whose first byte (``first``) had bit 7 set."""
    result = first & 0x7F
    shift = 7
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 28:
            raise DecodeError("varint too long")


def _read_uvarint(buf, pos):
    b = buf[pos]
    if b & 0x80:
        return _uvarint_cont(buf, pos + 1, b)
    return b, pos + 1


def _skip_tags(buf, pos):
    """Skip a tagged-field section (none of the tags is known)."""
    n, pos = _read_uvarint(buf, pos)
    for _ in range(n):
        _tag, pos = _read_uvarint(buf, pos)
        size, pos = _read_uvarint(buf, pos)
        pos += size
    return pos


def _null_error(name):
    raise EncodeError(f"field {name!r} is not nullable in this version")


def _bad_length(n):
    raise DecodeError(f"invalid length {n}")


_S_I8 = _struct.Struct(">b")
_S_I16 = _struct.Struct(">h")
_S_I32 = _struct.Struct(">i")
_S_II = _struct.Struct(">ii")
_S_IIB = _struct.Struct(">iiB")
_S_HDR = _struct.Struct(">hhih")

_FIXED = {
    "int8": ("b", 1), "int16": ("h", 2), "uint16": ("H", 2), "int32": ("i", 4),
    "uint32": ("I", 4), "int64": ("q", 8), "float64": ("d", 8), "bool": ("?", 1),
    "uuid": ("16s", 16),
}

_BASE_NS = {
    "_uvarint": _uvarint, "_uvarint_cont": _uvarint_cont, "_read_uvarint": _read_uvarint,
    "_skip_tags": _skip_tags, "_UV": _UV, "DecodeError": DecodeError, "EncodeError": EncodeError,
    "_null_error": _null_error, "_bad_length": _bad_length,
    "_unpack_from": _struct.unpack_from, "_pack": _struct.pack,
    "_I8": _S_I8.unpack_from, "_I16": _S_I16.unpack_from, "_I32": _S_I32.unpack_from,
    "_P16": _S_I16.pack, "_P32": _S_I32.pack,
    "_sum": sum, "_len": len, "_map": map, "_list": list, "_bytes": bytes, "_str": str,
    "_range": range, "_isinstance": isinstance, "_seq": (list, tuple),
}


def _in(r, v):
    return bool(r) and r[0] <= v <= r[1]


# ---------------------------------------------------------------- schema access (lazy)
_tables = None
_by_key = None


def _schema():
    global _tables, _by_key
    if _tables is None:
        from . import schema_tables
        by_key = {}
        for name, m in schema_tables.MESSAGES.items():
            if m[0] is not None:
                by_key[(m[0], m[1])] = name
        _by_key = by_key
        _tables = schema_tables.MESSAGES
    return _tables


def _message(api_key, kind, version):
    """-> (name, flexible) for an API message, or raise UnsupportedVersionError."""
    tables = _schema()
    name = _by_key.get((api_key, kind))
    if name is None:
        raise UnsupportedVersionError(api_key, version)
    _key, _kind, (lo, hi), flex_lo, _fields = tables[name]
    if not lo <= version <= hi:
        raise UnsupportedVersionError(api_key, version)
    return name


# ---------------------------------------------------------------- the compiler
class _Gen:
    """Generates Python source for one (message, version) encoder or decoder."""

    def __init__(self, label, version, flexible):
        self.label = label
        self.v = version
        self.flex = flexible
        self.lines = []
        self.ns = dict(_BASE_NS)
        self.n = 0
        self._consts = {}
        self._factories = {}
        self._post = []

    # -- utilities
    def uid(self, prefix):
        self.n += 1
        return f"{prefix}{self.n}"

    def const(self, value, prefix="_c"):
        key = (type(value), value) if not isinstance(value, (list, dict)) else None
        if key is not None and key in self._consts:
            return self._consts[key]
        name = self.uid(prefix)
        self.ns[name] = value
        if key is not None:
            self._consts[key] = name
        return name

    def struct_obj(self, fmt):
        return self.const(_struct.Struct(fmt), "_S")

    def emit(self, indent, *lines):
        pad = "    " * indent
        for line in lines:
            self.lines.append(pad + line)

    def split(self, fields):
        """-> (regular, tagged) field lists present at this version."""
        v = self.v
        regular, tagged = [], []
        for f in fields:
            if not _in(f[2], v):
                continue
            if self.flex and _in(f[4], v):
                tagged.append(f)
            else:
                regular.append(f)
        tagged.sort(key=lambda f: f[5])
        return regular, tagged

    def field_flex(self, f):
        return self.flex if f[7] is None else _in(f[7], self.v)

    # -- default values (version independent)
    def default_expr(self, f):
        default = f[6]
        if f[8] is not None and not f[1].startswith("[]"):  # struct
            if default is None:
                return "None"
            return self.factory(f[8]) + "()"
        if isinstance(default, list):
            return "[]"
        if default is None or isinstance(default, (bool, int, float, str)):
            return repr(default)
        return self.const(default)

    def factory(self, fields):
        key = id(fields)
        name = self._factories.get(key)
        if name is not None:
            return name
        name = self.uid("_f")
        self._factories[key] = name
        items = ", ".join(f"{f[0]!r}: {self.default_expr(f)}" for f in fields)
        self.emit(0, f"def {name}():", f"    return {{{items}}}", "")
        return name

    def runs(self, regular):
        """Split fields into runs, in order: (struct name, size, fields) for adjacent fixed-width fields, which
        are packed and unpacked with one precompiled Struct, or (None, 0, [field]) for a variable-width one."""
        i = 0
        while i < len(regular):
            j = i
            if regular[i][1] in _FIXED:
                while j + 1 < len(regular) and regular[j + 1][1] in _FIXED:
                    j += 1
                group = regular[i:j + 1]
                fmt = ">" + "".join(_FIXED[g[1]][0] for g in group)
                yield self.struct_obj(fmt), sum(_FIXED[g[1]][1] for g in group), group
            else:
                yield None, 0, [regular[i]]
            i = j + 1

    # ============================================================ decoding
    def gen_decoder(self, fields):
        """Emit a struct decoder function; return its name."""
        name = self.uid("_d")
        regular, tagged = self.split(fields)
        body = []
        local = {}
        for s, size, group in self.runs(regular):
            if s is not None:
                names = [self.uid("v") for _ in group]
                for g, nm in zip(group, names):
                    local[g[0]] = nm
                if len(names) == 1:
                    body.append((1, f"{names[0]} = {s}.unpack_from(buf, pos)[0]"))
                else:
                    body.append((1, f"{', '.join(names)} = {s}.unpack_from(buf, pos)"))
                body.append((1, f"pos += {size}"))
            else:
                f = group[0]
                nm = self.uid("v")
                local[f[0]] = nm
                self.dec_value(f, nm, 1, body)
        # dict construction
        items = []
        for f in fields:
            if f[0] in local:
                items.append(f"{f[0]!r}: {local[f[0]]}")
            else:
                items.append(f"{f[0]!r}: {self.default_expr(f)}")
        body.append((1, f"d = {{{', '.join(items)}}}"))
        if self.flex:
            if tagged:
                tname = self.gen_tag_decoder(tagged)
                body.append((1, "if buf[pos] == 0:"))
                body.append((2, "pos += 1"))
                body.append((1, "else:"))
                body.append((2, f"pos = {tname}(buf, pos, d)"))
            else:
                body.append((1, "if buf[pos] == 0:"))
                body.append((2, "pos += 1"))
                body.append((1, "else:"))
                body.append((2, "pos = _skip_tags(buf, pos)"))
        body.append((1, "return d, pos"))
        self.emit(0, f"def {name}(buf, pos):")
        for ind, line in body:
            self.emit(ind, line)
        self.emit(0, "")
        return name

    def gen_tag_decoder(self, tagged):
        name = self.uid("_t")
        body = []
        body.append((1, "n, pos = _read_uvarint(buf, pos)"))
        body.append((1, "for _ in _range(n):"))
        body.append((2, "tag, pos = _read_uvarint(buf, pos)"))
        body.append((2, "size, pos = _read_uvarint(buf, pos)"))
        body.append((2, "end = pos + size"))
        kw = "if"
        for f in tagged:
            body.append((2, f"{kw} tag == {f[5]}:"))
            kw = "elif"
            nm = self.uid("v")
            if f[1] in _FIXED:
                code, _size = _FIXED[f[1]]
                s = self.struct_obj(">" + code)
                body.append((3, f"{nm} = {s}.unpack_from(buf, pos)[0]"))
            else:
                self.dec_value(f, nm, 3, body)
            body.append((3, f"d[{f[0]!r}] = {nm}"))
        body.append((2, "pos = end"))
        body.append((1, "return pos"))
        self.emit(0, f"def {name}(buf, pos, d):")
        for ind, line in body:
            self.emit(ind, line)
        self.emit(0, "")
        return name

    def dec_len(self, flex, width, nm, ind, body):
        """Read a length into ``nm`` (-1 = null)."""
        if flex:
            body.append((ind, f"{nm} = buf[pos]"))
            body.append((ind, "pos += 1"))
            body.append((ind, f"if {nm} & 0x80:"))
            body.append((ind + 1, f"{nm}, pos = _uvarint_cont(buf, pos, {nm})"))
            body.append((ind, f"{nm} -= 1"))
        elif width == 2:
            body.append((ind, f"{nm} = _I16(buf, pos)[0]"))
            body.append((ind, "pos += 2"))
        else:
            body.append((ind, f"{nm} = _I32(buf, pos)[0]"))
            body.append((ind, "pos += 4"))

    def dec_value(self, f, nm, ind, body):
        """Append code decoding field ``f`` into local ``nm``."""
        ftype = f[1]
        flex = self.field_flex(f)
        nullable = _in(f[3], self.v)
        if ftype in _FIXED:
            code, size = _FIXED[ftype]
            s = self.struct_obj(">" + code)
            body.append((ind, f"{nm} = {s}.unpack_from(buf, pos)[0]"))
            body.append((ind, f"pos += {size}"))
            return
        if ftype in ("string", "bytes", "records"):
            ln = self.uid("n")
            self.dec_len(flex, 2 if ftype == "string" else 4, ln, ind, body)
            body.append((ind, f"if {ln} < 0:"))
            if nullable:
                body.append((ind + 1, f"if {ln} != -1: _bad_length({ln})"))
                body.append((ind + 1, f"{nm} = None"))
            else:
                body.append((ind + 1, f"_bad_length({ln})"))
            body.append((ind, "else:"))
            if ftype == "string":
                expr = f"_str(buf[pos:pos + {ln}], 'utf-8')"
            elif ftype == "bytes":
                expr = f"_bytes(buf[pos:pos + {ln}])"
            else:
                expr = f"buf[pos:pos + {ln}]"
            body.append((ind + 1, f"{nm} = {expr}"))
            body.append((ind + 1, f"pos += {ln}"))
            return
        if ftype.startswith("[]"):
            ln = self.uid("n")
            self.dec_len(flex, 4, ln, ind, body)
            body.append((ind, f"if {ln} < 0:"))
            if nullable:
                body.append((ind + 1, f"if {ln} != -1: _bad_length({ln})"))
                body.append((ind + 1, f"{nm} = None"))
            else:
                body.append((ind + 1, f"_bad_length({ln})"))
            body.append((ind, f"elif {ln} > _len(buf) - pos:"))
            body.append((ind + 1, f"_bad_length({ln})"))
            body.append((ind, "else:"))
            elem = ftype[2:]
            if f[8] is not None:
                sub = self.gen_decoder(f[8])
                e = self.uid("e")
                ap = self.uid("a")
                body.append((ind + 1, f"{nm} = []"))
                body.append((ind + 1, f"{ap} = {nm}.append"))
                body.append((ind + 1, f"for _ in _range({ln}):"))
                body.append((ind + 2, f"{e}, pos = {sub}(buf, pos)"))
                body.append((ind + 2, f"{ap}({e})"))
            elif elem == "uuid":
                body.append((ind + 1, f"{nm} = [_bytes(buf[p:p + 16]) for p in _range(pos, pos + 16 * {ln}, 16)]"))
                body.append((ind + 1, f"pos += 16 * {ln}"))
            elif elem in _FIXED:
                code, size = _FIXED[elem]
                body.append((ind + 1, f"{nm} = _list(_unpack_from('>%d{code}' % {ln}, buf, pos))"))
                body.append((ind + 1, f"pos += {size} * {ln}"))
            elif elem == "string":
                ap = self.uid("a")
                sl = self.uid("n")
                body.append((ind + 1, f"{nm} = []"))
                body.append((ind + 1, f"{ap} = {nm}.append"))
                body.append((ind + 1, f"for _ in _range({ln}):"))
                self.dec_len(flex, 2, sl, ind + 2, body)
                body.append((ind + 2, f"if {sl} < 0: _bad_length({sl})"))
                body.append((ind + 2, f"{ap}(_str(buf[pos:pos + {sl}], 'utf-8'))"))
                body.append((ind + 2, f"pos += {sl}"))
            else:
                raise NotImplementedError(ftype)
            return
        if f[8] is not None:  # single struct
            sub = self.gen_decoder(f[8])
            if nullable:
                body.append((ind, "if _I8(buf, pos)[0] < 0:"))
                body.append((ind + 1, f"{nm} = None"))
                body.append((ind + 1, "pos += 1"))
                body.append((ind, "else:"))
                body.append((ind + 1, f"{nm}, pos = {sub}(buf, pos + 1)"))
            else:
                body.append((ind, f"{nm}, pos = {sub}(buf, pos)"))
            return
        raise NotImplementedError(ftype)

    # ============================================================ encoding
    def gen_encoder(self, fields):
        """Emit a struct encoder ``_eN(v, out)``; return its name."""
        name = self.uid("_e")
        regular, tagged = self.split(fields)
        body = [(1, "g = v.get"), (1, "app = out.append")]
        for s, _, group in self.runs(regular):
            if s is not None:
                args = ", ".join(f"g({g[0]!r}, {self.enc_default(g)})" for g in group)
                body.append((1, f"app({s}.pack({args}))"))
            else:
                f = group[0]
                x = self.uid("x")
                body.append((1, f"{x} = g({f[0]!r}, {self.enc_default(f)})"))
                self.enc_value(f, x, "out", "app", 1, body)
        if self.flex:
            if not tagged:
                body.append((1, "app(b'\\x00')"))
            else:
                body.append((1, "tags = []"))
                for f in tagged:
                    x = self.uid("x")
                    d = self.enc_default(f)
                    body.append((1, f"{x} = g({f[0]!r}, {d})"))
                    t = self.uid("t")
                    ta = self.uid("ta")
                    is_array = f[1].startswith("[]")
                    if f[8] is not None and not is_array and f[6] is not None:
                        # non-nullable struct: compare encodings with the default's (a missing key is the
                        # default: nothing to encode, which keeps the common response cheap)
                        body.append((1, f"if {x} is not {d}:"))
                        body.append((2, f"{t} = []"))
                        body.append((2, f"{ta} = {t}.append"))
                        self.enc_value(f, x, t, ta, 2, body)
                        db = self.uid("_db")
                        self._post.append((db, f[8]))
                        body.append((2, f"{t} = b''.join({t})"))
                        body.append((2, f"if {t} != {db}:"))
                        body.append((3, f"tags.append(({f[5]}, {t}))"))
                        continue
                    if is_array and f[6] is not None:
                        cond = f"{x} is None or _len({x}) > 0"
                    elif is_array or f[8] is not None or f[6] is None:
                        cond = f"{x} is not None"
                    else:
                        cond = f"{x} != {d}"
                    body.append((1, f"if {cond}:"))
                    body.append((2, f"{t} = []"))
                    body.append((2, f"{ta} = {t}.append"))
                    self.enc_value(f, x, t, ta, 2, body)
                    body.append((2, f"tags.append(({f[5]}, b''.join({t})))"))
                body.append((1, "if tags:"))
                body.append((2, "app(_uvarint(_len(tags)))"))
                body.append((2, "for tag, tb in tags:"))
                body.append((3, "app(_uvarint(tag))"))
                body.append((3, "app(_uvarint(_len(tb)))"))
                body.append((3, "app(tb)"))
                body.append((1, "else:"))
                body.append((2, "app(b'\\x00')"))
        self.emit(0, f"def {name}(v, out):")
        for ind, line in body:
            self.emit(ind, line)
        self.emit(0, "")
        self._enc_names[id(fields)] = name
        return name

    def enc_default(self, f):
        """Expression used when the key is missing (immutable stand-ins for lists/dicts)."""
        default = f[6]
        if isinstance(default, list):
            return "()"
        if isinstance(default, dict):
            return self.const({}, "_empty")
        if default is None or isinstance(default, (bool, int, float, str)):
            return repr(default)
        return self.const(default)

    def enc_len(self, flex, width, nexpr, app, ind, body):
        if flex:
            k = self.uid("k")
            body.append((ind, f"{k} = {nexpr} + 1"))
            body.append((ind, f"{app}(_UV[{k}] if {k} < 128 else _uvarint({k}))"))
        elif width == 2:
            body.append((ind, f"{app}(_P16({nexpr}))"))
        else:
            body.append((ind, f"{app}(_P32({nexpr}))"))

    def enc_null(self, f, flex, width, app, ind, body):
        nullable = _in(f[3], self.v)
        if not nullable:
            body.append((ind, f"_null_error({f[0]!r})"))
        elif flex:
            body.append((ind, f"{app}(b'\\x00')"))
        elif width == 2:
            body.append((ind, f"{app}(b'\\xff\\xff')"))
        else:
            body.append((ind, f"{app}(b'\\xff\\xff\\xff\\xff')"))

    def enc_value(self, f, x, out, app, ind, body):
        ftype = f[1]
        flex = self.field_flex(f)
        if ftype in _FIXED:
            s = self.struct_obj(">" + _FIXED[ftype][0])
            body.append((ind, f"{app}({s}.pack({x}))"))
            return
        if ftype == "string":
            body.append((ind, f"if {x} is None:"))
            self.enc_null(f, flex, 2, app, ind + 1, body)
            body.append((ind, "else:"))
            b = self.uid("b")
            body.append((ind + 1, f"{b} = {x}.encode()"))
            self.enc_len(flex, 2, f"_len({b})", app, ind + 1, body)
            body.append((ind + 1, f"{app}({b})"))
            return
        if ftype == "bytes":
            body.append((ind, f"if {x} is None:"))
            self.enc_null(f, flex, 4, app, ind + 1, body)
            body.append((ind, "else:"))
            self.enc_len(flex, 4, f"_len({x})", app, ind + 1, body)
            body.append((ind + 1, f"{app}({x})"))
            return
        if ftype == "records":
            body.append((ind, f"if {x} is None:"))
            self.enc_null(f, flex, 4, app, ind + 1, body)
            body.append((ind, f"elif _isinstance({x}, _seq):"))
            self.enc_len(flex, 4, f"_sum(_map(_len, {x}))", app, ind + 1, body)
            body.append((ind + 1, f"{out} += {x}"))
            body.append((ind, "else:"))
            self.enc_len(flex, 4, f"_len({x})", app, ind + 1, body)
            body.append((ind + 1, f"{app}({x})"))
            return
        if ftype.startswith("[]"):
            elem = ftype[2:]
            body.append((ind, f"if {x} is None:"))
            self.enc_null(f, flex, 4, app, ind + 1, body)
            body.append((ind, "else:"))
            self.enc_len(flex, 4, f"_len({x})", app, ind + 1, body)
            if f[8] is not None:
                sub = self.gen_encoder(f[8])
                e = self.uid("e")
                body.append((ind + 1, f"for {e} in {x}:"))
                body.append((ind + 2, f"{sub}({e}, {out})"))
            elif elem == "uuid":
                body.append((ind + 1, f"{out} += {x}"))
            elif elem in _FIXED:
                code = _FIXED[elem][0]
                body.append((ind + 1, f"{app}(_pack('>%d{code}' % _len({x}), *{x}))"))
            elif elem == "string":
                e = self.uid("e")
                b = self.uid("b")
                body.append((ind + 1, f"for {e} in {x}:"))
                body.append((ind + 2, f"{b} = {e}.encode()"))
                self.enc_len(flex, 2, f"_len({b})", app, ind + 2, body)
                body.append((ind + 2, f"{app}({b})"))
            else:
                raise NotImplementedError(ftype)
            return
        if f[8] is not None:
            sub = self.gen_encoder(f[8])
            if _in(f[3], self.v):
                body.append((ind, f"if {x} is None:"))
                body.append((ind + 1, f"{app}(b'\\xff')"))
                body.append((ind, "else:"))
                body.append((ind + 1, f"{app}(b'\\x01')"))
                body.append((ind + 1, f"{sub}({x}, {out})"))
            else:
                body.append((ind, f"if {x} is None: _null_error({f[0]!r})"))
                body.append((ind, f"{sub}({x}, {out})"))
            return
        raise NotImplementedError(ftype)

    # ============================================================ driver
    def build(self, fields, kind):
        self._enc_names = {}
        if kind == "decode":
            top = self.gen_decoder(fields)
        else:
            top = self.gen_encoder(fields)
        src = "\n".join(self.lines) + "\n"
        for db, sub_fields in self._post:
            enc = self._enc_names.get(id(sub_fields))
            src += f"_tmp = []\n{enc}({{}}, _tmp)\n{db} = b''.join(_tmp)\n"
        filename = f"<odradek codec {self.label} v{self.v} {kind}>"
        code = compile(src, filename, "exec")
        ns = self.ns
        exec(code, ns)
        fn = ns[top]
        fn.__odradek_source__ = src
        return fn


_cache = {}


def _compile(name, version, kind):
    key = (name, version, kind)
    fn = _cache.get(key)
    if fn is None:
        tables = _schema()
        m = tables.get(name)
        if m is None:
            raise UnsupportedVersionError(None, version, f"unknown message {name!r}")
        lo, hi = m[2]
        if not lo <= version <= hi:
            raise UnsupportedVersionError(m[0], version, f"{name} has no version {version}")
        flexible = m[3] is not None and version >= m[3]
        fn = _Gen(name, version, flexible).build(m[4], kind)
        _cache[key] = fn
    return fn


def get_decoder(name, version):
    """Compiled ``fn(buf: memoryview, pos) -> (dict, pos)`` for a message/struct name."""
    return _compile(name, version, "decode")


def get_encoder(name, version):
    """Compiled ``fn(value: dict, out: list)`` appending byte chunks."""
    return _compile(name, version, "encode")


# fast per-(api_key, version) caches
_req_dec = {}
_req_enc = {}
_resp_dec = {}
_resp_enc = {}


def _api_fn(cache, api_key, api_version, kind, direction):
    key = (api_key, api_version)
    fn = cache.get(key)
    if fn is None:
        name = _message(api_key, kind, api_version)
        fn = _compile(name, api_version, direction)
        cache[key] = fn
    return fn


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
        api_key, api_version, corr, n = _S_HDR.unpack_from(buf, 0)
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
                pos = _skip_tags(buf, pos)
        except _DECODE_ERRORS as e:
            raise DecodeError(f"truncated request header: {e}") from None
        if pos > len(buf):
            raise DecodeError("truncated request header")
    return ({"request_api_key": api_key, "request_api_version": api_version,
             "correlation_id": corr, "client_id": client_id}, pos)


def decode_request(api_key, api_version, frame, offset):
    """Decode a request body starting at ``offset`` of ``frame``."""
    fn = _req_dec.get((api_key, api_version))
    if fn is None:
        fn = _api_fn(_req_dec, api_key, api_version, "request", "decode")
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
    out[0] = _S_I32.pack(sum(map(len, out)))
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
    fn = _resp_enc.get((api_key, api_version))
    if fn is None:
        fn = _api_fn(_resp_enc, api_key, api_version, "response", "encode")
    if response_header_version(api_key, api_version):
        out = [b"", _S_I32.pack(correlation_id), b"\x00"]
    else:
        out = [b"", _S_I32.pack(correlation_id)]
    try:
        fn(body, out)
    except ProtocolError:
        raise
    except (_struct.error, TypeError, AttributeError, ValueError, KeyError) as e:
        raise EncodeError(f"cannot encode api {api_key} v{api_version} response: {e!r}") from None
    return _sized_frame(out)


def encode_request(api_key, api_version, correlation_id, client_id, body):
    """Complete request frame (size prefix + request header + body)."""
    fn = _api_fn(_req_enc, api_key, api_version, "request", "encode")
    hv = request_header_version(api_key, api_version)
    out = [b"", _struct.pack(">hhi", api_key, api_version, correlation_id)]
    if hv >= 1:
        if client_id is None:
            out.append(b"\xff\xff")
        else:
            b = client_id.encode()
            out.append(_S_I16.pack(len(b)))
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
    fn = _api_fn(_resp_dec, api_key, api_version, "response", "decode")
    buf = frame if isinstance(frame, memoryview) else memoryview(frame)
    try:
        corr = _S_I32.unpack_from(buf, 0)[0]
        pos = 4
        if response_header_version(api_key, api_version):
            if buf[pos] == 0:
                pos += 1
            else:
                pos = _skip_tags(buf, pos)
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
