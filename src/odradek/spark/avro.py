"""Avro keys and values (`valueFormat=avro`) in Confluent's wire format, decoded through a schema registry
(registry_schemas.py: what all formats share; registry_formats.py: the planning and Arrow batches).

Driver (planning): the latest schema of the subject, mapped to a Spark type, is the reader schema.
Executors: after `0x00` and the 4-byte schema id comes Avro binary. The id names the writer schema, fetched
from the registry once per process, and fastavro resolves the record from it to the reader schema, so
records written under older compatible schemas come out in the latest shape (added fields with their
defaults).
"""

from __future__ import annotations

import datetime
import io
import json
import uuid
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

from odradek.spark.options import RegistryColumnOptions
from odradek.spark.registry_schemas import (
    RecordDecoder,
    RegisteredSchema,
    RegistryColumn,
    SchemaMappingError,
    WriterSchemas,
    unreadable,
)


class AvroSchemaError(SchemaMappingError):
    """An Avro schema that has no Spark equivalent here (the message names the place in the schema)."""


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
# The registry format (registry_formats.py plans the columns and builds the Arrow batches)
# ---------------------------------------------------------------------------------------------------

class AvroFormat:
    """Avro binary, resolved by fastavro from each record's writer schema to the planned reader schema, so
    records written under older compatible schemas come out in the latest shape (added fields with their
    defaults)."""

    schema_type = "AVRO"

    def plan(self, registry_url: str, subject: str, latest: RegisteredSchema,
             options: RegistryColumnOptions) -> tuple[str, DataType]:
        dt, _ = avro_to_spark(latest.schema)
        return latest.schema, dt

    def record_decoder(self, registry_url: str, column: RegistryColumn) -> RecordDecoder:
        from fastavro import schemaless_reader

        reader = _parse(column.schema)
        convert = _converter(column.data_type())
        writers = WriterSchemas(self, registry_url, column, lambda found: _parse(found.schema))

        def decode(schema_id: int, body: memoryview) -> Any:
            writer = writers.get(schema_id)
            try:
                value = schemaless_reader(io.BytesIO(body), writer, reader)
            except Exception as exc:  # noqa: BLE001 - truncated data, resolution errors, ...
                raise unreadable(column, schema_id, exc) from None
            return value if convert is None else convert(value)
        return decode


AVRO = AvroFormat()
