"""ACLs in ZooKeeper, in Kafka's layout (what its AclAuthorizer reads and writes):

    /kafka-acl/<ResourceType>/<name>                      literal resources
    /kafka-acl-extended/prefixed/<ResourceType>/<name>    prefixed resources
        {"version": 1, "acls": [{"principal": "User:alice", "permissionType": "Allow", "operation": "Read",
                                 "host": "*"}, ...]}
    /kafka-acl-changes/acl_changes_SEQ                    "Topic:orders" (a literal resource changed)
    /kafka-acl-extended-changes/acl_changes_SEQ           {"version": 1, "resourceType": "Topic", "name": "ord",
                                                           "patternType": "Prefixed"}

ResourceType is Kafka's name (Topic, Group, Cluster, TransactionalId). A broker that sees a new change
notification reads every ACL again (`read_all`): there are few, and a missed notification then costs nothing.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Iterable

from odradek.security.authorizer import AclBinding, Operation, PatternType, Permission, ResourceType
from odradek.cluster.zk import NoNodeError, ZkClient

LITERAL_ROOT = "/kafka-acl"
PREFIXED_ROOT = "/kafka-acl-extended/prefixed"
LITERAL_CHANGES = "/kafka-acl-changes"
EXTENDED_CHANGES = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
PATHS = (LITERAL_ROOT, PREFIXED_ROOT, LITERAL_CHANGES, EXTENDED_CHANGES)

RESOURCE_NAMES = {ResourceType.TOPIC: "Topic", ResourceType.GROUP: "Group", ResourceType.CLUSTER: "Cluster",
                  ResourceType.TRANSACTIONAL_ID: "TransactionalId"}
_RESOURCES = {v: k for k, v in RESOURCE_NAMES.items()}
# Kafka's names: CLUSTER_ACTION is "ClusterAction", and so on
OPERATION_NAMES = {op: "".join(w.capitalize() for w in op.name.split("_")) for op in Operation}
_OPERATIONS = {v: k for k, v in OPERATION_NAMES.items()}
PERMISSION_NAMES = {Permission.ALLOW: "Allow", Permission.DENY: "Deny"}
_PERMISSIONS = {v: k for k, v in PERMISSION_NAMES.items()}

Resource = tuple[int, str, int]  # (resource type, name, pattern type)


def resource_path(resource: Resource) -> str:
    kind, name, pattern = resource
    root = PREFIXED_ROOT if pattern == PatternType.PREFIXED else LITERAL_ROOT
    return f"{root}/{RESOURCE_NAMES[ResourceType(kind)]}/{name}"


def encode(acls: Iterable[AclBinding]) -> bytes:
    entries = [{"principal": a.principal, "permissionType": PERMISSION_NAMES[Permission(a.permission)],
                "operation": OPERATION_NAMES[Operation(a.operation)], "host": a.host}
               for a in sorted(acls, key=lambda a: (a.principal, a.host, a.operation, a.permission))]
    return json.dumps({"version": 1, "acls": entries}, separators=(",", ":")).encode()


def decode(resource: Resource, data: bytes) -> list[AclBinding]:
    kind, name, pattern = resource
    out = []
    for e in json.loads(data).get("acls", []):
        op, permission = _OPERATIONS.get(e.get("operation")), _PERMISSIONS.get(e.get("permissionType"))
        if op is not None and permission is not None:
            out.append(AclBinding(kind, name, pattern, e["principal"], e.get("host", "*"), op, permission))
    return out


def by_resource(acls: Iterable[AclBinding]) -> dict[Resource, set[AclBinding]]:
    out: dict[Resource, set[AclBinding]] = defaultdict(set)
    for a in acls:
        out[(a.resource_type, a.resource_name, a.pattern_type)].add(a)
    return out


async def read_all(zk: ZkClient) -> list[AclBinding]:
    acls: list[AclBinding] = []
    for root, pattern in ((LITERAL_ROOT, PatternType.LITERAL), (PREFIXED_ROOT, PatternType.PREFIXED)):
        for type_name in await zk.children(root):
            kind = _RESOURCES.get(type_name)
            if kind is None:
                continue
            try:
                names = await zk.children(f"{root}/{type_name}")
            except NoNodeError:
                continue
            for name in names:
                found = await zk.get_or_none(f"{root}/{type_name}/{name}")
                if found is not None:
                    acls.extend(decode((kind, name, pattern), found[0]))
    return acls


async def write_changes(zk: ZkClient, old: Iterable[AclBinding], new: Iterable[AclBinding]) -> None:
    """Rewrite the resources whose ACLs differ, then tell every broker (one notification per resource)."""
    before, after = by_resource(old), by_resource(new)
    for resource in sorted(set(before) | set(after)):
        if before.get(resource, set()) == after.get(resource, set()):
            continue
        path = resource_path(resource)
        if after.get(resource):
            await zk.set_or_create(path, encode(after[resource]))
        else:
            try:
                await zk.delete(path)
            except NoNodeError:
                pass
        kind, name, pattern = resource
        if pattern == PatternType.PREFIXED:
            note = json.dumps({"version": 1, "resourceType": RESOURCE_NAMES[ResourceType(kind)], "name": name,
                               "patternType": "Prefixed"}).encode()
            await zk.create(f"{EXTENDED_CHANGES}/{CHANGE_PREFIX}", note, sequence=True, makepath=True)
        else:
            note = f"{RESOURCE_NAMES[ResourceType(kind)]}:{name}".encode()
            await zk.create(f"{LITERAL_CHANGES}/{CHANGE_PREFIX}", note, sequence=True, makepath=True)
