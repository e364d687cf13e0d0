"""Protobuf (`schemaType: "PROTOBUF"`) for the registry: parsing, identity, the serialized form, and
compatibility.

Two forms of schema text are accepted: `.proto` source (proto2 or proto3), compiled with protoc (the one
grpcio-tools ships, run in-process), and a base64 serialized `FileDescriptorProto`, which is what
confluent-kafka's Python ProtobufSerializer registers, checked by building it in a protobuf DescriptorPool.
Either way the result is a FileDescriptorProto. An `import` is resolved from the registration's references
(the import path is the reference's name) or, for `google/protobuf/*.proto`, from the well-known types
protobuf itself ships.

Identity: the FileDescriptorProto serialized deterministically, without its file name, source info and
json_name values protoc derives anyway, so the same schema sent as source or as a descriptor is one schema.

Compatibility is our own set of rules modelled on Confluent's documented Protobuf rules, phrased as: can a
reader holding `reader` decode what was written with `writer`?

* The package must not change, nor the syntax (proto2 vs proto3).
* Every message and enum type the writer defines must still be defined, by full name, in the reader
  (message indexes in the wire format point at them).
* Fields are matched by number. A field only one side has is fine (unknown fields are skipped, missing ones
  read as defaults), except a proto2 `required` field of the reader that the writer lacks or does not require.
* A field's kind (scalar, message, enum, group) may not change; a scalar may only change within the same
  wire encoding (int32/uint32/int64/uint64/bool, sint32/sint64, fixed32/sfixed32, fixed64/sfixed64,
  string/bytes); a message or enum field must keep its type's full name. Singular <-> repeated is accepted
  for scalars, strings and bytes, refused for messages and enums.
* oneofs: a field that the writer had in a oneof must stay in the reader; two or more of the writer's plain
  fields may not move into one reader oneof, nor a plain field into a oneof the writer already had (moving one
  field into a new oneof is fine). proto3 `optional` (synthetic oneofs) does not count.
* Enum values added, removed or renumbered are accepted (unknown values are kept as numbers).

Not done: services and options are not compared; extensions are not compared; field defaults (proto2) are
not compared; a type moved between files of a reference set is seen as removed.
"""

from __future__ import annotations

import base64
import binascii
import importlib
import os
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from typing import Any, ClassVar

from odradek.registry.schema import InvalidSchema, Resolved, check_size

# Scalars that read each other's encoding (same wire type and value interpretation up to truncation).
WIRE_GROUPS = [{"int32", "uint32", "int64", "uint64", "bool"}, {"sint32", "sint64"}, {"fixed32", "sfixed32"},
               {"fixed64", "sfixed64"}, {"string", "bytes"}, {"float"}, {"double"}]
MAIN_FILE = "__odradek_schema__.proto"
_protoc_lock = threading.Lock()  # protoc's in-process entry point is not known to be re-entrant


def _pb() -> Any:
    from google.protobuf import descriptor_pb2
    return descriptor_pb2


@dataclass(frozen=True)
class ProtobufSchema:
    """A parsed Protobuf schema: its FileDescriptorProto, and the FileDescriptorProtos of everything it
    imports through references (import name -> descriptor, transitively)."""

    schema_type: ClassVar[str] = "PROTOBUF"
    descriptor: Any
    dependencies: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def identity(self) -> str:
        normal = _pb().FileDescriptorProto()
        normal.CopyFrom(self.descriptor)
        normal.ClearField("name")
        normal.ClearField("source_code_info")
        _drop_default_json_names(normal.message_type)
        return base64.b64encode(normal.SerializeToString(deterministic=True)).decode()


def _drop_default_json_names(messages: Any) -> None:
    for m in messages:
        for f in m.field:
            if f.json_name == _default_json_name(f.name):
                f.ClearField("json_name")
        _drop_default_json_names(m.nested_type)


def _default_json_name(name: str) -> str:
    parts = name.split("_")
    return parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:])


def parse(text: str, references: Resolved = ()) -> ProtobufSchema:
    """Parse `.proto` source or a base64 FileDescriptorProto; InvalidSchema says why it is neither."""
    try:
        pb = _pb()
    except ImportError as exc:  # pragma: no cover - protobuf is a core dependency
        raise InvalidSchema(f"Protobuf schemas need the protobuf package: {exc}") from None
    check_size(text)
    deps: dict[str, Any] = {}
    for name, ref in references:
        if not isinstance(ref, ProtobufSchema):
            raise InvalidSchema("Invalid schema: a Protobuf schema can only reference Protobuf schemas")
        deps.update(ref.dependencies)
        named = pb.FileDescriptorProto()
        named.CopyFrom(ref.descriptor)
        named.name = name
        deps[name] = named
    descriptor = _from_serialized(text, pb)
    if descriptor is not None:
        _check_in_pool(descriptor, deps)
    else:
        descriptor = _compile(text, deps)
    return ProtobufSchema(descriptor, deps)


