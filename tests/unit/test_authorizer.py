"""The authorizer's decisions (security/authorizer.py): patterns, implied operations, deny wins, super users,
allow.everyone.if.no.acl.found, and the filters of DescribeAcls and DeleteAcls."""

from __future__ import annotations

import pytest

from odradek.security.authorizer import (AUTHORIZER_CLASSES, AclBinding, AclFilter, Authorizer, Operation,
                                       PatternType, Permission, ResourceType, validate)
from odradek.config import BrokerConfig, ConfigError

T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER


def acl(name: str, operation: Operation, principal: str = "User:alice", permission: Permission = Permission.ALLOW,
        pattern: PatternType = PatternType.LITERAL, kind: ResourceType = T, host: str = "*") -> AclBinding:
    return AclBinding(kind, name, pattern, principal, host, operation, permission)


def authorizer(*acls: AclBinding, **settings: str) -> Authorizer:
    a = Authorizer(BrokerConfig({"authorizer.class.name": AUTHORIZER_CLASSES[0], **settings}))
    a.replace_all(acls)
    return a


def test_without_an_authorizer_everything_is_allowed():
    assert Authorizer(BrokerConfig()).authorize("User:anyone", "h", Operation.DELETE, T, "t")
    with pytest.raises(ConfigError):
        Authorizer(BrokerConfig({"authorizer.class.name": "com.example.Other"}))


def test_literal_prefixed_and_wildcard_names():
    a = authorizer(acl("orders", Operation.READ), acl("logs-", Operation.WRITE, pattern=PatternType.PREFIXED),
                   acl("*", Operation.DESCRIBE, principal="User:*"))
    assert a.authorize("User:alice", "h", Operation.READ, T, "orders")
    assert not a.authorize("User:alice", "h", Operation.READ, T, "orders-2")
    assert a.authorize("User:alice", "h", Operation.WRITE, T, "logs-app")
    assert not a.authorize("User:alice", "h", Operation.WRITE, T, "log")
    assert a.authorize("User:bob", "h", Operation.DESCRIBE, T, "anything")
    assert not a.authorize("User:bob", "h", Operation.READ, T, "orders")


def test_implied_operations_and_deny_wins():
    a = authorizer(acl("t", Operation.WRITE), acl("t", Operation.ALTER_CONFIGS),
                   acl("t", Operation.ALL, principal="User:bob"),
                   acl("t", Operation.READ, principal="User:bob", permission=Permission.DENY),
                   acl("t", Operation.ALL, principal="User:carol"),
                   acl("t", Operation.ALL, principal="User:carol", permission=Permission.DENY, host="10.0.0.9"))
    assert a.authorize("User:alice", "h", Operation.DESCRIBE, T, "t")  # WRITE implies DESCRIBE
    assert a.authorize("User:alice", "h", Operation.DESCRIBE_CONFIGS, T, "t")  # ALTER_CONFIGS implies it
    assert not a.authorize("User:alice", "h", Operation.READ, T, "t")
    assert a.authorize("User:bob", "h", Operation.WRITE, T, "t")
    assert not a.authorize("User:bob", "h", Operation.READ, T, "t")  # the DENY wins over ALL
    assert a.authorize("User:carol", "10.0.0.8", Operation.READ, T, "t")
    assert not a.authorize("User:carol", "10.0.0.9", Operation.READ, T, "t")  # denied from that host only


def test_super_users_and_no_acl_found():
    a = authorizer(acl("t", Operation.READ), **{"super.users": "User:admin;User:ops"})
    assert a.authorize("User:ops", "h", Operation.ALTER, C, "kafka-cluster")
    assert not a.authorize("User:bob", "h", Operation.READ, T, "untouched")
    open_ = authorizer(acl("t", Operation.READ), **{"allow.everyone.if.no.acl.found": "true"})
    assert open_.authorize("User:bob", "h", Operation.READ, T, "untouched")  # no ACL applies at all
    assert not open_.authorize("User:bob", "h", Operation.READ, T, "t")  # an ACL applies, not to bob


def test_authorized_operations_bits():
    a = authorizer(acl("g", Operation.READ, kind=G))
    bits = a.authorized_operations("User:alice", "h", G, "g")
    assert bits == (1 << Operation.READ) | (1 << Operation.DESCRIBE)


def test_filters():
    a = authorizer(acl("orders", Operation.READ), acl("ord", Operation.WRITE, pattern=PatternType.PREFIXED),
                   acl("*", Operation.DESCRIBE), acl("g", Operation.READ, kind=G, principal="User:bob"))
    def names(f: AclFilter) -> list[str]:
        return [x.resource_name for x in a.acls(f)]
    any_ = dict(resource_type=ResourceType.ANY, resource_name=None, pattern_type=PatternType.ANY, principal=None,
                host=None, operation=Operation.ANY, permission=Permission.ANY)
    assert len(a.acls(AclFilter(**any_))) == 4
    assert names(AclFilter(**{**any_, "principal": "User:bob"})) == ["g"]
    assert names(AclFilter(**{**any_, "resource_type": T, "resource_name": "orders",
                              "pattern_type": PatternType.MATCH})) == ["*", "ord", "orders"]
    assert names(AclFilter(**{**any_, "resource_name": "ord"})) == ["ord"]
    assert names(AclFilter(**{**any_, "pattern_type": PatternType.PREFIXED})) == ["ord"]


@pytest.mark.parametrize("binding", [
    acl("t", Operation.ANY), acl("t", Operation.READ, permission=Permission.ANY), acl("t", Operation.READ, "alice"),
    acl("", Operation.READ), acl("t", Operation.READ, pattern=PatternType.MATCH),
    acl("my-cluster", Operation.ALTER, kind=C), acl("t", Operation.READ, kind=ResourceType.ANY),
])
def test_invalid_acls(binding):
    assert validate(binding) is not None


def test_authorize_any_needs_an_allow_that_no_deny_covers():
    W, P = Operation.WRITE, PatternType.PREFIXED
    assert not authorizer().authorize_any("User:alice", "h", W, T)
    assert authorizer(acl("orders", W)).authorize_any("User:alice", "h", W, T)
    assert authorizer(acl("orders", Operation.ALL)).authorize_any("User:alice", "h", W, T)
    assert not authorizer(acl("orders", Operation.READ)).authorize_any("User:alice", "h", W, T)
    assert not authorizer(acl("orders", W), acl("orders", W, permission=Permission.DENY)).authorize_any(
        "User:alice", "h", W, T)
    assert not authorizer(acl("orders", W), acl("ord", W, permission=Permission.DENY, pattern=P)).authorize_any(
        "User:alice", "h", W, T)
    assert not authorizer(acl("logs-", W, pattern=P), acl("*", W, permission=Permission.DENY)).authorize_any(
        "User:alice", "h", W, T)
    # a deny of one topic leaves the allow on the others
    assert authorizer(acl("logs-", W, pattern=P), acl("logs-x", W, permission=Permission.DENY)).authorize_any(
        "User:alice", "h", W, T)
    assert not authorizer(acl("orders", W)).authorize_any("User:bob", "h", W, T)
    assert authorizer(acl("g", W, kind=G)).authorize_any("User:bob", "h", W, T) is False
    assert authorizer(**{"super.users": "User:bob"}).authorize_any("User:bob", "h", W, T)
    assert authorizer(**{"allow.everyone.if.no.acl.found": "true"}).authorize_any("User:bob", "h", W, T)
