"""The registry's JSON Schema rules: parsing, identity, reader/writer compatibility (our rules modelled on
Confluent's), references, and the levels over them."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("jsonschema")

from odradek.registry import compatibility, errors, jsonschema_format as js  # noqa: E402
from odradek.registry.schema import InvalidSchema, Reference  # noqa: E402
from odradek.registry.state import State  # noqa: E402


def schema(obj: object, refs: tuple = ()) -> js.JsonSchema:
    return js.parse(json.dumps(obj), refs)


def obj(props: dict, required: tuple = (), closed: bool | None = None, **extra: object) -> js.JsonSchema:
    body: dict = {"type": "object", "properties": props, **extra}
    if required:
        body["required"] = list(required)
    if closed is not None:
        body["additionalProperties"] = not closed
    return schema(body)


def reads(reader: js.JsonSchema, writer: js.JsonSchema) -> bool:
    return not js.read_problems(reader, writer)


S, I, N = {"type": "string"}, {"type": "integer"}, {"type": "number"}


# -- parsing and identity ---------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    "not json", "[1, 2]", '"string"', '{"type": "strin"}', '{"type": "object", "properties": {"a": 3}}',
    '{"minimum": "zero"}', '{"$ref": "other.json"}',  # a $ref to no reference
])
def test_invalid_schemas_are_refused(text: str) -> None:
    with pytest.raises(InvalidSchema):
        js.parse(text)


def test_valid_schemas_and_identity() -> None:
    a = js.parse('{"type":"object","properties":{"a":{"type":"string"}}}')
    b = js.parse('{ "properties": { "a": { "type": "string" } }, "type": "object" }')
    assert a.identity == b.identity
    assert js.parse('{"type":"object","properties":{"a":{"type":"integer"}}}').identity != a.identity
    assert js.parse("true").identity == "true"
    js.parse('{"$schema": "https://json-schema.org/draft/2020-12/schema", "$defs": {"x": {"type": "string"}},'
             ' "$ref": "#/$defs/x"}')


# -- types ----------------------------------------------------------------------------------------------


def test_integer_widens_to_number_but_not_back() -> None:
    assert reads(schema(N), schema(I))
    assert not reads(schema(I), schema(N))


def test_type_changes_and_unions_of_types() -> None:
    assert not reads(schema(S), schema(I))
    assert reads(schema({"type": ["string", "null"]}), schema(S))
    assert not reads(schema(S), schema({"type": ["string", "null"]}))
    assert reads(schema({}), schema(S))                  # an unconstrained reader reads anything
    assert not reads(schema(S), schema({}))              # the writer may have written anything
    assert reads(schema(S), schema(False))               # the writer wrote nothing
    assert not reads(schema(False), schema(S))


def test_enum_values_may_grow_not_shrink() -> None:
    ab, abc = schema({"type": "string", "enum": ["a", "b"]}), schema({"type": "string", "enum": ["a", "b", "c"]})
    assert reads(abc, ab) and not reads(ab, abc)
    assert reads(schema(S), ab)                          # dropping the enum widens
    assert not reads(ab, schema(S))
    assert reads(ab, schema({"const": "a"}))
    assert not reads(schema(I), ab)                      # the values are not integers


def test_numeric_and_string_bounds() -> None:
    narrow = schema({"type": "integer", "minimum": 0, "maximum": 10})
    wide = schema({"type": "integer", "minimum": -5, "maximum": 100})
    assert reads(wide, narrow) and not reads(narrow, wide)
    assert not reads(narrow, schema(I))                  # the writer had no bounds at all
    assert reads(schema({"type": "integer", "multipleOf": 2}), schema({"type": "integer", "multipleOf": 4}))
    assert not reads(schema({"type": "integer", "multipleOf": 4}), schema({"type": "integer", "multipleOf": 2}))
    short = schema({"type": "string", "maxLength": 5})
    assert reads(schema(S), short) and not reads(short, schema(S))
    assert not reads(schema({"type": "string", "pattern": "^a"}), schema(S))
    assert reads(schema(S), schema({"type": "string", "pattern": "^a"}))


def test_arrays() -> None:
    ints, nums = schema({"type": "array", "items": I}), schema({"type": "array", "items": N})
    assert reads(nums, ints) and not reads(ints, nums)
    assert not reads(schema({"type": "array", "items": I, "maxItems": 3}), ints)
    assert not reads(schema({"type": "array", "items": I, "uniqueItems": True}), ints)
    pair = schema({"type": "array", "items": [S, I], "additionalItems": False})
    assert reads(schema({"type": "array", "items": [S, N]}), pair)
    assert not reads(schema({"type": "array", "items": [S, S]}), pair)


# -- objects and content models ---------------------------------------------------------------------------


def test_adding_a_property_depends_on_the_writers_content_model() -> None:
    # BACKWARD: reader = new, writer = old
    assert not reads(obj({"a": S, "b": I}), obj({"a": S}))               # old data may hold any b
    assert reads(obj({"a": S, "b": I}), obj({"a": S}, closed=True))      # old data never has b
    assert reads(obj({"a": S, "b": {}}), obj({"a": S}))                  # an unconstrained b is fine
    partial = obj({"a": S}, additionalProperties=I)
    assert reads(obj({"a": S, "b": N}), partial)                         # b read as the old additional schema
    assert not reads(obj({"a": S, "b": S}), partial)


def test_removing_a_property_depends_on_the_readers_content_model() -> None:
    assert reads(obj({"a": S}), obj({"a": S, "b": I}))                   # open reader ignores b
    assert not reads(obj({"a": S}, closed=True), obj({"a": S, "b": I}, closed=True))
    assert reads(obj({"a": S}, additionalProperties=N), obj({"a": S, "b": I}, closed=True))
    assert not reads(obj({"a": S}, closed=True), obj({"a": S}))          # closing an open model


def test_required_properties() -> None:
    assert not reads(obj({"a": S, "b": I}, required=("a", "b")), obj({"a": S, "b": I}, required=("a",)))
    assert reads(obj({"a": S, "b": I}, required=("a",)), obj({"a": S, "b": I}, required=("a", "b")))


def test_nested_property_type_change_is_found_with_its_path() -> None:
    old = obj({"address": {"type": "object", "properties": {"zip": S}}})
    new = obj({"address": {"type": "object", "properties": {"zip": I}}})
    problems = js.read_problems(new, old)
    assert problems and "#/properties/address/properties/zip" in problems[0]


# -- combined schemas and $ref --------------------------------------------------------------------------------


def test_one_of_and_any_of_branches_may_be_added_not_removed() -> None:
    two, three = schema({"oneOf": [S, I]}), schema({"oneOf": [S, I, {"type": "boolean"}]})
    assert reads(three, two) and not reads(two, three)
    assert reads(schema({"anyOf": [S, N]}), schema({"anyOf": [S, I]}))
    assert reads(schema({"anyOf": [S, I]}), schema(S))
    assert not reads(schema(S), schema({"anyOf": [S, I]}))


def test_all_of() -> None:
    both = schema({"allOf": [{"type": "integer"}, {"minimum": 0}]})
    assert not reads(both, schema(I))                    # the reader's minimum is new
    assert reads(schema(I), both)                         # one part of the writer fits the reader


def test_refs_are_followed_locally_and_recursively() -> None:
    tree = {"type": "object", "properties": {"v": {"$ref": "#/definitions/v"},
                                             "kids": {"type": "array", "items": {"$ref": "#"}}},
            "definitions": {"v": I}}
    wider = json.loads(json.dumps(tree))
    wider["definitions"]["v"] = N
    assert reads(schema(wider), schema(tree))
    assert not reads(schema(tree), schema(wider))


def test_references_name_other_documents() -> None:
    address = schema({"type": "object", "properties": {"zip": S}})
    customer = schema({"type": "object", "properties": {"address": {"$ref": "address.json"}}},
                      (("address.json", address),))
    assert customer.references == {"address.json": address.document}
    changed = schema({"type": "object", "properties": {"zip": I}})
    customer2 = schema({"type": "object", "properties": {"address": {"$ref": "address.json"}}},
                       (("address.json", changed),))
    assert not reads(customer2, customer)


# -- levels and the state -------------------------------------------------------------------------------------


def test_levels_over_json_schemas() -> None:
    v1 = obj({"a": S}, closed=True)
    v2 = obj({"a": S, "b": I}, closed=True)      # added to a closed model: old data never had b
    assert not compatibility.problems("BACKWARD", v2, [v1])
    assert compatibility.problems("FORWARD", v2, [v1])  # v1 (closed) refuses new data with b
    assert compatibility.problems("FULL", v2, [v1])
    assert not compatibility.problems("NONE", schema(S), [v1])


def test_state_registers_json_with_references_and_guards_them() -> None:
    s = State()

    def apply(records: list) -> None:
        for key, value in records:
            s.apply(key, value)

    recs, addr_id = s.plan_register("address", json.dumps({"type": "object", "properties": {"zip": S}}), "JSON")
    apply(recs)
    s_refs = (Reference("address.json", "address", 1),)
    customer = json.dumps({"type": "object", "properties": {"address": {"$ref": "address.json"}}})
    with pytest.raises(errors.RegistryError) as exc:
        s.plan_register("customer", customer, "JSON", references=())  # the $ref names no reference
    assert exc.value.code == 42201
    with pytest.raises(errors.RegistryError) as exc:
        s.plan_register("customer", customer, "JSON", references=(Reference("address.json", "address", 7),))
    assert exc.value.code == 42201
    recs, cust_id = s.plan_register("customer", customer, "JSON", references=s_refs)
    apply(recs)
    assert cust_id == addr_id + 1
    assert s.referenced_by("address", "1") == [cust_id]
    assert s.get_version("customer", "1").body()["references"] == [
        {"name": "address.json", "subject": "address", "version": 1}]
    # the same text with its references is the same schema; without them it would not parse
    assert s.plan_register("customer", customer, "JSON", references=s_refs) == ([], cust_id)
    assert s.lookup("customer", customer, "JSON", references=s_refs).version == 1
    with pytest.raises(errors.RegistryError) as exc:
        s.plan_delete_version("address", "1", permanent=False)
    assert exc.value.code == 42206
    with pytest.raises(errors.RegistryError) as exc:
        s.plan_delete_subject("address", permanent=False)
    assert exc.value.code == 42206
    apply(s.plan_delete_subject("customer", permanent=False)[0])
    apply(s.plan_delete_version("address", "1", permanent=False)[0])   # soft-deleted referrers do not hold it
    with pytest.raises(errors.RegistryError) as exc:
        s.plan_delete_version("address", "1", permanent=True)          # ... but its text still needs it
    assert exc.value.code == 42206
    # a type change between AVRO and JSON is refused under BACKWARD
    recs, _ = s.plan_register("mixed", '"string"', "AVRO")
    apply(recs)
    with pytest.raises(errors.RegistryError) as exc:
        s.plan_register("mixed", json.dumps(S), "JSON")
    assert exc.value.code == 409
