"""ApiVersions (key 18), versions 0-4.

Advertises exactly the registry's ranges (see broker/registry.py). A version we do not speak never reaches
this handler: the dispatcher answers it with UNSUPPORTED_VERSION and a v0 body (KIP-511) listing only
ApiVersions' own range, as Kafka does, which is what clients parse to step down. The response always goes out with response header v0, even at v3+ (the
codec applies that rule). From v3 two features are advertised, supported and finalized: `transaction.version`
2 (KIP-890's transactions v2, KIP-1022), from which current clients know to send Produce v12, EndTxn v5 and
TxnOffsetCommit v5 and to skip AddPartitionsToTxn and AddOffsetsToTxn; and `group.version` 1, the consumer
group protocol of KIP-848 (ConsumerGroupHeartbeat), which admin tools check before using it. Kafka's other
features (`metadata.version`, `kraft.version`, `share.version`, `streams.version`, ...) belong to KRaft or to
protocols odradek does not have, and are left out.
"""

from odradek.broker.context import RequestContext
from odradek.broker.registry import advertised_versions, handler
from odradek.protocol.api_keys import ApiKey


TRANSACTION_VERSION = 2
GROUP_VERSION = 1
SUPPORTED_FEATURES = [{"name": "group.version", "min_version": 0, "max_version": GROUP_VERSION},
                      {"name": "transaction.version", "min_version": 0, "max_version": TRANSACTION_VERSION}]
FINALIZED_FEATURES = [{"name": "group.version", "min_version_level": GROUP_VERSION, "max_version_level": GROUP_VERSION},
                      {"name": "transaction.version", "min_version_level": TRANSACTION_VERSION,
                       "max_version_level": TRANSACTION_VERSION}]
FINALIZED_FEATURES_EPOCH = 0  # they never change


@handler(ApiKey.API_VERSIONS, 0, 4)
def api_versions(ctx: RequestContext, request: dict) -> dict:
    return {
        "error_code": 0,
        "api_keys": [{"api_key": k, "min_version": lo, "max_version": hi} for k, lo, hi in advertised_versions()],
        "throttle_time_ms": 0,
        "supported_features": SUPPORTED_FEATURES,
        "finalized_features_epoch": FINALIZED_FEATURES_EPOCH,
        "finalized_features": FINALIZED_FEATURES,
    }
