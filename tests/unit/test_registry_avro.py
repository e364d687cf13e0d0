"""The registry's Avro rules: parsing and identity, reader/writer resolution (the Avro specification's
"Schema Resolution"), and the compatibility levels built on it."""

from __future__ import annotations

import json

import pytest

from odradek.registry import avro, compatibility, errors
from odradek.registry.state import State, schema_key, version_value


def schema(obj: object) -> avro.AvroSchema:
    return avro.parse(json.dumps(obj))


def record(*fields: dict, name: str = "R", **extra: object) -> avro.AvroSchema:
    return schema({"type": "record", "name": name, "fields": list(fields), **extra})


def f(name: str, type_: object, **extra: object) -> dict:
    return {"name": name, "type": type_, **extra}


def reads(reader: avro.AvroSchema, writer: avro.AvroSchema) -> bool:
    return avro.can_read(reader, writer)


# -- parsing and identity ---------------------------------------------------------------------------------


def test_invalid_schemas_are_refused() -> None:
    for text in ("not json", '"nosuchtype"', '{"type": "record", "name": "R"}',
                 json.dumps({"type": "record", "name": "R", "fields": [f("a", "int", default="x")]})):
        with pytest.raises(avro.InvalidSchema):
            avro.parse(text)


def test_identity_ignores_layout_and_namespace_spelling_but_not_defaults() -> None:
    a = avro.parse('{"type":"record","name":"n.R","fields":[{"name":"a","type":"int"}]}')
    b = avro.parse('{ "fields": [ {"type": "int", "name": "a"} ], "namespace": "n", "name": "R", "type": "record" }')
    assert a.identity == b.identity
    c = record(f("a", "int", default=1), name="n.R")
    assert c.identity != a.identity


# -- primitives and promotions ----------------------------------------------------------------------------


@pytest.mark.parametrize("writer,reader", [
    ("int", "long"), ("int", "float"), ("int", "double"), ("long", "float"), ("long", "double"),
    ("float", "double"), ("string", "bytes"), ("bytes", "string"), ("null", "null"), ("boolean", "boolean"),
])
def test_promotions_are_readable(writer: str, reader: str) -> None:
    assert reads(schema(reader), schema(writer))


@pytest.mark.parametrize("writer,reader", [
    ("long", "int"), ("double", "float"), ("float", "long"), ("string", "int"), ("boolean", "int"),
    ("null", "string"),
])
def test_narrowing_and_unrelated_types_are_not(writer: str, reader: str) -> None:
    assert not reads(schema(reader), schema(writer))


def test_logical_types_resolve_as_their_underlying_type() -> None:
    assert reads(schema({"type": "long", "logicalType": "timestamp-millis"}), schema("int"))
    assert reads(schema("long"), schema({"type": "int", "logicalType": "date"}))


# -- records ----------------------------------------------------------------------------------------------


def test_added_field_needs_a_default_for_the_new_reader() -> None:
    old = record(f("a", "int"))
    assert reads(record(f("a", "int"), f("b", "string", default="x")), old)
    problems = avro.read_problems(record(f("a", "int"), f("b", "string")), old)
    assert problems and "'b'" in problems[0]


def test_removed_field_is_ignored_by_the_reader() -> None:
    assert reads(record(f("a", "int")), record(f("a", "int"), f("b", "string")))


def test_fields_match_by_name_not_position_and_types_resolve() -> None:
    writer = record(f("a", "int"), f("b", "string"))
    assert reads(record(f("b", "bytes"), f("a", "long")), writer)
    assert not reads(record(f("b", "int"), f("a", "long")), writer)


def test_field_alias_matches_a_renamed_field() -> None:
    writer = record(f("old", "int"))
    assert reads(record(f("new", "int", aliases=["old"])), writer)
    assert not reads(record(f("new", "int")), writer)


def test_record_names_must_match_unless_aliased() -> None:
    writer = record(f("a", "int"), name="W")
    assert not reads(record(f("a", "int"), name="R"), writer)
    assert reads(record(f("a", "int"), name="R", aliases=["W"]), writer)
    # a namespace move keeps the unqualified name, and stays readable
    assert reads(record(f("a", "int"), name="x.W"), writer)


def test_nested_records_are_checked() -> None:
    inner_old = {"type": "record", "name": "In", "fields": [f("x", "int")]}
    inner_new = {"type": "record", "name": "In", "fields": [f("x", "int"), f("y", "int")]}
    assert not reads(record(f("in", inner_new)), record(f("in", inner_old)))
    assert reads(record(f("in", inner_old)), record(f("in", inner_new)))


