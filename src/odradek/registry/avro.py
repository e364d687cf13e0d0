"""Avro schemas for the registry: parsing, the identity of a schema, and compatibility between two schemas.

Parsing and validation are fastavro's (`fastavro.parse_schema`). Compatibility is our own implementation of
the schema resolution rules of the Avro specification ("Schema Resolution"): can a reader holding schema R
decode data written with schema W? The registry's compatibility levels are built on that one question
(`compatibility.py`).

References: a schema may use named types (records, enums, fixed) defined by the schemas its `references`
name; they are parsed first and their names are known while parsing the referring schema.
"""

from __future__ import annotations

import json
import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

import fastavro
from fastavro.schema import SchemaParseException, UnknownType

from odradek.registry.schema import InvalidSchema, Resolved, load_json_schema

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
NAMED = frozenset({"record", "error", "enum", "fixed"})
# Writer type -> reader types that can read it, besides itself (the specification's promotions).
PROMOTIONS: dict[str, frozenset[str]] = {
    "int": frozenset({"long", "float", "double"}),
    "long": frozenset({"float", "double"}),
    "float": frozenset({"double"}),
    "string": frozenset({"bytes"}),
    "bytes": frozenset({"string"}),
}


@dataclass(frozen=True)
class AvroSchema:
    """A parsed Avro schema: fastavro's expanded form, where every name is fully qualified and a named type
    is defined inline once and referenced by its full name afterwards; `names` maps each full name to its
    definition so that references can be followed (names of referenced schemas included);
    `named_schemas` is fastavro's own table of them, for schemas that reference this one."""

    schema_type: ClassVar[str] = "AVRO"
    parsed: Any
    names: dict[str, dict]
    named_schemas: dict[str, Any] = dataclasses.field(default_factory=dict, compare=False, repr=False)

    @property
    def identity(self) -> str:
        """What makes two registrations "the same schema": the parsed form as compact JSON with sorted keys.

        Whitespace, key order and namespace spelling do not matter; unlike Avro's Parsing Canonical Form,
        defaults and docs do, so registering a schema whose only change is a new default is a new version
        (as Confluent's registry does) rather than being mistaken for the old one."""
        return json.dumps(self.parsed, sort_keys=True, separators=(",", ":"))


