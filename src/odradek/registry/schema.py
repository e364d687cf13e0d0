"""What a registered schema is, whatever its format: the errors a schema text can raise, the limits that keep
a hostile schema from exhausting the stack or the memory, a registration's references, and the protocol a
parsed schema follows. The format modules (avro.py, jsonschema_format.py, protobuf_format.py) build on these;
formats.py dispatches on `schemaType` to them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol, Sequence

# Limits of a schema, so that a hostile one is answered 42201 rather than exhausting the stack or the memory
# (docs/schema-registry.md). Deeper than any schema written by hand: a record nested in a record is three
# JSON levels (object, fields list, field object).
MAX_SCHEMA_DEPTH = 100
# entries of one JSON object or array: fields of a record, symbols of an enum, branches of a union, ...
MAX_SCHEMA_ENTRIES = 10_000
# a registered schema is one record of the registry's topic, whose records Kafka caps at 1 MiB by default
# (message.max.bytes): larger text could not be stored
MAX_SCHEMA_CHARS = 900_000

# Confluent's order, which GET /schemas/types answers with.
SCHEMA_TYPES = ("JSON", "PROTOBUF", "AVRO")


class InvalidSchema(ValueError):
    """The text is not a valid schema of its type, or a reference cannot be resolved (the registry answers
    42201)."""


class SchemaTooLarge(InvalidSchema):
    """The schema passes a limit above (also answered 42201, with the limit in the message)."""


def check_size(text: str) -> None:
    if len(text) > MAX_SCHEMA_CHARS:
        raise SchemaTooLarge(f"Invalid schema: {len(text)} characters, more than the {MAX_SCHEMA_CHARS} a "
                             "schema may have")


def load_json_schema(text: str) -> Any:
    """The JSON of a schema (Avro, JSON Schema), checked against the limits without recursion: its depth
    and the entries of each object and array. InvalidSchema when it is not JSON or passes a limit."""
    check_size(text)
    try:
        document = json.loads(text)
    except (TypeError, ValueError) as exc:
        raise InvalidSchema(f"Invalid schema: not JSON: {exc}") from None
    except RecursionError:  # json's scanner stops at the interpreter's recursion limit
        raise SchemaTooLarge(f"Invalid schema: nested deeper than {MAX_SCHEMA_DEPTH} levels") from None
    pending: list[tuple[Any, int]] = [(document, 1)]
    while pending:
        node, depth = pending.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > MAX_SCHEMA_DEPTH:
            raise SchemaTooLarge(f"Invalid schema: nested deeper than {MAX_SCHEMA_DEPTH} levels")
        if len(children) > MAX_SCHEMA_ENTRIES:
            raise SchemaTooLarge(f"Invalid schema: {len(children)} entries in one object or array (fields, "
                                 f"symbols, branches, ...), more than {MAX_SCHEMA_ENTRIES}")
        pending.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return document


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
