"""JSON Schema keys and values (`valueFormat=json`) in Confluent's wire format: `0x00`, a 4-byte schema id,
then the UTF-8 JSON document (registry_schemas.py: what all formats share).

The latest schema of the subject maps to a Spark type:

* object with `properties` -> struct of those properties in declaration order; a property is nullable unless
  it is `required` and its type excludes null
* string -> string (`format`s such as date-time stay strings), integer -> bigint, number -> double,
  boolean -> boolean, array with one `items` schema -> array
* `"type": [T, "null"]`, and `oneOf`/`anyOf` of one schema and `{"type": "null"}` -> a nullable T;
  `allOf` of one schema -> that schema
* `$ref` to a place in the same document (`#/definitions/X`, `#/$defs/X`, any JSON pointer) -> the schema there
* anything else (several types, oneOf/anyOf of different schemas, objects without properties such as maps
  given by `additionalProperties`, tuples, `{}`, recursive references, references to other documents)
  -> a string column holding that part of the document as JSON text

A record is decoded with the latest schema's shape whatever schema id it carries (JSON has no writer/reader
resolution): missing properties are null, properties the schema does not name are dropped. The id must be
known to the registry. A value of the wrong JSON type for its column fails the record (FAILFAST) or makes it
null (PERMISSIVE).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DataType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from odradek.spark.options import RegistryColumnOptions
from odradek.spark.registry_schemas import (
    DecodeError,
    RecordDecoder,
    RegisteredSchema,
    RegistryColumn,
    SchemaMappingError,
    WriterSchemas,
)


class JsonValueError(ValueError):
    """A JSON value that does not have the type its column was mapped to (the message names the place)."""


# JSON value -> what pyarrow builds the column's Spark type from; raises JsonValueError.
Convert = Callable[[Any, str], Any]


@dataclass(frozen=True)
class Mapped:
    """A part of the schema as a Spark type, whether it admits null, and how its JSON values convert."""

    data_type: DataType
    nullable: bool
    convert: Convert


def _as_json_text(v: Any, where: str) -> Any:
    return None if v is None else json.dumps(v, separators=(",", ":"), ensure_ascii=False)


def _scalar(kind: str, check: Callable[[Any], bool], cast: Callable[[Any], Any]) -> Convert:
    def convert(v: Any, where: str) -> Any:
        if v is None:
            return None
        if not check(v):
            raise JsonValueError(f"{where}: expected {kind}, got {json.dumps(v)[:60]}")
        return cast(v)
    return convert


# bool is an int in Python, but true is no JSON integer
_SCALARS: dict[str, tuple[DataType, Convert]] = {
    "string": (StringType(), _scalar("a string", lambda v: isinstance(v, str), str)),
    # bigint's range: a larger integer is a value of the wrong type here, not an Arrow overflow later
    "integer": (LongType(), _scalar("an integer of bigint's range", lambda v: not isinstance(v, bool) and (
        isinstance(v, int) or (isinstance(v, float) and v.is_integer())) and -2**63 <= v < 2**63, int)),
    "number": (DoubleType(), _scalar("a number", lambda v: not isinstance(v, bool) and isinstance(v, (int, float)),
                                     float)),
    "boolean": (BooleanType(), _scalar("a boolean", lambda v: isinstance(v, bool), bool)),
}

_JSON_TEXT = StringType()


def json_schema_to_spark(schema: str | dict | bool) -> Mapped:
    """The Spark type of a JSON Schema document (text or parsed); see the module docstring."""
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except ValueError as exc:
            raise SchemaMappingError(f"not valid JSON: {exc}") from None
    return _Mapper(schema).map(schema, "$", ())


class _Mapper:
    def __init__(self, root: Any) -> None:
        self.root = root

    def as_json_text(self, nullable: bool = True) -> Mapped:
        return Mapped(_JSON_TEXT, nullable, _as_json_text)

    def resolve(self, ref: str, where: str) -> Any | None:
        """The schema `ref` points to in this document; None for a reference elsewhere or to nothing."""
        if not ref.startswith("#"):
            return None
        node = self.root
        for part in (p for p in ref[1:].split("/") if p):
            part = part.replace("~1", "/").replace("~0", "~")
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return None
        return node

    def map(self, s: Any, where: str, refs: tuple[str, ...]) -> Mapped:
        if s is True or s == {}:
            return self.as_json_text()
        if not isinstance(s, dict):
            raise SchemaMappingError(f"{where}: not a schema: {json.dumps(s)[:60]}")
        if "$ref" in s:
            ref = str(s["$ref"])
            target = self.resolve(ref, where)
            # a recursive structure has no fixed Spark type: it stays JSON text from where it recurs
            if target is None or ref in refs:
                return self.as_json_text()
            return self.map(target, where, refs + (ref,))
        for keyword in ("oneOf", "anyOf"):
            if keyword in s:
                return self.choice(s[keyword], where, refs)
        if "allOf" in s:
            branches = s["allOf"]
            if isinstance(branches, list) and len(branches) == 1 and "type" not in s and "properties" not in s:
                return self.map(branches[0], where, refs)
            return self.as_json_text()
        t = s.get("type")
        if t is None and "properties" in s:
            t = "object"
        types = t if isinstance(t, list) else [t] if t is not None else []
        others = [x for x in types if x != "null"]
        nullable = len(others) < len(types)
        if len(others) != 1:
            # no type (enum, const, {}), only null, or several: the value as JSON text
            if not others and "enum" in s and all(isinstance(e, str) for e in s["enum"] if e is not None):
                return Mapped(StringType(), nullable or None in s["enum"], _SCALARS["string"][1])
            return self.as_json_text()
        kind = others[0]
        if kind in _SCALARS:
            dt, convert = _SCALARS[kind]
            return Mapped(dt, nullable, convert)
        if kind == "array":
            items = s.get("items")
            if not isinstance(items, (dict, bool)) or "prefixItems" in s:
                return self.as_json_text(nullable)
            element = self.map(items, f"{where}[]", refs)
            return Mapped(ArrayType(element.data_type, element.nullable), nullable, _array(element.convert))
        if kind == "object":
            props = s.get("properties")
            if not isinstance(props, dict) or not props:
                return self.as_json_text(nullable)
            required = set(s.get("required") or ())
            fields = []
            for name, sub in props.items():
                m = self.map(sub, f"{where}.{name}", refs)
                fields.append((name, Mapped(m.data_type, m.nullable or name not in required, m.convert)))
            struct = StructType([StructField(n, m.data_type, m.nullable) for n, m in fields])
            return Mapped(struct, nullable, _object([(n, m.convert) for n, m in fields]))
        return self.as_json_text(nullable)

    def choice(self, branches: Any, where: str, refs: tuple[str, ...]) -> Mapped:
        """oneOf/anyOf: one schema besides {"type": "null"} is a nullable that schema; else JSON text."""
        if not isinstance(branches, list):
            return self.as_json_text()
        others = [b for b in branches if not (isinstance(b, dict) and b.get("type") == "null" and len(b) == 1)]
        if len(others) != 1:
            return self.as_json_text()
        m = self.map(others[0], where, refs)
        return Mapped(m.data_type, m.nullable or len(others) < len(branches), m.convert)


def _array(element: Convert) -> Convert:
    def convert(v: Any, where: str) -> Any:
        if v is None:
            return None
        if not isinstance(v, list):
            raise JsonValueError(f"{where}: expected an array, got {json.dumps(v)[:60]}")
        return [element(x, f"{where}[{i}]") for i, x in enumerate(v)]
    return convert


def _object(fields: list[tuple[str, Convert]]) -> Convert:
    def convert(v: Any, where: str) -> Any:
        if v is None:
            return None
        if not isinstance(v, dict):
            raise JsonValueError(f"{where}: expected an object, got {json.dumps(v)[:60]}")
        return {name: c(v.get(name), f"{where}.{name}") for name, c in fields}
    return convert


# ---------------------------------------------------------------------------------------------------
# The registry format
# ---------------------------------------------------------------------------------------------------

class JsonSchemaFormat:
    schema_type = "JSON"

    def plan(self, registry_url: str, subject: str, latest: RegisteredSchema,
             options: RegistryColumnOptions) -> tuple[str, DataType]:
        return latest.schema, json_schema_to_spark(latest.schema).data_type

    def record_decoder(self, registry_url: str, column: RegistryColumn) -> RecordDecoder:
        convert = json_schema_to_spark(column.schema).convert
        # JSON has no writer/reader resolution: the writer schema is only asked for to check the id
        writers = WriterSchemas(self, registry_url, column, lambda found: True)

        def decode(schema_id: int, body: memoryview) -> Any:
            writers.get(schema_id)
            try:
                document = json.loads(bytes(body).decode("utf-8"))
            except ValueError as exc:
                raise DecodeError(f"the {column.column} (schema id {schema_id}) is not UTF-8 JSON: {exc}") from None
            try:
                return convert(document, "$")
            except JsonValueError as exc:
                raise DecodeError(f"the {column.column} (schema id {schema_id}) does not have the shape of the "
                                  f"latest schema of {column.subject!r} (id {column.schema_id}): {exc}") from None
        return decode


JSON_SCHEMA = JsonSchemaFormat()