def test_recursive_types_terminate() -> None:
    node = {"type": "record", "name": "Node", "fields": [f("v", "int"), f("next", ["null", "Node"], default=None)]}
    node2 = {"type": "record", "name": "Node",
             "fields": [f("v", "long"), f("next", ["null", "Node"], default=None), f("w", "int", default=0)]}
    assert reads(schema(node2), schema(node))
    assert not reads(schema(node), schema(node2))


def test_named_type_references_are_followed() -> None:
    e = {"type": "enum", "name": "E", "symbols": ["A", "B"]}
    writer = record(f("first", e), f("second", "E"))
    reader = record(f("first", {"type": "enum", "name": "E", "symbols": ["A"]}), f("second", "E"))
    assert not reads(reader, writer)  # the reference resolves to the enum that lacks B
    assert reads(writer, reader)


# -- enums, fixed, arrays, maps -----------------------------------------------------------------------------


def test_enum_reader_must_know_every_writer_symbol_or_have_a_default() -> None:
    ab = schema({"type": "enum", "name": "E", "symbols": ["A", "B"]})
    abc = schema({"type": "enum", "name": "E", "symbols": ["A", "B", "C"]})
    assert reads(abc, ab)
    assert not reads(ab, abc)
    ab_default = schema({"type": "enum", "name": "E", "symbols": ["A", "B"], "default": "A"})
    assert reads(ab_default, abc)


def test_fixed_needs_same_name_and_size() -> None:
    four = schema({"type": "fixed", "name": "F", "size": 4})
    assert reads(schema({"type": "fixed", "name": "F", "size": 4}), four)
    assert not reads(schema({"type": "fixed", "name": "F", "size": 8}), four)
    assert not reads(schema({"type": "fixed", "name": "G", "size": 4}), four)


def test_arrays_and_maps_resolve_their_items_and_values() -> None:
    assert reads(schema({"type": "array", "items": "long"}), schema({"type": "array", "items": "int"}))
    assert not reads(schema({"type": "array", "items": "int"}), schema({"type": "array", "items": "long"}))
    assert reads(schema({"type": "map", "values": "double"}), schema({"type": "map", "values": "float"}))
    assert not reads(schema({"type": "map", "values": "int"}), schema({"type": "array", "items": "int"}))


# -- unions ---------------------------------------------------------------------------------------------


def test_unions() -> None:
    # a non-union writer: some reader branch must read it
    assert reads(schema(["null", "long"]), schema("int"))
    assert not reads(schema(["null", "string"]), schema("int"))
    # a union writer: every branch must be readable
    assert reads(schema(["null", "long", "string"]), schema(["null", "int"]))
    assert not reads(schema(["null", "int"]), schema(["null", "int", "string"]))
    # a union writer and a non-union reader: fine only if every branch is readable by it
    assert reads(schema("long"), schema(["int", "long"]))
    assert not reads(schema("long"), schema(["null", "long"]))


# -- levels ---------------------------------------------------------------------------------------------


V1 = record(f("a", "int"))
V2 = record(f("a", "int"), f("b", "int", default=0))       # adds a field with a default
V3 = record(f("b", "int", default=0))                      # then drops a (no default for it)


def test_backward_forward_full() -> None:
    no_default = record(f("a", "int"), f("c", "int"))
    assert compatibility.problems("BACKWARD", no_default, [V1])
    assert not compatibility.problems("FORWARD", no_default, [V1])   # V1 ignores the added field
    assert not compatibility.problems("BACKWARD", V2, [V1])
    assert not compatibility.problems("FULL", V2, [V1])
    assert compatibility.problems("FULL", no_default, [V1])
    assert not compatibility.problems("NONE", schema("string"), [V1])
    assert not compatibility.problems("BACKWARD", V1, [])


def test_transitive_levels_compare_with_every_version() -> None:
    v4 = record(f("a", "int"), f("b", "int", default=0))
    # V3 reads V1's and V2's data (b has a default; a is ignored), but V2's reader needs a, which V3 lacks
    assert not compatibility.problems("BACKWARD", V3, [V1, V2])
    assert not compatibility.problems("BACKWARD_TRANSITIVE", V3, [V1, V2])
    assert compatibility.problems("FORWARD", V3, [V1, V2])  # V2 needs a, which V3 data lacks
    # a reader that needs a field only the last version has
    needs_b = record(f("a", "int"), f("b", "int"))
    assert not compatibility.problems("BACKWARD", needs_b, [V1, v4])
    assert compatibility.problems("BACKWARD_TRANSITIVE", needs_b, [V1, v4])


# -- the state's checks (no Kafka: records are applied directly) ----------------------------------------------


def apply(state: State, records: list) -> None:
    for key, value in records:
        state.apply(key, value)


