"""UpdateFeatures (key 57), versions 0-2.

odradek's features are those ApiVersions advertises (k18_api_versions.py: `group.version` 1,
`metadata.version` 4.0-IV2, `share.version` 1, `transaction.version` 2), fixed by the code. The request needs ALTER on the cluster (else
CLUSTER_AUTHORIZATION_FAILED in the top-level error). Each update is then checked as Kafka's controller
checks it, with its words: an unknown feature, a level outside the supported range, or a lower level with
upgrade type UPGRADE (v0: `allow_downgrade` false) is INVALID_UPDATE_VERSION for the whole request ("The
update failed for all features since ..."), as in Kafka 4.4. An update to the level already finalized
succeeds and changes nothing (v0-1 list it with error NONE; v2 has no per-feature results).

Gaps (deliberate): a downgrade Kafka would carry out (SAFE/UNSAFE_DOWNGRADE to a supported level) is
INVALID_UPDATE_VERSION here, since odradek cannot change what its protocol speaks at run time.
"""

from odradek.security.authorizer import CLUSTER_NAME, Operation as Op, ResourceType as Res
from odradek.broker.context import RequestContext
from odradek.broker.handlers.k18_api_versions import finalized_features, supported_features
from odradek.broker.registry import handler
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode

UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3


def _problem(ctx: RequestContext, update: dict) -> tuple[int, str] | None:
    name, level = update["feature"], update["max_version_level"]
    kind = update["upgrade_type"] if ctx.api_version >= 1 else \
        (SAFE_DOWNGRADE if update["allow_downgrade"] else UPGRADE)
    if kind not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        return ErrorCode.INVALID_REQUEST, f"Unknown upgrade type {kind} for feature {name}."
    prefix = f"Invalid update version {level} for feature {name}."
    node = ctx.broker.node_id
    supported = {f["name"]: (f["min_version"], f["max_version"]) for f in supported_features()}
    if name not in supported:
        return ErrorCode.INVALID_UPDATE_VERSION, f"{prefix} Local controller {node} does not support this feature."
    low, high = supported[name]
    if not low <= level <= high:
        return ErrorCode.INVALID_UPDATE_VERSION, \
            f"{prefix} Local controller {node} only supports versions {low}-{high}"
    current = next(f["max_version_level"] for f in finalized_features() if f["name"] == name)
    if level < current and kind == UPGRADE:
        return ErrorCode.INVALID_UPDATE_VERSION, (f"{prefix} Can't downgrade the version of this feature without "
                                                  "setting the upgrade type to either safe or unsafe downgrade.")
    if level != current:
        return ErrorCode.INVALID_UPDATE_VERSION, f"{prefix} odradek's {name} is fixed at {current}."
    return None


@handler(ApiKey.UPDATE_FEATURES, 0, 2)
def update_features(ctx: RequestContext, request: dict) -> dict:
    if not ctx.allowed(Op.ALTER, Res.CLUSTER, CLUSTER_NAME):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "error_message": "UpdateFeatures needs ALTER permission on the cluster.", "results": []}
    for update in request["feature_updates"]:
        problem = _problem(ctx, update)
        if problem is not None:
            error, message = problem
            return {"throttle_time_ms": 0, "error_code": error, "results": [], "error_message":
                    f"The update failed for all features since the following feature had an error: {message}"}
    return {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "results": [
        {"feature": u["feature"], "error_code": 0, "error_message": "NONE"} for u in request["feature_updates"]]}
