"""Protobuf keys and values (`valueFormat=protobuf`) in Confluent's wire format: `0x00`, a 4-byte schema id,
the message indexes, then the message in protobuf binary (registry_schemas.py: what all formats share).

Message indexes say which message of the schema's file the record holds: a zigzag varint count, then that
many zigzag varints, the index among the file's top-level messages, then among that message's nested ones;
a count of 0 (the single byte 0) means the file's first message.

Planning (driver): the schema of the subject's latest version is asked for as serialized
FileDescriptorProtos (`?format=serialized`), with those of its references, so neither driver nor executors
need protoc, only the `protobuf` package; imports of Google's well-known types come from that package. The
column reads one message: option `valueMessage` / `keyMessage` (its full name, package included), else the
first message of the schema. It maps to a struct:

* double/float/bool/string/bytes as Spark's; int32, sint32, sfixed32 -> int; int64, sint64, sfixed64 and
  uint32, fixed32 -> bigint; uint64, fixed64 -> decimal(20,0)
* enum -> string (the value's name; a number the schema does not name, as digits)
* repeated -> array, map<K,V> -> map, message -> struct, google.protobuf.Timestamp -> timestamp
* nullable: fields with presence (message fields, `optional`, oneof members, proto2 optional); proto3 plain
  scalars always have a value (their default when not written). Recursive messages are refused.

Executors parse each record's bytes with the planned message's class: protobuf's own compatibility rules
apply (fields matched by number, unknown ones skipped, missing ones at their default). The writer schema is
asked for by id (once per Python worker) only to check that the indexes name a message of the same full name.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import json
from dataclasses import dataclass
from typing import Any, Callable

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from odradek.records.batch import InvalidRecordError
from odradek.records.codec import decode_varint
from odradek.spark.options import RegistryColumnOptions
from odradek.spark.registry_schemas import (
    DecodeError,
    ProcessCache,
    RecordDecoder,
    RegisteredSchema,
    RegistryColumn,
    SchemaMappingError,
    WriterSchemas,
    fetch_by_id,
    fetch_version,
    unreadable,
)

TIMESTAMP = "google.protobuf.Timestamp"
WELL_KNOWN_PREFIX = "google/protobuf/"


class ProtobufValueError(ValueError):
    """Bytes that are not the message indexes and message they should be."""


# ---------------------------------------------------------------------------------------------------
# Message indexes
# ---------------------------------------------------------------------------------------------------


def _zigzag(data: memoryview, pos: int) -> tuple[int, int]:
    """A zig-zag varint of the message indexes (the record format's own decoder), failures as this format's."""
    try:
        return decode_varint(data, pos)
    except InvalidRecordError as exc:
        detail = "the message indexes end early" if "truncated" in str(exc) else "a message index is not a varint"
        raise ProtobufValueError(detail) from None


def read_message_indexes(data: memoryview) -> tuple[list[int], int]:
    """(message indexes, where the message starts) of the bytes after the schema id."""
    count, pos = _zigzag(data, 0)
    if count == 0:
        return [0], pos
    if count < 0 or count > len(data):
        raise ProtobufValueError(f"a message index count of {count}")
    indexes = []
    for _ in range(count):
        index, pos = _zigzag(data, pos)
        indexes.append(index)
    return indexes, pos


def message_name_at(file: Any, indexes: list[int]) -> str:
    """The full name of the message `indexes` point to in a FileDescriptorProto."""
    messages, names = file.message_type, [file.package] if file.package else []
    for index in indexes:
        if not 0 <= index < len(messages):
            raise ProtobufValueError(f"message indexes {indexes} point to no message of the schema")
        names.append(messages[index].name)
        messages = messages[index].nested_type
    return ".".join(names)


# ---------------------------------------------------------------------------------------------------
# Descriptors from the registry
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ProtobufReader:
    """What executors need to rebuild the reader message: the files in the order they can be added to a
    pool (dependencies first), as (name, base64 FileDescriptorProto), and the message's full name."""

    files: tuple[tuple[str, str], ...]
    message: str

    def to_text(self) -> str:
        return json.dumps({"files": [list(f) for f in self.files], "message": self.message})

    @classmethod
    def from_text(cls, text: str) -> "ProtobufReader":
        body = json.loads(text)
        return cls(tuple((str(n), str(b)) for n, b in body["files"]), str(body["message"]))


def _file_proto(name: str, serialized_b64: str) -> Any:
    from google.protobuf import descriptor_pb2

    try:
        file = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(serialized_b64))
    except Exception as exc:  # noqa: BLE001 - not base64, not a FileDescriptorProto
        raise SchemaMappingError(f"{name}: not a serialized FileDescriptorProto: {exc}") from None
    # the registry serializes files without a name; the pool finds them by the name their importers use
    file.name = name
    return file


