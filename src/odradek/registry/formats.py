"""What every schema format of the registry offers (AVRO, JSON, PROTOBUF), so that state.py and
compatibility.py dispatch on `schemaType` instead of branching on it.

A format turns schema text, plus the schemas its references name, into a parsed schema with:

* `identity`: a string; two registrations with equal identities (and equal references, which state.py adds)
  are the same schema and share one id;
* `read_problems(reader, writer)`: why data written with `writer` is not acceptable to `reader` (empty when
  it is). The compatibility levels are built on this one question, whatever the format.

Each format module documents which of its rules are implemented; what they share (errors, limits,
references) is schema.py's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from odradek.registry import avro, jsonschema_format, protobuf_format
from odradek.registry.schema import SCHEMA_TYPES, InvalidSchema, Resolved


@dataclass(frozen=True)
class Format:
    name: str
    parse: Callable[[str, Resolved], Any]
    read_problems: Callable[[Any, Any], list[str]]
    # the schema in another form a client may ask for with ?format= (None: only the registered text)
    render: Callable[[Any, str], str | None] = lambda parsed, fmt: None


def format_of(schema_type: str) -> Format:
    """The format of a `schemaType`; InvalidSchema for an unknown one."""
    if schema_type == "AVRO":
        return Format("AVRO", avro.parse, avro.read_problems)
    if schema_type == "JSON":
        return Format("JSON", jsonschema_format.parse, jsonschema_format.read_problems)
    if schema_type == "PROTOBUF":
        return Format("PROTOBUF", protobuf_format.parse, protobuf_format.read_problems, protobuf_format.render)
    raise InvalidSchema(f"Invalid schema type {schema_type!r}: expected one of {', '.join(SCHEMA_TYPES)}")
