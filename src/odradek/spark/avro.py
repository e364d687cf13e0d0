"""Avro keys and values in Confluent's wire format, decoded through a Confluent-compatible schema registry.

Driver (planning): the latest schema of each subject is fetched once and mapped to a Spark type; it is the
reader schema of the whole query, so the DataFrame's schema does not change under a running query (a newer
registered schema is picked up when the DataFrame is defined again).

Executors: each record is `0x00`, a 4-byte big-endian schema id, then Avro binary. The id names the writer
schema, fetched from the registry once per process, and fastavro resolves the record from it to the reader
schema, so records written under older compatible schemas come out in the latest shape (added fields with
their defaults).
"""

from __future__ import annotations

import datetime
import io
import json
import struct
import threading
import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass
from typing import Any, Callable

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from odradek.spark.options import AvroOptions

REGISTRY_TIMEOUT_S = 30.0
MAGIC = 0
HEADER = struct.Struct(">bI")


class AvroSchemaError(ValueError):
    """An Avro schema that has no Spark equivalent here (the message names the place in the schema)."""


class AvroDecodeError(ValueError):
    """A record that cannot be decoded (not Confluent-framed, unknown schema id, unresolvable)."""


class RegistryError(RuntimeError):
    """The registry could not be reached or refused a request that is not about the data."""


# ---------------------------------------------------------------------------------------------------
# Avro schema -> Spark type
# ---------------------------------------------------------------------------------------------------

_PRIMITIVES: dict[str, DataType] = {
    "null": NullType(),
    "boolean": BooleanType(),
    "int": IntegerType(),
    "long": LongType(),
    "float": FloatType(),
    "double": DoubleType(),
    "bytes": BinaryType(),
    "string": StringType(),
}

# (logical type, underlying type) -> Spark type; anything else falls back to the underlying type, as the
# Avro specification tells readers to do with logical types they do not know.
_LOGICAL: dict[tuple[str, str], DataType] = {
    ("date", "int"): DateType(),
    ("timestamp-millis", "long"): TimestampType(),
    ("timestamp-micros", "long"): TimestampType(),
    ("local-timestamp-millis", "long"): TimestampNTZType(),
    ("local-timestamp-micros", "long"): TimestampNTZType(),
    ("uuid", "string"): StringType(),
    ("time-millis", "int"): IntegerType(),
    ("time-micros", "long"): LongType(),
}


def _parse(schema: str | dict | list) -> Any:
    """fastavro's parsed form: named types fully qualified, so references can be looked up by full name."""
    import fastavro

    raw = json.loads(schema) if isinstance(schema, str) else schema
    try:
        return fastavro.parse_schema(raw)
    except Exception as exc:  # noqa: BLE001 - fastavro raises several types for a bad schema
        raise AvroSchemaError(f"not a valid Avro schema: {exc}") from None


def avro_to_spark(schema: str | dict | list) -> tuple[DataType, bool]:
    """(Spark type, nullable) of an Avro schema (JSON text or parsed). Records become structs, ["null", T]
    a nullable T, enums strings, fixed binary; unions of several non-null types are refused."""
    return _Mapper().map(_parse(schema), "$", ())