def _well_known_file(name: str) -> str:
    """Base64 FileDescriptorProto of one of Google's well-known types (google/protobuf/*.proto), which
    serializers do not register: the protobuf package carries them."""
    import importlib

    from google.protobuf import descriptor_pb2, descriptor_pool

    module = "google.protobuf." + name[len(WELL_KNOWN_PREFIX):].removesuffix(".proto") + "_pb2"
    try:
        importlib.import_module(module)
        found = descriptor_pool.Default().FindFileByName(name)
    except (ImportError, KeyError):
        raise SchemaMappingError(f"import {name!r} is neither a reference of the schema nor a well-known type "
                                 "of the protobuf package") from None
    file = descriptor_pb2.FileDescriptorProto()
    found.CopyToProto(file)
    return base64.b64encode(file.SerializeToString()).decode()


def registry_files(registry_url: str, latest: RegisteredSchema) -> tuple[tuple[str, str], ...]:
    """The schema of `latest` and everything it imports, dependencies first (see ProtobufReader)."""
    ordered: list[tuple[str, str]] = []
    seen: set[str] = set()

    def add(name: str, found: RegisteredSchema) -> None:
        seen.add(name)
        refs = {ref_name: (subject, version) for ref_name, subject, version in found.references}
        for dep in _file_proto(name, found.schema).dependency:
            if dep in seen:
                continue
            if dep in refs:
                add(dep, fetch_version(registry_url, refs[dep][0], refs[dep][1], serialized=True))
            elif dep.startswith(WELL_KNOWN_PREFIX):
                seen.add(dep)
                ordered.append((dep, _well_known_file(dep)))
            else:
                raise SchemaMappingError(f"import {dep!r} of {name!r} is not among the schema's references")
        ordered.append((name, found.schema))

    # the main file's name only has to differ from the names its imports are known by
    add(f"odradek-registry-schema-{latest.id}.proto", latest)
    return tuple(ordered)


def _pool(files: tuple[tuple[str, str], ...]) -> Any:
    from google.protobuf import descriptor_pool

    pool = descriptor_pool.DescriptorPool()
    for name, serialized in files:
        try:
            pool.AddSerializedFile(_file_proto(name, serialized).SerializeToString())
        except SchemaMappingError:
            raise
        except Exception as exc:  # noqa: BLE001 - the pool's own errors (unresolved types, clashes)
            raise SchemaMappingError(f"{name}: cannot be loaded: {exc}") from None
    return pool


def reader_descriptor(reader: ProtobufReader) -> Any:
    """The Descriptor of the reader's message, in a pool of its own."""
    pool = _pool(reader.files)
    try:
        return pool.FindMessageTypeByName(reader.message)
    except KeyError:
        raise SchemaMappingError(f"the schema has no message {reader.message!r}") from None


# ---------------------------------------------------------------------------------------------------
# Message -> Spark type, and the decoded message -> what pyarrow builds it from
# ---------------------------------------------------------------------------------------------------

Convert = Callable[[Any], Any]


def _identity(v: Any) -> Any:
    return v


def _uint64(v: Any) -> Any:
    return decimal.Decimal(v)


def _scalar_types() -> dict[int, tuple[DataType, Convert]]:
    from google.protobuf.descriptor import FieldDescriptor as F

    return {
        F.TYPE_DOUBLE: (DoubleType(), _identity), F.TYPE_FLOAT: (FloatType(), _identity),
        F.TYPE_BOOL: (BooleanType(), _identity), F.TYPE_STRING: (StringType(), _identity),
        F.TYPE_BYTES: (BinaryType(), _identity),
        F.TYPE_INT32: (IntegerType(), _identity), F.TYPE_SINT32: (IntegerType(), _identity),
        F.TYPE_SFIXED32: (IntegerType(), _identity),
        F.TYPE_INT64: (LongType(), _identity), F.TYPE_SINT64: (LongType(), _identity),
        F.TYPE_SFIXED64: (LongType(), _identity),
        # unsigned: one size up, so every value fits
        F.TYPE_UINT32: (LongType(), _identity), F.TYPE_FIXED32: (LongType(), _identity),
        F.TYPE_UINT64: (DecimalType(20, 0), _uint64), F.TYPE_FIXED64: (DecimalType(20, 0), _uint64),
    }


def message_to_spark(descriptor: Any) -> tuple[StructType, Convert]:
    """(struct type, message -> dict) of a protobuf message Descriptor; see the module docstring."""
    struct, convert = _MessageMapper(_scalar_types()).message(descriptor, descriptor.full_name, ())
    assert isinstance(struct, StructType)
    return struct, convert


