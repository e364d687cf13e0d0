"""AlterUserScramCredentials (key 51), version 0.

Upserts and deletes users' SCRAM credentials (security/scram_store.py). The client sends the salted password
(PBKDF2 of the password with the salt and iterations it chose), never the password; the broker keeps only
the stored and server keys derived from it. Per user, the first failing check wins: an empty name or an
iteration count outside 4096-16384 is UNACCEPTABLE_CREDENTIAL, an unknown mechanism
UNSUPPORTED_SASL_MECHANISM, the same user and mechanism twice in one request DUPLICATE_RESOURCE, deleting a
credential that does not exist RESOURCE_NOT_FOUND. A user with any failure changes nothing; the others'
changes are stored together (single node: one file write; cluster mode: ZooKeeper).

Needs ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED).
"""

import logging
from collections import Counter

from odradek.security.authorizer import CLUSTER_NAME, Operation as Op, ResourceType as Res
from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.net.sasl import MAX_ITERATIONS, MIN_ITERATIONS, SCRAM_MECHANISM_IDS, ScramCredential
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode

log = logging.getLogger(__name__)


@handler(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, 0)
async def alter_user_scram_credentials(ctx: RequestContext, request: dict) -> dict:
    if not ctx.allowed(Op.ALTER, Res.CLUSTER, CLUSTER_NAME):
        names = dict.fromkeys(a["name"] for a in request["deletions"] + request["upsertions"])
        return {"results": [{"user": n, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED} for n in names]}
    store = ctx.broker.scram
    existing = store.users()
    alterations = [("delete", d) for d in request["deletions"]] + [("upsert", u) for u in request["upsertions"]]
    seen = Counter((a["name"], a["mechanism"]) for _, a in alterations)
    errors: dict[str, tuple[int, str]] = {}
    changes: dict[str, dict] = {}
    for kind, a in alterations:
        name, mechanism = a["name"], SCRAM_MECHANISM_IDS.get(a["mechanism"])
        if name in errors:
            continue
        if not name:
            errors[name] = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
        elif mechanism is None:
            errors[name] = (ErrorCode.UNSUPPORTED_SASL_MECHANISM, f"Unknown SCRAM mechanism {a['mechanism']}")
        elif seen[(name, a["mechanism"])] > 1:
            errors[name] = (ErrorCode.DUPLICATE_RESOURCE,
                            "A user credential cannot be altered twice in the same request")
        elif kind == "delete":
            if mechanism not in existing.get(name, {}):
                errors[name] = (ErrorCode.RESOURCE_NOT_FOUND,
                                "Attempt to delete a user credential that does not exist")
            else:
                changes.setdefault(name, {})[mechanism] = None
        elif not MIN_ITERATIONS <= a["iterations"] <= MAX_ITERATIONS:
            errors[name] = (ErrorCode.UNACCEPTABLE_CREDENTIAL,
                            f"Iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}")
        elif not a["salt"] or not a["salted_password"]:
            errors[name] = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Salt and salted password must not be empty")
        else:
            changes.setdefault(name, {})[mechanism] = ScramCredential.from_salted_password(
                mechanism, a["salted_password"], a["salt"], a["iterations"])
    for name in errors:
        changes.pop(name, None)
    if changes:
        try:
            await store.alter(changes)
        except Exception as exc:  # the file or ZooKeeper: nothing applied
            log.error("cannot store SCRAM credentials of %s: %s", ", ".join(sorted(changes)), exc)
            for name in changes:
                errors[name] = (ErrorCode.UNKNOWN_SERVER_ERROR, f"Cannot store the credentials: {exc}")
        else:
            log.info("SCRAM credentials changed for %s", ", ".join(sorted(changes)))
    names = dict.fromkeys(a["name"] for _, a in alterations)
    return {"results": [{"user": name, "error_code": errors.get(name, (ErrorCode.NONE, None))[0],
                         "error_message": errors.get(name, (ErrorCode.NONE, None))[1]} for name in names]}
