"""What every schema format of the registry offers (AVRO, JSON, PROTOBUF), so that state.py and
compatibility.py dispatch on `schemaType` instead of branching on it.

A format turns schema text, plus the schemas its references name, into a parsed schema with:

* `identity`: a string; two registrations with equal identities (and equal references, which state.py adds)
  are the same schema and share one id;
* `read_problems(reader, writer)`: why data written with `writer` is not acceptable to `reader` (empty when
  it is). The compatibility levels are built on this one question, whatever the format.

Each format module documents which of its rules are implemented.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Protocol, Sequence

# Confluent's order, which GET /schemas/types answers with.
SCHEMA_TYPES = ("JSON", "PROTOBUF", "AVRO")


class InvalidSchema(ValueError):
    """The text is not a valid schema of its type, or a reference cannot be resolved (the registry answers
    42201)."""


@dataclass(frozen=True)
class Reference:
    """One entry of a registration's `references`: the schema registered as `subject` version `version`,
    known inside the referring schema by `name` (an Avro type's file, a JSON Schema `$ref`, a Protobuf
    `import`)."""

    name: str
    subject: str
    version: int

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


class ParsedSchema(Protocol):
    schema_type: ClassVar[str]  # "AVRO", "JSON" or "PROTOBUF"

    @property
    def identity(self) -> str: ...


# name given by the referring schema -> the referenced schema, already parsed (with its own references)
Resolved = Sequence[tuple[str, Any]]


@dataclass(frozen=True)
class Format:
    name: str
    parse: Callable[[str, Resolved], Any]
    read_problems: Callable[[Any, Any], list[str]]
    # the schema in another form a client may ask for with ?format= (None: only the registered text)
    render: Callable[[Any, str], str | None] = lambda parsed, fmt: None


def format_of(schema_type: str) -> Format:
    """The format of a `schemaType`; InvalidSchema for an unknown one."""
    # imported here: each format pulls in its own parsing library, and avro.py imports this module
    if schema_type == "AVRO":
        from odradek.registry import avro
        return Format("AVRO", avro.parse, avro.read_problems)
    if schema_type == "JSON":
        from odradek.registry import jsonschema_format
        return Format("JSON", jsonschema_format.parse, jsonschema_format.read_problems)
    if schema_type == "PROTOBUF":
        from odradek.registry import protobuf_format
        return Format("PROTOBUF", protobuf_format.parse, protobuf_format.read_problems, protobuf_format.render)
    raise InvalidSchema(f"Invalid schema type {schema_type!r}: expected one of {', '.join(SCHEMA_TYPES)}")
