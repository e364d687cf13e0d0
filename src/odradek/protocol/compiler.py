"""The compiler of the Kafka wire-protocol codec (codec.py has the representation and the public API).

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


def encode_uvarint(n: int) -> bytes:
    """Encode an unsigned varint (the generated encoders call it as ``_uvarint``)."""
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


def skip_tags(buf, pos):
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
HEADER_PREFIX = _struct.Struct(">hhih")

_FIXED = {
    "int8": ("b", 1), "int16": ("h", 2), "uint16": ("H", 2), "int32": ("i", 4),
    "uint32": ("I", 4), "int64": ("q", 8), "float64": ("d", 8), "bool": ("?", 1),
    "uuid": ("16s", 16),
}

_BASE_NS = {
    "_uvarint": encode_uvarint, "_uvarint_cont": _uvarint_cont, "_read_uvarint": _read_uvarint,
    "skip_tags": skip_tags, "_UV": _UV, "DecodeError": DecodeError, "EncodeError": EncodeError,
    "_null_error": _null_error, "_bad_length": _bad_length,
    "_unpack_from": _struct.unpack_from, "_pack": _struct.pack,
    "_I8": _S_I8.unpack_from, "_I16": _S_I16.unpack_from, "_I32": _S_I32.unpack_from,
    "_P16": _S_I16.pack, "_P32": _S_I32.pack,
    "_sum": sum, "_len": len, "_map": map, "_list": list, "_bytes": bytes, "_str": str,
    "_range": range, "_isinstance": isinstance, "_seq": (list, tuple),
}


def in_versions(r, v):
    return bool(r) and r[0] <= v <= r[1]


# ---------------------------------------------------------------- schema access (lazy)
_tables = None
_by_key = None


def load_tables():
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


def message_name(api_key, kind, version):
    """-> (name, flexible) for an API message, or raise UnsupportedVersionError."""
    tables = load_tables()
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
            if not in_versions(f[2], v):
                continue
            if self.flex and in_versions(f[4], v):
                tagged.append(f)
            else:
                regular.append(f)
        tagged.sort(key=lambda f: f[5])
        return regular, tagged

    def field_flex(self, f):
        return self.flex if f[7] is None else in_versions(f[7], self.v)

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
                body.append((2, "pos = skip_tags(buf, pos)"))
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
        nullable = in_versions(f[3], self.v)
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
        nullable = in_versions(f[3], self.v)
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
            if in_versions(f[3], self.v):
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


compiled = {}


def _compile(name, version, kind):
    key = (name, version, kind)
    fn = compiled.get(key)
    if fn is None:
        tables = load_tables()
        m = tables.get(name)
        if m is None:
            raise UnsupportedVersionError(None, version, f"unknown message {name!r}")
        lo, hi = m[2]
        if not lo <= version <= hi:
            raise UnsupportedVersionError(m[0], version, f"{name} has no version {version}")
        flexible = m[3] is not None and version >= m[3]
        fn = _Gen(name, version, flexible).build(m[4], kind)
        compiled[key] = fn
    return fn


def get_decoder(name, version):
    """Compiled ``fn(buf: memoryview, pos) -> (dict, pos)`` for a message/struct name."""
    return _compile(name, version, "decode")


def get_encoder(name, version):
    """Compiled ``fn(value: dict, out: list)`` appending byte chunks."""
    return _compile(name, version, "encode")


# fast per-(api_key, version) caches
request_decoders = {}
request_encoders = {}
response_decoders = {}
response_encoders = {}


def compiled_api(cache, api_key, api_version, kind, direction):
    key = (api_key, api_version)
    fn = cache.get(key)
    if fn is None:
        name = message_name(api_key, kind, api_version)
        fn = _compile(name, api_version, direction)
        cache[key] = fn
    return fn