def parse(text: str, references: Resolved = ()) -> AvroSchema:
    """Parse and validate schema text (JSON); InvalidSchema says why it is not a schema. `references` are
    the parsed schemas this one may name types from."""
    raw = load_json_schema(text)
    _check_fields(raw)
    names: dict[str, dict] = {}
    known: dict[str, Any] = {}
    for _, ref in references:
        if not isinstance(ref, AvroSchema):
            raise InvalidSchema("Invalid schema: an Avro schema can only reference Avro schemas")
        names.update(ref.names)
        known.update(ref.named_schemas)
    try:
        parsed = fastavro.parse_schema(raw, named_schemas=known, _write_hint=False)
    except (SchemaParseException, UnknownType, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise InvalidSchema(f"Invalid schema: {exc}") from None
    _collect_names(parsed, names)
    return AvroSchema(parsed, names, known)


def _check_fields(node: Any) -> None:
    """What fastavro lets through and the specification does not: a record without a "fields" list."""
    if isinstance(node, list):
        for branch in node:
            _check_fields(branch)
    elif isinstance(node, dict):
        kind = node.get("type")
        if kind in ("record", "error"):
            if not isinstance(node.get("fields"), list):
                raise InvalidSchema(f"Invalid schema: record {node.get('name')!r} has no fields list")
            for f in node["fields"]:
                if isinstance(f, dict):
                    _check_fields(f.get("type"))
        elif kind == "array":
            _check_fields(node.get("items"))
        elif kind == "map":
            _check_fields(node.get("values"))
        elif isinstance(kind, (dict, list)):
            _check_fields(kind)


def _collect_names(node: Any, names: dict[str, dict]) -> None:
    if isinstance(node, list):
        for branch in node:
            _collect_names(branch, names)
    elif isinstance(node, dict):
        kind = node.get("type")
        if kind in NAMED:
            names[node["name"]] = node
        if kind in ("record", "error"):
            for f in node["fields"]:
                _collect_names(f["type"], names)
        elif kind == "array":
            _collect_names(node["items"], names)
        elif kind == "map":
            _collect_names(node["values"], names)
        elif isinstance(kind, (dict, list)):  # {"type": {...}} wrapping
            _collect_names(kind, names)


def _resolve(node: Any, names: dict[str, dict]) -> Any:
    """Follow a reference (a full name) to its definition; unwrap {"type": "int", "logicalType": ...} and
    {"type": {...}} to the type itself (logical types do not take part in resolution)."""
    while True:
        if isinstance(node, str):
            if node in PRIMITIVES:
                return node
            return names[node]
        if isinstance(node, dict):
            kind = node.get("type")
            if kind in PRIMITIVES:
                return kind
            if isinstance(kind, str) and kind not in NAMED and kind not in ("array", "map"):
                node = kind  # a reference spelled {"type": "a.b.Name"}
                continue
            if isinstance(kind, (dict, list)):
                node = kind
                continue
        return node


def _kind(node: Any) -> str:
    if isinstance(node, str):
        return node
    if isinstance(node, list):
        return "union"
    kind = node["type"]
    return "record" if kind == "error" else kind


def _short(fullname: str) -> str:
    return fullname.rsplit(".", 1)[-1]


def _names_match(reader: dict, writer: dict) -> bool:
    """Named types resolve if their unqualified names agree, or the reader lists the writer's name among its
    aliases (the Java implementation also compares unqualified names, so moving a type to another namespace
    stays compatible)."""
    if _short(reader["name"]) == _short(writer["name"]):
        return True
    return any(_short(a) == _short(writer["name"]) for a in reader.get("aliases", ()))


class _Checker:
    def __init__(self, reader: AvroSchema, writer: AvroSchema) -> None:
        self.rnames = reader.names
        self.wnames = writer.names
        # pairs of named types already being compared: a recursive type is assumed compatible on the second
        # visit (if it is not, the first visit finds out)
        self.seen: set[tuple[str, str]] = set()

    def check(self, r: Any, w: Any, path: str) -> list[str]:
        r = _resolve(r, self.rnames)
        w = _resolve(w, self.wnames)
        rk, wk = _kind(r), _kind(w)
        if wk == "union":
            # every branch the writer may have used must be readable
            problems: list[str] = []
            for i, branch in enumerate(w):
                problems += self.check(r, branch, f"{path}/{i}")
            return problems
        if rk == "union":
            for branch in r:
                if not self.check(branch, w, path):
                    return []
            return [f"{path}: reader union lacks a branch for the writer's {_describe(w)}"]
        if rk != wk:
            if wk in PROMOTIONS and rk in PROMOTIONS[wk]:
                return []
            return [f"{path}: reader type {_describe(r)} cannot read writer type {_describe(w)}"]
        if rk in PRIMITIVES:
            return []
        if rk == "array":
            return self.check(r["items"], w["items"], f"{path}/items")
        if rk == "map":
            return self.check(r["values"], w["values"], f"{path}/values")
        if not _names_match(r, w):
            return [f"{path}: reader {rk} {r['name']} does not match writer {rk} {w['name']}"]
        if rk == "fixed":
            if r["size"] != w["size"]:
                return [f"{path}: fixed {r['name']} has size {r['size']}, the writer's has {w['size']}"]
            return []
        if rk == "enum":
            missing = [s for s in w["symbols"] if s not in r["symbols"]]
            if missing and "default" not in r:
                return [f"{path}: reader enum {r['name']} lacks symbols {missing} and has no default"]
            return []
        return self._record(r, w, path)

    def _record(self, r: dict, w: dict, path: str) -> list[str]:
        key = (r["name"], w["name"])
        if key in self.seen:
            return []
        self.seen.add(key)
        by_name = {f["name"]: f for f in w["fields"]}
        problems: list[str] = []
        for field in r["fields"]:
            candidates = [field["name"], *field.get("aliases", ())]
            wfield = next((by_name[n] for n in candidates if n in by_name), None)
            if wfield is None:
                if "default" not in field:
                    problems.append(f"{path}/{field['name']}: reader field {field['name']!r} is missing from the "
                                    f"writer's {w['name']} and has no default")
                continue
            problems += self.check(field["type"], wfield["type"], f"{path}/{field['name']}")
        return problems


def _describe(node: Any) -> str:
    if isinstance(node, str):
        return node
    if isinstance(node, list):
        return "union"
    return f"{_kind(node)} {node['name']}" if "name" in node else _kind(node)


def read_problems(reader: AvroSchema, writer: AvroSchema) -> list[str]:
    """Why a reader of `reader` cannot decode data written with `writer` (empty: it can)."""
    return _Checker(reader, writer).check(reader.parsed, writer.parsed, "")


def can_read(reader: AvroSchema, writer: AvroSchema) -> bool:
    return not read_problems(reader, writer)