def _from_serialized(text: str, pb: Any) -> Any:
    """The FileDescriptorProto of base64 text, or None if the text is not that (then it is .proto source:
    source always has spaces or semicolons, which base64 never has)."""
    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    descriptor = pb.FileDescriptorProto()
    try:
        descriptor.ParseFromString(raw)
    except Exception as exc:  # noqa: BLE001 - protobuf's DecodeError and friends
        raise InvalidSchema(f"Invalid schema: not a serialized FileDescriptorProto: {exc}") from None
    return descriptor


def _check_in_pool(descriptor: Any, deps: dict[str, Any]) -> None:
    from google.protobuf import descriptor_pool

    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()

    def add(fd: Any) -> None:
        for dep in fd.dependency:
            if dep in added:
                continue
            added.add(dep)
            if dep in deps:
                add(deps[dep])
            else:
                add(_well_known(dep))
        pool.Add(fd)

    try:
        named = _pb().FileDescriptorProto()
        named.CopyFrom(descriptor)
        named.name = MAIN_FILE
        add(named)
        pool.FindFileByName(MAIN_FILE)
    except InvalidSchema:
        raise
    except Exception as exc:  # noqa: BLE001 - the pool's TypeError/KeyError on an inconsistent descriptor
        raise InvalidSchema(f"Invalid schema: {exc}") from None


def _well_known(name: str) -> Any:
    if not name.startswith("google/protobuf/") or not name.endswith(".proto"):
        raise InvalidSchema(f"Invalid schema: import {name!r} names no reference of the schema")
    module = "google.protobuf." + name.removeprefix("google/protobuf/").removesuffix(".proto").replace("/", ".")
    try:
        file = importlib.import_module(module + "_pb2").DESCRIPTOR
    except ImportError:
        raise InvalidSchema(f"Invalid schema: unknown import {name!r}") from None
    fd = _pb().FileDescriptorProto()
    file.CopyToProto(fd)
    return fd


def _compile(text: str, deps: dict[str, Any]) -> Any:
    """Compile .proto source with protoc: its imports from `deps` (a descriptor set) or protoc's bundled
    well-known types."""
    try:
        import grpc_tools
        from grpc_tools import protoc
    except ImportError as exc:  # pragma: no cover - grpcio-tools is a core dependency
        raise InvalidSchema(f"Protobuf source needs grpcio-tools (protoc): {exc}") from None
    pb = _pb()
    bundled = os.path.join(os.path.dirname(grpc_tools.__file__), "_proto")
    with tempfile.TemporaryDirectory(prefix="odradek-proto-") as tmp:
        with open(os.path.join(tmp, MAIN_FILE), "w", encoding="utf-8") as f:
            f.write(text)
        deps_set = pb.FileDescriptorSet(file=list(deps.values()))
        deps_path = os.path.join(tmp, "deps.pb")
        with open(deps_path, "wb") as f:
            f.write(deps_set.SerializeToString())
        out = os.path.join(tmp, "out.pb")
        args = ["protoc", f"-I{tmp}", f"-I{bundled}", f"--descriptor_set_in={deps_path}",
                f"--descriptor_set_out={out}", MAIN_FILE]
        with _protoc_lock:
            code = protoc.main(args)
        if code != 0:
            # protoc writes its errors to the process's stderr; run it again apart to read them
            run = subprocess.run([sys.executable, "-m", "grpc_tools.protoc", *args[1:]], cwd=tmp,
                                 capture_output=True, text=True, timeout=60)
            message = " ".join(run.stderr.replace(MAIN_FILE, "schema").split()) or f"protoc exited {code}"
            raise InvalidSchema(f"Invalid schema: {message}")
        with open(out, "rb") as f:
            descriptor_set = pb.FileDescriptorSet.FromString(f.read())
    descriptor = descriptor_set.file[0]
    descriptor.name = ""
    return descriptor


def render(parsed: ProtobufSchema, fmt: str) -> str | None:
    """The schema in form `fmt`: "serialized" is the base64 FileDescriptorProto (what confluent-kafka's
    ProtobufDeserializer asks for); other forms are not offered (None)."""
    if fmt != "serialized":
        return None
    return base64.b64encode(parsed.descriptor.SerializeToString()).decode()


# -- compatibility ----------------------------------------------------------------------------------------


