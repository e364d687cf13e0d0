"""The registry's Protobuf rules: .proto source and serialized descriptors, identity, imports through
references, and reader/writer compatibility (our rules modelled on Confluent's)."""

from __future__ import annotations

import base64

import pytest

pytest.importorskip("google.protobuf")
pytest.importorskip("grpc_tools")

from odradek.registry import compatibility, protobuf_format as pf  # noqa: E402
from odradek.registry.schema import InvalidSchema  # noqa: E402


def proto(body: str, syntax: str = "proto3", package: str = "test", refs: tuple = ()) -> pf.ProtobufSchema:
    return pf.parse(f'syntax = "{syntax}";\npackage {package};\n{body}\n', refs)


def reads(reader: pf.ProtobufSchema, writer: pf.ProtobufSchema) -> bool:
    return not pf.read_problems(reader, writer)


V1 = proto("message User { string name = 1; int32 age = 2; }")


# -- parsing, identity, forms ---------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    "not a proto", 'syntax = "proto3"; message A { Missing m = 1; }', 'syntax = "proto3"; message A { int32 a = 0; }',
    'syntax = "proto3"; import "other.proto"; message A { int32 a = 1; }',  # an import no reference provides
    base64.b64encode(b"\xff\xff\xff").decode(),
])
def test_invalid_schemas_are_refused(text: str) -> None:
    with pytest.raises(InvalidSchema):
        pf.parse(text)


def test_parse_error_says_what_protoc_says() -> None:
    with pytest.raises(InvalidSchema) as exc:
        pf.parse('syntax = "proto3"; message A { Missing m = 1; }')
    assert "Missing" in str(exc.value)


def test_source_and_serialized_forms_are_one_schema() -> None:
    serialized = pf.render(V1, "serialized")
    assert serialized is not None and pf.render(V1, "text") is None
    again = pf.parse(serialized)
    assert again.identity == V1.identity
    # layout and comments do not matter; a field's name does
    spaced = pf.parse('syntax = "proto3";\n\n// users\npackage test;\nmessage User {\n  string name = 1;  int32 age = 2;\n}\n')
    assert spaced.identity == V1.identity
    assert proto("message User { string full_name = 1; int32 age = 2; }").identity != V1.identity


def test_well_known_imports_and_proto2() -> None:
    proto('import "google/protobuf/timestamp.proto";\nmessage E { google.protobuf.Timestamp at = 1; }')
    two = proto("message P { required string id = 1; optional int32 n = 2; }", syntax="proto2")
    assert two.descriptor.syntax in ("", "proto2")


def test_imports_resolve_through_references() -> None:
    dep = proto("message Address { string zip = 1; }", package="common")
    user = proto('import "common/address.proto";\nmessage User { common.Address address = 1; }',
                 refs=(("common/address.proto", dep),))
    assert "common/address.proto" in user.dependencies
    assert list(user.descriptor.dependency) == ["common/address.proto"]
    # the serialized form (what confluent-kafka's serializer sends) resolves the same import
    assert pf.parse(pf.render(user, "serialized"), (("common/address.proto", dep),)).identity == user.identity
    with pytest.raises(InvalidSchema):
        pf.parse(pf.render(user, "serialized"))


# -- compatibility ------------------------------------------------------------------------------------------------


def test_fields_added_or_removed_are_compatible_both_ways() -> None:
    more = proto("message User { string name = 1; int32 age = 2; string email = 3; }")
    less = proto("message User { string name = 1; }")
    for a, b in ((more, V1), (V1, more), (less, V1), (V1, less)):
        assert reads(a, b)


def test_renaming_a_field_keeps_its_number_and_is_compatible() -> None:
    assert reads(proto("message User { string full_name = 1; int32 age = 2; }"), V1)