def test_state_register_ids_versions_and_deletes() -> None:
    s = State()
    text1, text2 = json.dumps(V1.parsed), json.dumps(V2.parsed)
    recs, id1 = s.plan_register("a", text1, "AVRO")
    apply(s, recs)
    assert (id1, s.plan_register("a", text1, "AVRO")) == (1, ([], 1))  # same schema: same id, no record
    recs, id_b = s.plan_register("b", text1, "AVRO")                    # same schema elsewhere: same id
    apply(s, recs)
    assert id_b == 1 and s.version_numbers("b") == [1]
    with pytest.raises(errors.RegistryError) as exc:
        s.plan_register("a", json.dumps(record(f("a", "int"), f("c", "int")).parsed), "AVRO")
    assert (exc.value.status, exc.value.code) == (409, 409)
    recs, id2 = s.plan_register("a", text2, "AVRO")
    apply(s, recs)
    assert id2 == 2 and s.version_numbers("a") == [1, 2]
    # permanent only after soft
    with pytest.raises(errors.RegistryError) as exc:
        s.plan_delete_version("a", "2", permanent=True)
    assert exc.value.code == 40407
    recs, v = s.plan_delete_version("a", "latest", permanent=False)
    apply(s, recs)
    assert v == 2 and s.version_numbers("a") == [1] and s.version_numbers("a", deleted=True) == [1, 2]
    apply(s, s.plan_delete_version("a", "2", permanent=True)[0])
    with pytest.raises(errors.RegistryError) as exc:
        s.schema_by_id(2)
    assert exc.value.code == 40403
    # a purged id is never handed out again
    recs, id3 = s.plan_register("c", json.dumps(schema("string").parsed), "AVRO")
    assert id3 == 3
    with pytest.raises(errors.RegistryError) as exc:
        s.get_version("a", "0")
    assert exc.value.code == 42202


def test_state_modes_and_configs() -> None:
    s = State()
    apply(s, s.plan_mode("readonly", force=False))
    with pytest.raises(errors.RegistryError) as exc:
        s.plan_register("a", '"string"', "AVRO")
    assert exc.value.code == 42205
    with pytest.raises(errors.RegistryError) as exc:
        s.plan_mode("SIDEWAYS", force=False)
    assert exc.value.code == 42204
    with pytest.raises(errors.RegistryError) as exc:
        s.plan_config("a", "SIDEWAYS")
    assert exc.value.code == 42203
    apply(s, s.plan_config("a", "full"))
    assert s.level("a") == "FULL" and s.level("b") == "BACKWARD"
    with pytest.raises(errors.RegistryError) as exc:
        s.subject_level("b", default_to_global=False)
    assert exc.value.code == 40408
    apply(s, s.plan_mode("READWRITE", force=False))
    with pytest.raises(errors.RegistryError) as exc:
        s.plan_register("a", '"string"', "PROTOBUF")
    assert exc.value.code == 42201


# -- references ---------------------------------------------------------------------------------------------


def test_references_provide_named_types() -> None:
    address = schema({"type": "record", "name": "Address", "namespace": "shop", "fields": [f("zip", "string")]})
    user_text = json.dumps({"type": "record", "name": "User", "namespace": "shop",
                            "fields": [f("name", "string"), f("home", "shop.Address")]})
    with pytest.raises(avro.InvalidSchema):
        avro.parse(user_text)                        # shop.Address is unknown without the reference
    user = avro.parse(user_text, (("shop.Address", address),))
    assert "shop.Address" in user.names
    assert user.parsed["fields"][1]["type"] == "shop.Address"  # named, not copied in: identity stays small
    # resolution follows the name into the referenced schema
    zip_int = schema({"type": "record", "name": "Address", "namespace": "shop", "fields": [f("zip", "int")]})
    other = avro.parse(user_text, (("shop.Address", zip_int),))
    assert not reads(other, user)
    assert reads(user, avro.parse(user_text, (("shop.Address", address),)))


def test_state_resolves_avro_references() -> None:
    from odradek.registry.schema import Reference

    s = State()
    address = json.dumps({"type": "record", "name": "Address", "fields": [f("zip", "string")]})
    apply(s, s.plan_register("address", address, "AVRO")[0])
    user = json.dumps({"type": "record", "name": "User", "fields": [f("home", "Address")]})
    with pytest.raises(errors.RegistryError) as exc:
        s.plan_register("user", user, "AVRO")
    assert exc.value.code == 42201
    recs, user_id = s.plan_register("user", user, "AVRO", references=(Reference("Address", "address", 1),))
    apply(s, recs)
    assert user_id == 2 and s.referenced_by("address", "latest") == [2]
    # a fresh state replaying the same records resolves the reference again
    replay = State()
    for subject in ("address", "user"):
        for v in s._versions(subject):
            replay.apply(schema_key(subject, v.version), json.loads(json.dumps(version_value(v))))
    assert replay.lookup("user", user, "AVRO", references=(Reference("Address", "address", 1),)).id == 2