class _Mapper:
    def __init__(self) -> None:
        self.named: dict[str, Any] = {}

    def map(self, s: Any, where: str, stack: tuple[str, ...]) -> tuple[DataType, bool]:
        if isinstance(s, str):
            if s in _PRIMITIVES:
                return _PRIMITIVES[s], s == "null"
            if s in stack:
                raise AvroSchemaError(f"{where}: recursive type {s!r} has no Spark equivalent")
            if s not in self.named:
                raise AvroSchemaError(f"{where}: unknown type {s!r}")
            return self.map(self.named[s], where, stack)
        if isinstance(s, list):
            return self.union(s, where, stack)
        if not isinstance(s, dict):
            raise AvroSchemaError(f"{where}: unexpected schema {s!r}")
        t = s.get("type")
        logical = s.get("logicalType")
        if logical == "decimal" and t in ("bytes", "fixed"):
            precision, scale = int(s.get("precision", 0)), int(s.get("scale", 0))
            if not 0 < precision <= 38 or not 0 <= scale <= precision:
                raise AvroSchemaError(f"{where}: decimal({precision}, {scale}) does not fit Spark's decimal "
                                      "(precision 1..38)")
            self._name(s)
            return DecimalType(precision, scale), False
        if isinstance(logical, str) and isinstance(t, str) and (logical, t) in _LOGICAL:
            return _LOGICAL[(logical, t)], False
        if t == "record" or t == "error":
            name = self._name(s)
            fields = []
            for f in s.get("fields", []):
                dt, nullable = self.map(f["type"], f"{where}.{f['name']}", stack + (name,))
                fields.append(StructField(f["name"], dt, nullable))
            return StructType(fields), False
        if t == "enum":
            self._name(s)
            return StringType(), False
        if t == "fixed":
            self._name(s)
            return BinaryType(), False
        if t == "array":
            dt, nullable = self.map(s["items"], f"{where}[]", stack)
            return ArrayType(dt, nullable), False
        if t == "map":
            dt, nullable = self.map(s["values"], f"{where}{{}}", stack)
            return MapType(StringType(), dt, nullable), False
        if isinstance(t, (str, list, dict)):
            # {"type": "string"} and the like (fastavro keeps extra attributes, e.g. "connect.name")
            return self.map(t, where, stack)
        raise AvroSchemaError(f"{where}: unsupported Avro type {t!r}")

    def _name(self, s: dict) -> str:
        name = s.get("name")
        if name:
            self.named[name] = s
        return name or ""

    def union(self, branches: list, where: str, stack: tuple[str, ...]) -> tuple[DataType, bool]:
        others = [b for b in branches if b != "null"]
        nullable = len(others) < len(branches)
        if not others:
            return NullType(), True
        if len(others) > 1:
            raise AvroSchemaError(
                f"{where}: a union of several non-null types {json.dumps(_short(branches))} is not supported; "
                "only [\"null\", T] (a nullable T) is"
            )
        dt, inner = self.map(others[0], where, stack)
        return dt, nullable or inner


def _short(branches: list) -> list:
    return [b if isinstance(b, str) else b.get("name") or b.get("type") for b in branches]


# ---------------------------------------------------------------------------------------------------
# fastavro's Python values -> what pyarrow builds the Spark type from
# ---------------------------------------------------------------------------------------------------

Convert = Callable[[Any], Any]


def _converter(dt: DataType) -> Convert | None:
    """A function fixing fastavro's value for pyarrow, or None where nothing below needs it. Maps become
    pairs; string, int and long fields get a cheap type check because the Spark type alone does not say
    whether the Avro field was a uuid or time-of-day logical type (fastavro gives UUID / datetime.time)."""
    if isinstance(dt, StructType):
        parts = [(f.name, _converter(f.dataType)) for f in dt.fields]
        fixes = [(n, c) for n, c in parts if c is not None]
        if not fixes:
            return None

        def record(v: Any) -> Any:
            if v is None:
                return None
            for name, c in fixes:
                v[name] = c(v.get(name))
            return v
        return record
    if isinstance(dt, ArrayType):
        c = _converter(dt.elementType)
        if c is None:
            return None
        return lambda v: None if v is None else [c(x) for x in v]
    if isinstance(dt, MapType):
        c = _converter(dt.valueType)
        # pyarrow's map arrays take (key, value) pairs
        if c is None:
            return lambda v: None if v is None else list(v.items())
        return lambda v: None if v is None else [(k, c(x)) for k, x in v.items()]
    if isinstance(dt, StringType):
        # uuid: fastavro gives uuid.UUID
        return lambda v: str(v) if isinstance(v, uuid.UUID) else v
    if isinstance(dt, (IntegerType, LongType)):
        # time-millis / time-micros: fastavro gives datetime.time; Spark gets the count since midnight
        def time_of_day(v: Any) -> Any:
            if isinstance(v, datetime.time):
                micros = ((v.hour * 60 + v.minute) * 60 + v.second) * 1_000_000 + v.microsecond
                return micros // 1000 if isinstance(dt, IntegerType) else micros
            return v
        return time_of_day
    return None