class _MessageMapper:
    def __init__(self, scalars: dict[int, tuple[DataType, Convert]]) -> None:
        self.scalars = scalars

    def message(self, d: Any, where: str, stack: tuple[str, ...]) -> tuple[DataType, Convert]:
        if d.full_name == TIMESTAMP:
            return TimestampType(), _timestamp
        if d.full_name in stack:
            raise SchemaMappingError(f"{where}: recursive message {d.full_name!r} has no Spark equivalent")
        stack = stack + (d.full_name,)
        fields, getters = [], []
        for f in d.fields:
            dt, nullable, get = self.field(f, f"{where}.{f.name}", stack)
            fields.append(StructField(f.name, dt, nullable))
            getters.append((f.name, get))

        def convert(msg: Any) -> Any:
            return {name: get(msg) for name, get in getters}
        return StructType(fields), convert

    def value(self, f: Any, where: str, stack: tuple[str, ...]) -> tuple[DataType, Convert]:
        """The type of one value of field `f` (an element, when it is repeated)."""
        if f.message_type is not None:
            return self.message(f.message_type, where, stack)
        if f.enum_type is not None:
            names = {v.number: v.name for v in f.enum_type.values}
            return StringType(), lambda v: names.get(v, str(v))
        if f.type not in self.scalars:
            raise SchemaMappingError(f"{where}: unsupported field type {f.type}")
        return self.scalars[f.type]

    def field(self, f: Any, where: str, stack: tuple[str, ...]) -> tuple[DataType, bool, Convert]:
        """(type, nullable, message -> the field's value) of field `f`."""
        name = f.name
        entry = f.message_type
        if f.is_repeated and entry is not None and entry.GetOptions().map_entry:
            key_type, key_convert = self.value(entry.fields_by_name["key"], f"{where}{{key}}", stack)
            value_type, value_convert = self.value(entry.fields_by_name["value"], f"{where}{{}}", stack)
            # pyarrow's map arrays take (key, value) pairs
            return (MapType(key_type, value_type, False), False,
                    lambda msg: [(key_convert(k), value_convert(v)) for k, v in getattr(msg, name).items()])
        dt, convert = self.value(f, where, stack)
        if f.is_repeated:
            return ArrayType(dt, False), False, lambda msg: [convert(v) for v in getattr(msg, name)]
        if f.has_presence:
            return dt, True, lambda msg: convert(getattr(msg, name)) if msg.HasField(name) else None
        return dt, False, lambda msg: convert(getattr(msg, name))


def _timestamp(ts: Any) -> Any:
    return ts.ToDatetime(tzinfo=datetime.timezone.utc)


# ---------------------------------------------------------------------------------------------------
# The registry format
# ---------------------------------------------------------------------------------------------------

# Per Python worker: reader text -> (message class, converter).
_READERS = ProcessCache()


def _first_message(file: Any) -> str:
    if not file.message_type:
        raise SchemaMappingError("the schema defines no message")
    return ".".join(filter(None, [file.package, file.message_type[0].name]))


class ProtobufFormat:
    schema_type = "PROTOBUF"

    def plan(self, registry_url: str, subject: str, latest: RegisteredSchema,
             options: RegistryColumnOptions) -> tuple[str, DataType]:
        # the same id as serialized descriptors (not "latest" again: a newer version may have come since)
        serialized = fetch_by_id(registry_url, latest.id, serialized=True)
        if serialized is None:
            raise SchemaMappingError(f"schema id {latest.id} vanished from the registry")
        files = registry_files(registry_url, serialized)
        message = options.message or _first_message(_file_proto(*files[-1]))
        reader = ProtobufReader(files, message)
        struct, _ = message_to_spark(reader_descriptor(reader))
        return reader.to_text(), struct

    def record_decoder(self, registry_url: str, column: RegistryColumn) -> RecordDecoder:
        from google.protobuf import message_factory

        def make_reader() -> tuple[Any, Convert]:
            descriptor = reader_descriptor(ProtobufReader.from_text(column.schema))
            return message_factory.GetMessageClass(descriptor), message_to_spark(descriptor)[1]
        message_class, convert = _READERS.get(column.schema, make_reader)
        reader_name = message_class.DESCRIPTOR.full_name

        # the writer schema is only asked for to learn the name of the message its indexes point to
        writers = WriterSchemas(self, registry_url, column,
                                lambda found: _file_proto(f"schema id {found.id}", found.schema), serialized=True)

        def decode(schema_id: int, body: memoryview) -> Any:
            file = writers.get(schema_id)
            try:
                indexes, start = read_message_indexes(body)
                written = message_name_at(file, indexes)
            except ProtobufValueError as exc:
                raise DecodeError(f"the {column.column} (schema id {schema_id}): {exc}") from None
            if written != reader_name:
                raise DecodeError(f"the {column.column} (schema id {schema_id}) holds message {written!r}; the "
                                  f"column reads {reader_name!r} (option {column.column}Message names another)")
            try:
                return convert(message_class.FromString(bytes(body[start:])))
            except Exception as exc:  # noqa: BLE001 - DecodeError of the protobuf runtime, and the like
                raise unreadable(column, schema_id, exc) from None
        return decode


PROTOBUF = ProtobufFormat()
