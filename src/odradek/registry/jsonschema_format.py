"""JSON Schema (`schemaType: "JSON"`) for the registry: parsing, identity, and compatibility.

Parsing: the text must be JSON (an object or a boolean) that passes its draft's meta-schema (the `jsonschema`
library's `check_schema`; draft 7 when `$schema` does not say). Every `$ref` must point into the document
itself (`#...`) or at the name of one of the registration's references (optionally followed by `#fragment`).
Identity: the parsed document as compact JSON with sorted keys.

Compatibility is our own set of rules in the spirit of Confluent's documented JSON Schema rules, phrased as
one question: does every document the writer's schema accepts also pass the reader's schema? The checks
made:

* `true`/`{}` accepts everything and `false` nothing; a reader that constrains what the writer left
  unconstrained is a problem.
* `type`: every writer type must be a reader type; `integer` is read by `number` (widening), not the other
  way round. Without `type`, the writer is taken to accept any type (unless it has `enum`/`const`).
* `enum`/`const`: the writer's values must all be allowed by the reader (narrowing is a problem, widening
  is not).
* Numbers: `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum` (numeric form) may only widen in the
  reader; `multipleOf` of the reader must divide the writer's. Strings: `minLength`/`maxLength` may only
  widen; `pattern` and `format` may only be dropped or kept. Arrays: `items` (one schema, or a tuple with
  `additionalItems`), `minItems`/`maxItems`, `uniqueItems` may only be relaxed.
* Objects, by content model: a property of the writer's is read by the reader's property of that name, or,
  when the reader has none, by the reader's `additionalProperties` (false: "removed from a closed content
  model" is a problem). A property only the reader has is fine when the writer was closed
  (`additionalProperties: false`), must read the writer's `additionalProperties` schema when it was
  partially open, and is a problem when the writer was open (unless the reader's property accepts anything):
  old data may hold anything under that name. `required` may not gain names; `minProperties`/`maxProperties`
  may only widen; `additionalProperties` may not narrow.
* Combined schemas: each `anyOf`/`oneOf` branch of the writer must be read by the reader; the writer is read
  by a reader's `anyOf`/`oneOf` when some branch reads it (so adding branches is fine and removing one is a
  problem); every `allOf` part of the reader must read the writer; a writer's `allOf` is read when one of
  its parts is.
* `$ref`: followed, within the document and into referenced schemas, with a guard for recursion.

Not done: `not`, `if`/`then`/`else`, `patternProperties`, `dependencies`/`dependentRequired`/
`dependentSchemas`, `propertyNames`, `contains`, `unevaluated*` only need to be equal in both schemas;
`oneOf` exclusivity is not checked (a value valid for two branches); a writer's `allOf` whose parts only
together fit the reader is reported as a problem (false positive); draft-4 boolean
`exclusiveMinimum`/`exclusiveMaximum` are compared for equality only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, ClassVar, Iterator
from urllib.parse import unquote

import jsonschema
from jsonschema.exceptions import SchemaError

from odradek.registry.schema import InvalidSchema, Resolved, load_json_schema

# keywords that only need to be equal in reader and writer (their compatibility is not worked out)
EQUAL_ONLY = ("not", "if", "then", "else", "patternProperties", "dependencies", "dependentRequired",
              "dependentSchemas", "propertyNames", "contains", "unevaluatedProperties", "unevaluatedItems")
TYPES = frozenset({"null", "boolean", "object", "array", "number", "integer", "string"})


@dataclass(frozen=True)
class JsonSchema:
    """A parsed JSON Schema document and the documents its references name (name -> document)."""

    schema_type: ClassVar[str] = "JSON"
    document: Any
    references: dict[str, Any]

    @property
    def identity(self) -> str:
        return json.dumps(self.document, sort_keys=True, separators=(",", ":"))


def parse(text: str, references: Resolved = ()) -> JsonSchema:
    """Parse and validate JSON Schema text; InvalidSchema says why it is not one."""
    document = load_json_schema(text)
    if not isinstance(document, (dict, bool)):
        raise InvalidSchema("Invalid schema: a JSON Schema is an object or a boolean")
    validator = jsonschema.validators.validator_for(document, default=jsonschema.Draft7Validator)
    try:
        validator.check_schema(document)
    except SchemaError as exc:
        raise InvalidSchema(f"Invalid schema: {exc.message} at {'/'.join(map(str, exc.path)) or 'the root'}") \
            from None
    known: dict[str, Any] = {}
    for name, ref in references:
        if not isinstance(ref, JsonSchema):
            raise InvalidSchema("Invalid schema: a JSON schema can only reference JSON schemas")
        known.update(ref.references)
        known[name] = ref.document
    own_id = document.get("$id") if isinstance(document, dict) else None
    for target in _refs(document):
        base = target.split("#", 1)[0]
        if base and base not in known and base != own_id:
            raise InvalidSchema(f"Invalid schema: $ref {target!r} names no reference of the schema")
    return JsonSchema(document, known)


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                yield value
            elif key not in ("enum", "const", "default", "examples"):
                yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


def read_problems(reader: JsonSchema, writer: JsonSchema) -> list[str]:
    """Why a document valid for `writer` may be refused by `reader` (empty: every one passes)."""
    return _Checker(reader, writer).check(reader.document, writer.document, "#")


class _Checker:
    def __init__(self, reader: JsonSchema, writer: JsonSchema) -> None:
        self.reader = reader
        self.writer = writer
        # pairs of schema nodes already being compared: recursion through $ref stops on the second visit
        self.seen: set[tuple[int, int]] = set()

    def _deref(self, node: Any, side: JsonSchema) -> Any:
        for _ in range(64):  # a chain of $ref longer than this is taken as a cycle
            if not (isinstance(node, dict) and isinstance(node.get("$ref"), str)):
                return node
            base, _, fragment = node["$ref"].partition("#")
            root = side.references.get(base, side.document) if base else side.document
            node = _pointer(root, fragment)
        return node

    def check(self, r: Any, w: Any, path: str) -> list[str]:
        r, w = self._deref(r, self.reader), self._deref(w, self.writer)
        key = (id(r), id(w))
        if key in self.seen:
            return []
        self.seen.add(key)
        try:
            return self._check(_as_dict(r), _as_dict(w), path)
        finally:
            self.seen.discard(key)

    def _check(self, r: dict | None, w: dict | None, path: str) -> list[str]:
        if w is None:  # the writer accepts nothing
            return []
        if r is None:
            return [f"{path}: the reader accepts nothing"]
        if not r:
            return []
        for word in ("anyOf", "oneOf"):
            if isinstance(w.get(word), list):
                rest = {k: v for k, v in w.items() if k != word}
                found: list[str] = []
                for i, branch in enumerate(w[word]):
                    found += self.check(r, _merge(rest, self._deref(branch, self.writer)), f"{path}/{word}/{i}")
                return found
        if isinstance(r.get("allOf"), list):
            rest = {k: v for k, v in r.items() if k != "allOf"}
            found = self.check(rest, w, path) if rest else []
            for i, part in enumerate(r["allOf"]):
                found += self.check(part, w, f"{path}/allOf/{i}")
            return found
        for word in ("anyOf", "oneOf"):
            if isinstance(r.get(word), list):
                rest = {k: v for k, v in r.items() if k != word}
                if rest and (found := self.check(rest, w, path)):
                    return found
                if any(not self.check(_merge(rest, self._deref(b, self.reader)), w, path) for b in r[word]):
                    return []
                return [f"{path}: no branch of the reader's {word} accepts the writer's schema"]
        if isinstance(w.get("allOf"), list):
            rest = {k: v for k, v in w.items() if k != "allOf"}
            parts = [_merge(rest, self._deref(p, self.writer)) for p in w["allOf"]]
            if any(not self.check(r, p, path) for p in parts):
                return []
            return [f"{path}: no part of the writer's allOf fits the reader's schema"]
        return self._plain(r, w, path)

    def _plain(self, r: dict, w: dict, path: str) -> list[str]:
        found: list[str] = []
        for word in EQUAL_ONLY:
            if word in r and r.get(word) != w.get(word):
                found.append(f"{path}: {word} differs (only an unchanged {word} is accepted)")
        values = _values(w)
        if values is not None:
            allowed = _values(r)
            for v in values:
                if allowed is not None and v not in allowed:
                    found.append(f"{path}: the reader does not allow the writer's value {v!r}")
                elif "type" in r and not any(_is_type(v, t) for t in _types(r)):
                    found.append(f"{path}: the writer's value {v!r} is not of the reader's type")
            return found
        if _values(r) is not None:
            return found + [f"{path}: the reader allows only some values, the writer any"]
        rtypes, wtypes = _types(r), _types(w)
        if "type" in r:
            if "type" not in w:
                return found + [f"{path}: the reader restricts the type to {sorted(rtypes)}, the writer does not"]
            for t in sorted(wtypes):
                if t not in rtypes and not (t == "integer" and "number" in rtypes):
                    found.append(f"{path}: the writer's type {t} is not one of the reader's {sorted(rtypes)}")
        both = wtypes & (rtypes | ({"integer"} if "number" in rtypes else set()))
        if both & {"number", "integer"}:
            found += _numbers(r, w, path)
        if "string" in both:
            found += _bounds(r, w, path, "minLength", "maxLength")
            for word in ("pattern", "format"):
                if word in r and r[word] != w.get(word):
                    found.append(f"{path}: the reader's {word} {r[word]!r} is not the writer's {w.get(word)!r}")
        if "array" in both:
            found += self._array(r, w, path)
        if "object" in both:
            found += self._object(r, w, path)
        return found

    def _array(self, r: dict, w: dict, path: str) -> list[str]:
        found = _bounds(r, w, path, "minItems", "maxItems")
        if r.get("uniqueItems") and not w.get("uniqueItems"):
            found.append(f"{path}: the reader requires unique items, the writer does not")
        ritems, witems = r.get("items", True), w.get("items", True)
        if isinstance(ritems, list) or isinstance(witems, list):
            rlist = ritems if isinstance(ritems, list) else []
            wlist = witems if isinstance(witems, list) else []
            rmore = r.get("additionalItems", True) if isinstance(ritems, list) else ritems
            wmore = w.get("additionalItems", True) if isinstance(witems, list) else witems
            for i in range(max(len(rlist), len(wlist))):
                ri = rlist[i] if i < len(rlist) else rmore
                wi = wlist[i] if i < len(wlist) else wmore
                found += self.check(ri, wi, f"{path}/items/{i}")
            return found + self.check(rmore, wmore, f"{path}/additionalItems")
        return found + self.check(ritems, witems, f"{path}/items")

    def _object(self, r: dict, w: dict, path: str) -> list[str]:
        found = _bounds(r, w, path, "minProperties", "maxProperties")
        rprops, wprops = r.get("properties", {}), w.get("properties", {})
        radd, wadd = r.get("additionalProperties", True), w.get("additionalProperties", True)
        for name, wprop in wprops.items():
            where = f"{path}/properties/{name}"
            if name in rprops:
                found += self.check(rprops[name], wprop, where)
            elif radd is False:
                found.append(f"{where}: property removed from a closed content model")
            else:
                found += self.check(radd, wprop, where)
        for name, rprop in rprops.items():
            if name in wprops or wadd is False:
                continue
            where = f"{path}/properties/{name}"
            if wadd is True or wadd == {}:
                if self.check(rprop, True, where):
                    found.append(f"{where}: property added to an open content model")
            else:
                found += self.check(rprop, wadd, where)
        added = sorted(set(r.get("required", ())) - set(w.get("required", ())))
        if added:
            found.append(f"{path}: the reader requires {added}, the writer does not")
        return found + self.check(radd, wadd, f"{path}/additionalProperties")


def _as_dict(node: Any) -> dict | None:
    """A schema as a dict of constraints; None for `false` (nothing is valid)."""
    if node is True:
        return {}
    if node is False:
        return None
    return node if isinstance(node, dict) else {}


def _merge(rest: dict, branch: Any) -> Any:
    if not rest:
        return branch
    if not isinstance(branch, dict):
        return branch if branch is False else rest
    merged = {**rest, **branch}
    if "properties" in rest and "properties" in branch:
        merged["properties"] = {**rest["properties"], **branch["properties"]}
    if "required" in rest and "required" in branch:
        merged["required"] = sorted(set(rest["required"]) | set(branch["required"]))
    return merged


def _pointer(root: Any, fragment: str) -> Any:
    node = root
    for part in [p for p in fragment.split("/") if p]:
        part = unquote(part).replace("~1", "/").replace("~0", "~")
        if isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            return True  # an unresolvable pointer constrains nothing we can compare
    return node


def _types(node: dict) -> set[str]:
    t = node.get("type")
    if t is None:
        return set(TYPES)
    return {t} if isinstance(t, str) else set(t)


def _values(node: dict) -> list[Any] | None:
    if "const" in node:
        return [node["const"]]
    if isinstance(node.get("enum"), list):
        return node["enum"]
    return None


def _is_type(value: Any, t: str) -> bool:
    kinds = {"null": value is None, "boolean": isinstance(value, bool), "object": isinstance(value, dict),
             "array": isinstance(value, list), "string": isinstance(value, str),
             "number": isinstance(value, (int, float)) and not isinstance(value, bool),
             "integer": (isinstance(value, int) and not isinstance(value, bool))
             or (isinstance(value, float) and value.is_integer())}
    return kinds.get(t, False)


def _bounds(r: dict, w: dict, path: str, low: str, high: str) -> list[str]:
    """A reader's lower bound may not be above the writer's, its upper bound not below (a bound the writer
    lacks is unbounded)."""
    found: list[str] = []
    if isinstance(r.get(low), (int, float)) and not isinstance(r.get(low), bool):
        if not isinstance(w.get(low), (int, float)) or w[low] < r[low]:
            found.append(f"{path}: the reader's {low} {r[low]} narrows the writer's {w.get(low)}")
    if isinstance(r.get(high), (int, float)) and not isinstance(r.get(high), bool):
        if not isinstance(w.get(high), (int, float)) or w[high] > r[high]:
            found.append(f"{path}: the reader's {high} {r[high]} narrows the writer's {w.get(high)}")
    return found


def _numbers(r: dict, w: dict, path: str) -> list[str]:
    found = _bounds(r, w, path, "minimum", "maximum") + _bounds(r, w, path, "exclusiveMinimum", "exclusiveMaximum")
    for word in ("exclusiveMinimum", "exclusiveMaximum"):
        if isinstance(r.get(word), bool) and r[word] != w.get(word):
            found.append(f"{path}: {word} differs")
    rm, wm = r.get("multipleOf"), w.get("multipleOf")
    if isinstance(rm, (int, float)) and rm > 0:
        if not isinstance(wm, (int, float)) or (wm / rm) != int(wm / rm):
            found.append(f"{path}: the reader's multipleOf {rm} does not divide the writer's {wm}")
    return found
