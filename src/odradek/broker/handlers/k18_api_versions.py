"""ApiVersions (key 18), versions 0-4.

Advertises exactly the registry's ranges (see broker/registry.py). A version we do not speak never reaches
this handler: the dispatcher answers it with UNSUPPORTED_VERSION and a v0 body (KIP-511), which is also
what clients parse to step down. The response always goes out with response header v0, even at v3+ (the
codec applies that rule). No features are advertised (no KRaft feature levels on a single node).
"""

from odradek.broker.core import RequestContext
from odradek.broker.registry import advertised_versions, handler
from odradek.protocol.api_keys import ApiKey


@handler(ApiKey.API_VERSIONS, 0, 4)
def api_versions(ctx: RequestContext, request: dict) -> dict:
    return {
        "error_code": 0,
        "api_keys": [{"api_key": k, "min_version": lo, "max_version": hi} for k, lo, hi in advertised_versions()],
        "throttle_time_ms": 0,
    }
