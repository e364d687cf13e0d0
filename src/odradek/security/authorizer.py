"""The authorizer: Kafka's ACL model, asked by the handlers where Kafka asks.

It is on when `authorizer.class.name` names either of Kafka's authorizers
(`org.apache.kafka.metadata.authorizer.StandardAuthorizer`, `kafka.security.authorizer.AclAuthorizer`);
otherwise every request is allowed, as before. An ACL (`AclBinding`) says that a principal (`User:alice`,
`User:*` for everyone) from a host (`*` for any) is allowed or denied an operation on resources: a topic,
group, transactional id or the cluster (`kafka-cluster`), named literally (`*` for all of that type) or by
a prefix.

A request is allowed when the principal is among `super.users`, or when no DENY ACL that applies matches the
operation (or ALL) and an ALLOW ACL matches it, with Kafka's implications: DESCRIBE is allowed by READ,
WRITE, DELETE and ALTER as well, DESCRIBE_CONFIGS by ALTER_CONFIGS. A resource no ACL applies to at all
is allowed only with `allow.everyone.if.no.acl.found=true`.

ACLs change through CreateAcls and DeleteAcls (k30, k31) and are persisted before they apply: a single node
keeps them in `acls.json` in its data directory (replaced atomically); a cluster in ZooKeeper
(cluster/member.py).

Not thread-safe; owned by the event loop.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass
from enum import IntEnum
from pathlib import Path
from typing import Awaitable, Callable, Iterable

from odradek.config import BrokerConfig
from odradek.storage.files import write_file_atomically

log = logging.getLogger(__name__)

AUTHORIZER_CLASSES = ("org.apache.kafka.metadata.authorizer.StandardAuthorizer",
                      "kafka.security.authorizer.AclAuthorizer")
CLUSTER_NAME = "kafka-cluster"
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"
DECISIONS_KEPT = 100_000  # cached authorization decisions, before the cache starts over


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class Permission(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# What an ALLOW of the key also allows (Kafka's implied operations).
_ALLOWED_BY = {
    Operation.DESCRIBE: {Operation.DESCRIBE, Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER},
    Operation.DESCRIBE_CONFIGS: {Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS},
}
# The operations each resource type has (authorized_operations lists these).
OPERATIONS_OF = {
    ResourceType.TOPIC: (Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DELETE, Operation.ALTER,
                         Operation.DESCRIBE, Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS),
    # Kafka 4 (KIP-848) added group configs, and with them DESCRIBE_CONFIGS and ALTER_CONFIGS on groups
    ResourceType.GROUP: (Operation.READ, Operation.DELETE, Operation.DESCRIBE, Operation.DESCRIBE_CONFIGS,
                         Operation.ALTER_CONFIGS),
    ResourceType.CLUSTER: (Operation.CREATE, Operation.ALTER, Operation.DESCRIBE, Operation.CLUSTER_ACTION,
                           Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS, Operation.IDEMPOTENT_WRITE),
    ResourceType.TRANSACTIONAL_ID: (Operation.WRITE, Operation.DESCRIBE),
}


@dataclass(frozen=True)
class AclBinding:
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int

    def applies_to(self, resource_type: int, name: str) -> bool:
        if self.resource_type != resource_type:
            return False
        if self.pattern_type == PatternType.PREFIXED:
            return name.startswith(self.resource_name)
        return self.resource_name in (name, WILDCARD)


@dataclass(frozen=True)
class AclFilter:
    """DescribeAcls' and DeleteAcls' filter: None, ANY and a null name match anything."""

    resource_type: int
    resource_name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission: int

    def matches(self, acl: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and acl.resource_type != self.resource_type:
            return False
        if not self._matches_pattern(acl):
            return False
        return ((self.principal is None or acl.principal == self.principal)
                and (self.host is None or acl.host == self.host)
                and (self.operation == Operation.ANY or acl.operation == self.operation)
                and (self.permission == Permission.ANY or acl.permission == self.permission))

    def _matches_pattern(self, acl: AclBinding) -> bool:
        if self.pattern_type == PatternType.MATCH:
            # every ACL that would apply to a resource of this name (or the name itself, if it is a pattern)
            if self.resource_name is None:
                return True
            if acl.pattern_type == PatternType.LITERAL:
                return acl.resource_name in (self.resource_name, WILDCARD)
            return self.resource_name.startswith(acl.resource_name)
        if self.pattern_type != PatternType.ANY and acl.pattern_type != self.pattern_type:
            return False
        return self.resource_name is None or acl.resource_name == self.resource_name


def validate(acl: AclBinding) -> str | None:
    """Why CreateAcls cannot take this ACL (INVALID_REQUEST), or None."""
    if acl.resource_type not in OPERATIONS_OF:
        return f"Invalid resource type {acl.resource_type}"
    if acl.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid pattern type {acl.pattern_type}: an ACL is LITERAL or PREFIXED"
    if acl.operation in (Operation.UNKNOWN, Operation.ANY) or acl.operation not in set(Operation):
        return f"Invalid operation {acl.operation}"
    if acl.permission not in (Permission.ALLOW, Permission.DENY):
        return f"Invalid permission type {acl.permission}"
    kind, sep, name = acl.principal.partition(":")
    if not sep or not kind or not name:
        return f"Invalid principal {acl.principal!r}: expected Type:name, e.g. User:alice"
    if not acl.resource_name:
        return "The resource name must not be empty"
    if acl.resource_type == ResourceType.CLUSTER and acl.resource_name != CLUSTER_NAME:
        return f"The cluster resource is named {CLUSTER_NAME}"
    if not acl.host:
        return "The host must not be empty (* for any)"
    return None


class Authorizer:
    def __init__(self, config: BrokerConfig) -> None:
        name = str(config.get("authorizer.class.name") or "").strip()
        if name and name not in AUTHORIZER_CLASSES:
            from odradek.config import ConfigError

            raise ConfigError(f"authorizer.class.name={name}: odradek is either of {', '.join(AUTHORIZER_CLASSES)}")
        self.enabled = bool(name)
        self.super_users = {u.strip() for u in str(config.get("super.users") or "").split(";") if u.strip()}
        self.allow_if_no_acl = bool(config.get("allow.everyone.if.no.acl.found"))
        self._acls: set[AclBinding] = set()
        # decisions already made (Fetch asks once per partition): forgotten whenever the ACLs change
        self._decisions: dict[tuple[str, str, int, int, str], bool] = {}
        # stores the whole new set before it applies (a file, or ZooKeeper)
        self.persist: Callable[[set[AclBinding]], Awaitable[None]] | None = None

    # -- questions ----------------------------------------------------------------------------------------

    def authorize(self, principal: str, host: str, operation: int, resource_type: int, name: str) -> bool:
        if not self.enabled or principal in self.super_users:
            return True
        key = (principal, host, operation, resource_type, name)
        decision = self._decisions.get(key)
        if decision is None:
            if len(self._decisions) >= DECISIONS_KEPT:
                self._decisions.clear()
            decision = self._decisions[key] = self._decide(principal, host, operation, resource_type, name)
        return decision

    def _decide(self, principal: str, host: str, operation: int, resource_type: int, name: str) -> bool:
        applicable = [a for a in self._acls if a.applies_to(resource_type, name)
                      and a.principal in (principal, WILDCARD_PRINCIPAL) and a.host in (host, WILDCARD)]
        if any(a.permission == Permission.DENY and a.operation in (operation, Operation.ALL) for a in applicable):
            return False
        allowing = _ALLOWED_BY.get(operation, {operation})
        if any(a.permission == Permission.ALLOW and (a.operation in allowing or a.operation == Operation.ALL)
               for a in applicable):
            return True
        return self.allow_if_no_acl and not any(a.applies_to(resource_type, name) for a in self._acls)

    def authorize_any(self, principal: str, host: str, operation: int, resource_type: int) -> bool:
        """Whether ``operation`` is allowed on some resource of the type (Kafka's authorizeByResourceType,
        KIP-679: an idempotent producer needs IDEMPOTENT_WRITE on the cluster or WRITE on any topic): an ALLOW
        whose resources no DENY covers whole."""
        if not self.enabled or principal in self.super_users:
            return True
        mine = [a for a in self._acls if a.resource_type == resource_type
                and a.principal in (principal, WILDCARD_PRINCIPAL) and a.host in (host, WILDCARD)]
        denies = [a for a in mine if a.permission == Permission.DENY and a.operation in (operation, Operation.ALL)]
        allowing = _ALLOWED_BY.get(operation, {operation})
        for acl in mine:
            if acl.permission != Permission.ALLOW or not (acl.operation in allowing or acl.operation == Operation.ALL):
                continue
            if not any(_covers(deny, acl) for deny in denies):
                return True
        return self.allow_if_no_acl and not any(a.resource_type == resource_type for a in self._acls)

    def authorized_operations(self, principal: str, host: str, resource_type: int, name: str) -> int:
        """The bit field of the operations allowed (Metadata's, DescribeGroups' and DescribeCluster's
        `authorized_operations`)."""
        bits = 0
        for operation in OPERATIONS_OF[resource_type]:
            if self.authorize(principal, host, operation, resource_type, name):
                bits |= 1 << operation
        return bits

    def acls(self, matching: AclFilter | None = None) -> list[AclBinding]:
        return sorted((a for a in self._acls if matching is None or matching.matches(a)),
                      key=lambda a: (a.resource_type, a.resource_name, a.pattern_type, a.principal, a.host,
                                     a.operation, a.permission))

    # -- changes ------------------------------------------------------------------------------------------

    def replace_all(self, acls: Iterable[AclBinding]) -> None:
        """The ACLs as loaded (from the file, or ZooKeeper)."""
        self._acls = set(acls)
        self._decisions.clear()

    async def change(self, add: Iterable[AclBinding] = (), remove: Iterable[AclBinding] = ()) -> None:
        new = (self._acls - set(remove)) | set(add)
        if new == self._acls:
            return
        if self.persist is not None:
            await self.persist(new)
        self._acls = new
        self._decisions.clear()


def _covers(deny: AclBinding, allow: AclBinding) -> bool:
    """Whether ``deny`` applies to every resource ``allow`` does."""
    if deny.resource_name == WILDCARD and deny.pattern_type == PatternType.LITERAL:
        return True
    if deny.pattern_type == PatternType.PREFIXED:
        return allow.resource_name.startswith(deny.resource_name) and allow.resource_name != WILDCARD
    return allow.pattern_type == PatternType.LITERAL and allow.resource_name == deny.resource_name


class AclFile:
    """A single node's ACLs: `acls.json` in the data directory, a list of bindings by field name."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / "acls.json"

    def load_into(self, authorizer: Authorizer) -> None:
        try:
            value = json.loads(self.path.read_text())
        except FileNotFoundError:
            return
        authorizer.replace_all(AclBinding(**entry) for entry in value.get("acls", []))

    async def persist(self, acls: set[AclBinding]) -> None:
        entries = [asdict(a) for a in sorted(acls, key=lambda a: tuple(asdict(a).values()))]
        write_file_atomically(self.path, json.dumps({"version": 1, "acls": entries}, indent=1).encode())