def test_a_field_numbers_type_change_is_not() -> None:
    changed = proto("message User { string name = 1; string age = 2; }")
    assert not reads(changed, V1) and not reads(V1, changed)
    assert "field 2 changed type from int32 to string" in pf.read_problems(changed, V1)[0]
    # same wire encoding: accepted
    assert reads(proto("message User { string name = 1; int64 age = 2; }"), V1)
    assert reads(proto("message User { bytes name = 1; int32 age = 2; }"), V1)
    assert not reads(proto("message User { string name = 1; sint32 age = 2; }"), V1)
    # scalar to message
    msg = proto("message Age { int32 v = 1; }\nmessage User { string name = 1; Age age = 2; }")
    assert not reads(msg, V1)


def test_message_and_enum_removal() -> None:
    two = proto("message User { string name = 1; int32 age = 2; }\nmessage Extra { int32 x = 1; }")
    assert reads(two, V1)                    # a reader that knows more types
    assert not reads(V1, two)                # the writer's Extra is gone from the reader
    with_enum = proto("enum Color { RED = 0; }\nmessage User { string name = 1; int32 age = 2; }")
    assert not reads(V1, with_enum)


def test_enum_values_may_change() -> None:
    a = proto("enum Color { RED = 0; GREEN = 1; }\nmessage M { Color c = 1; }")
    b = proto("enum Color { RED = 0; BLUE = 2; }\nmessage M { Color c = 1; }")
    assert reads(a, b) and reads(b, a)


def test_package_and_syntax_changes() -> None:
    assert not reads(proto("message User { string name = 1; int32 age = 2; }", package="other"), V1)
    p2 = proto("message User { optional string name = 1; optional int32 age = 2; }", syntax="proto2")
    assert any("syntax" in p for p in pf.read_problems(p2, V1))


def test_required_fields_proto2() -> None:
    base = proto("message P { optional string id = 1; }", syntax="proto2")
    needs = proto("message P { optional string id = 1; required int32 n = 2; }", syntax="proto2")
    assert not reads(needs, base)            # the writer never wrote n
    assert reads(base, needs)


def test_oneof_changes() -> None:
    plain = proto("message M { string a = 1; int32 b = 2; int32 c = 3; }")
    one_moved = proto("message M { oneof choice { string a = 1; } int32 b = 2; int32 c = 3; }")
    two_moved = proto("message M { oneof choice { string a = 1; int32 b = 2; } int32 c = 3; }")
    assert reads(one_moved, plain)           # one field into a new oneof
    assert not reads(two_moved, plain)       # the writer may have set both
    into_existing = proto("message M { oneof choice { string a = 1; int32 b = 2; } int32 c = 3; }")
    from_one = proto("message M { oneof choice { string a = 1; } int32 b = 2; int32 c = 3; }")
    assert not reads(into_existing, from_one)
    dropped = proto("message M { oneof choice { string a = 1; } int32 c = 3; }")
    assert not reads(dropped, two_moved)     # b was in the writer's oneof and is gone
    assert reads(proto("message M { oneof choice { string a = 1; int32 b = 2; int32 d = 4; } int32 c = 3; }"),
                 two_moved)                  # a field added to a oneof
    # proto3 optional is a synthetic oneof, not a real one
    assert reads(proto("message M { optional string a = 1; optional int32 b = 2; int32 c = 3; }"), plain)


def test_nested_messages_and_maps_are_compared() -> None:
    a = proto("message O { message I { int32 x = 1; } I i = 1; map<string, int32> m = 2; }")
    b = proto("message O { message I { string x = 1; } I i = 1; map<string, int32> m = 2; }")
    c = proto("message O { message I { int32 x = 1; } I i = 1; map<string, string> m = 2; }")
    assert not reads(b, a)
    assert any("O.MEntry" in p for p in pf.read_problems(c, a))


def test_levels_over_protobuf() -> None:
    extra = proto("message User { string name = 1; int32 age = 2; }\nmessage Extra { int32 x = 1; }")
    assert not compatibility.problems("BACKWARD", extra, [V1])
    assert compatibility.problems("FORWARD", extra, [V1])
    changed = proto("message User { string name = 1; string age = 2; }")
    assert compatibility.problems("BACKWARD", changed, [V1])
    assert not compatibility.problems("NONE", changed, [V1])