def _types(fd: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The file's messages and enums by full name (".pkg.Outer.Inner"), nested ones included."""
    messages: dict[str, Any] = {}
    enums: dict[str, Any] = {}
    prefix = f".{fd.package}" if fd.package else ""

    def walk(scope: str, message_types: Any, enum_types: Any) -> None:
        for e in enum_types:
            enums[f"{scope}.{e.name}"] = e
        for m in message_types:
            name = f"{scope}.{m.name}"
            messages[name] = m
            walk(name, m.nested_type, m.enum_type)

    walk(prefix, fd.message_type, fd.enum_type)
    return messages, enums


def _type_name(f: Any) -> str:
    return _pb().FieldDescriptorProto.Type.Name(f.type).removeprefix("TYPE_").lower()


def _kind(f: Any) -> str:
    t = _type_name(f)
    return t if t in ("message", "enum", "group") else "scalar"


def read_problems(reader: ProtobufSchema, writer: ProtobufSchema) -> list[str]:
    """Why a reader of `reader` cannot decode data written with `writer` (empty: it can)."""
    r, w = reader.descriptor, writer.descriptor
    if r.package != w.package:
        return [f"package changed from {w.package!r} to {r.package!r}"]
    found: list[str] = []
    if (r.syntax or "proto2") != (w.syntax or "proto2"):
        found.append(f"syntax changed from {w.syntax or 'proto2'} to {r.syntax or 'proto2'}")
    rmessages, renums = _types(r)
    wmessages, wenums = _types(w)
    for name in wenums:
        if name not in renums:
            found.append(f"enum {name[1:]} removed")
    for name, wm in wmessages.items():
        if name not in rmessages:
            found.append(f"message {name[1:]} removed")
        else:
            found += _message(rmessages[name], wm, name[1:])
    return found


def _message(r: Any, w: Any, path: str) -> list[str]:
    found: list[str] = []
    rfields = {f.number: f for f in r.field}
    wfields = {f.number: f for f in w.field}
    required = _pb().FieldDescriptorProto.LABEL_REQUIRED
    for number, rf in rfields.items():
        wf = wfields.get(number)
        if rf.label == required and (wf is None or wf.label != required):
            found.append(f"{path}: field {rf.name} ({number}) is required by the reader, not by the writer")
        if wf is not None:
            found += _field(rf, wf, f"{path}.{rf.name}")
    found += _oneofs(r, w, rfields, wfields, path)
    return found


def _field(r: Any, w: Any, path: str) -> list[str]:
    rk, wk = _kind(r), _kind(w)
    if rk != wk:
        return [f"{path}: field {r.number} changed from a {wk} to a {rk}"]
    found: list[str] = []
    if rk == "scalar":
        rt, wt = _type_name(r), _type_name(w)
        if not any(rt in group and wt in group for group in WIRE_GROUPS):
            found.append(f"{path}: field {r.number} changed type from {wt} to {rt}")
    elif r.type_name.lstrip(".") != w.type_name.lstrip("."):
        found.append(f"{path}: field {r.number} changed type from {w.type_name.lstrip('.')} to "
                     f"{r.type_name.lstrip('.')}")
    repeated = _pb().FieldDescriptorProto.LABEL_REPEATED
    if (r.label == repeated) != (w.label == repeated) and rk != "scalar":
        found.append(f"{path}: field {r.number} changed between singular and repeated")
    return found


def _real_oneof(f: Any) -> int | None:
    """The index of the oneof `f` is in, unless none or a proto3 `optional`'s synthetic one."""
    if not f.HasField("oneof_index") or f.proto3_optional:
        return None
    return f.oneof_index


def _oneofs(r: Any, w: Any, rfields: dict[int, Any], wfields: dict[int, Any], path: str) -> list[str]:
    found: list[str] = []
    for number, wf in wfields.items():
        if _real_oneof(wf) is not None and number not in rfields:
            found.append(f"{path}: field {wf.name} ({number}) removed from oneof "
                         f"{w.oneof_decl[wf.oneof_index].name}")
    writer_oneofs = {w.oneof_decl[i].name for i in {_real_oneof(f) for f in w.field} if i is not None}
    moved: dict[str, list[str]] = {}
    for number, rf in rfields.items():
        index = _real_oneof(rf)
        wf = wfields.get(number)
        if index is None or wf is None or _real_oneof(wf) is not None:
            continue
        moved.setdefault(r.oneof_decl[index].name, []).append(rf.name)
    for oneof, names in sorted(moved.items()):
        if len(names) > 1:
            found.append(f"{path}: fields {sorted(names)} moved into oneof {oneof}")
        elif oneof in writer_oneofs:
            found.append(f"{path}: field {names[0]} moved into the existing oneof {oneof}")
    return found