# ---------------------------------------------------------------------------------------------------
# Registry access (plain urllib: no dependency beyond the standard library)
# ---------------------------------------------------------------------------------------------------


class _NotFound(Exception):
    pass


def _get_json(url: str) -> Any:
    req = urllib.request.Request(url, headers={"Accept": "application/vnd.schemaregistry.v1+json, application/json"})
    try:
        with urllib.request.urlopen(req, timeout=REGISTRY_TIMEOUT_S) as res:
            return json.loads(res.read())
    except urllib.error.HTTPError as exc:
        try:
            body = json.loads(exc.read())
            message = f"{body.get('error_code')} {body.get('message')}"
        except Exception:  # noqa: BLE001 - not the registry's JSON error body
            message = f"HTTP {exc.code}"
        if exc.code == 404:
            raise _NotFound(message) from None
        raise RegistryError(f"schema registry request {url} failed: {message}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise RegistryError(f"schema registry request {url} failed: {exc}") from None


def _check_avro(body: dict, what: str) -> str:
    kind = body.get("schemaType") or "AVRO"
    if kind != "AVRO":
        raise AvroSchemaError(f"{what} is a {kind} schema; only Avro is supported")
    return str(body["schema"])


def fetch_latest(registry_url: str, subject: str) -> tuple[int, str]:
    """(id, schema text) of the latest version of `subject`."""
    url = f"{registry_url}/subjects/{urllib.parse.quote(subject, safe='')}/versions/latest"
    try:
        body = _get_json(url)
    except _NotFound as exc:
        raise RegistryError(f"subject {subject!r} not found in the schema registry at {registry_url} ({exc}); "
                            "options valueSubject/keySubject name another") from None
    return int(body["id"]), _check_avro(body, f"subject {subject!r}")


def fetch_by_id(registry_url: str, schema_id: int) -> str | None:
    """The schema text of `schema_id`, None when the registry does not know it."""
    try:
        body = _get_json(f"{registry_url}/schemas/ids/{schema_id}")
    except _NotFound:
        return None
    return _check_avro(body, f"schema id {schema_id}")


# ---------------------------------------------------------------------------------------------------
# Planning (driver) and decoding (executors)
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AvroColumn:
    column: str  # "key" | "value"
    subject: str
    schema_id: int
    schema: str  # the reader schema (latest of the subject at planning time)
    data_type_json: str  # Spark type as JSON: pickles without pyspark's type objects


@dataclass(frozen=True)
class AvroPlan:
    registry_url: str
    mode: str
    columns: tuple[AvroColumn, ...]

    def apply(self, schema: StructType) -> StructType:
        """Kafka's row schema with the Avro columns' binary type replaced by their struct (always nullable:
        tombstones, null keys and PERMISSIVE failures are null)."""
        types = {c.column: _type_from_json(c.data_type_json) for c in self.columns}
        return StructType([StructField(f.name, types[f.name], True) if f.name in types else f for f in schema.fields])


def _type_from_json(text: str) -> DataType:
    from pyspark.sql.types import _parse_datatype_json_string

    return _parse_datatype_json_string(text)


def plan_avro(opts: AvroOptions) -> AvroPlan:
    """Fetch each subject's latest schema and map it (driver side, at planning time)."""
    columns = []
    for column, subject in (("key", opts.key_subject), ("value", opts.value_subject)):
        if subject is None:
            continue
        schema_id, text = fetch_latest(opts.registry_url, subject)
        try:
            dt, _ = avro_to_spark(text)
        except AvroSchemaError as exc:
            raise AvroSchemaError(f"the latest schema of subject {subject!r} (id {schema_id}): {exc}") from None
        columns.append(AvroColumn(column, subject, schema_id, text, dt.json()))
    return AvroPlan(opts.registry_url, opts.mode, tuple(columns))


# Writer schemas by (registry, id), shared by the tasks of one Python worker (ids never change meaning).
_WRITERS: dict[tuple[str, int], Any] = {}
_WRITERS_LOCK = threading.Lock()


def _writer_schema(registry_url: str, schema_id: int) -> Any | None:
    key = (registry_url, schema_id)
    with _WRITERS_LOCK:
        if key in _WRITERS:
            return _WRITERS[key]
    text = fetch_by_id(registry_url, schema_id)
    if text is None:
        return None
    parsed = _parse(text)
    with _WRITERS_LOCK:
        _WRITERS[key] = parsed
    return parsed


class _ColumnDecoder:
    def __init__(self, plan: AvroPlan, col: AvroColumn) -> None:
        self.plan = plan
        self.col = col
        self.reader = _parse(col.schema)
        self.convert = _converter(_type_from_json(col.data_type_json))
        self.unknown: set[int] = set()  # ids the registry did not know, asked once per task

    def decode(self, raw: bytes | None) -> Any:
        """The decoded value; raises AvroDecodeError with the reason (no position: the caller adds it)."""
        from fastavro import schemaless_reader

        if raw is None:
            return None
        if len(raw) < HEADER.size or raw[0] != MAGIC:
            raise AvroDecodeError(f"the {self.col.column} is not in Confluent's wire format (magic byte 0, "
                                  f"schema id, Avro): it starts with {bytes(raw[:HEADER.size]).hex() or 'nothing'}")
        _, schema_id = HEADER.unpack_from(raw)
        writer = None if schema_id in self.unknown else _writer_schema(self.plan.registry_url, schema_id)
        if writer is None:
            self.unknown.add(schema_id)
            raise AvroDecodeError(f"schema id {schema_id} of the {self.col.column} is unknown to the schema "
                                  f"registry at {self.plan.registry_url}")
        buf = io.BytesIO(raw)
        buf.seek(HEADER.size)
        try:
            value = schemaless_reader(buf, writer, self.reader)
        except Exception as exc:  # noqa: BLE001 - truncated data, resolution errors, ...
            raise AvroDecodeError(f"the {self.col.column} (schema id {schema_id}) cannot be read as the latest "
                                  f"schema of {self.col.subject!r} (id {self.col.schema_id}): "
                                  f"{type(exc).__name__}: {exc}") from None
        return value if self.convert is None else self.convert(value)


class AvroDecoder:
    """Turns the binary key/value columns of Arrow batches from `read_range` into the planned structs."""

    def __init__(self, plan: AvroPlan, arrow_schema: Any) -> None:
        self.plan = plan
        self.arrow_schema = arrow_schema
        self.columns = {c.column: _ColumnDecoder(plan, c) for c in plan.columns}

    def decode_batch(self, batch: Any) -> Any:
        import pyarrow as pa

        arrays = []
        for i, field in enumerate(self.arrow_schema):
            col = batch.column(i)
            dec = self.columns.get(field.name)
            if dec is not None:
                col = pa.array(self._decode_all(dec, batch, col.to_pylist()), type=field.type)
            arrays.append(col)
        return pa.RecordBatch.from_arrays(arrays, schema=self.arrow_schema)

    def _decode_all(self, dec: _ColumnDecoder, batch: Any, raws: list) -> list:
        out = []
        offsets = None
        for i, raw in enumerate(raws):
            try:
                out.append(dec.decode(raw))
            except AvroDecodeError as exc:
                if self.plan.mode == "PERMISSIVE":
                    out.append(None)
                    continue
                if offsets is None:
                    offsets = batch.column(batch.schema.get_field_index("offset")).to_pylist()
                topic = batch.column(batch.schema.get_field_index("topic"))[i].as_py()
                partition = batch.column(batch.schema.get_field_index("partition"))[i].as_py()
                raise AvroDecodeError(f"cannot decode the record of {topic}-{partition} at offset {offsets[i]}: "
                                      f"{exc} (option avro.mode=PERMISSIVE gives null instead)") from None
        return out
