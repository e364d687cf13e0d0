"""GetTelemetrySubscriptions (key 71), version 0 (KIP-714), answered as Kafka 4.4 does without a telemetry plugin.

Not advertised in ApiVersions (so clients do not collect metrics for nobody), but answered: a zero client
instance id gets a new one; the answer has no requested metrics, a subscription id, the accepted compression
types (zstd, lz4, gzip, snappy), a push interval of 5 minutes and `telemetry.max.bytes`. Asking again within
the push interval → THROTTLING_QUOTA_EXCEEDED (see `broker.client_telemetry`).
"""

from odradek.broker.context import RequestContext
from odradek.broker.core import now_ms
from odradek.broker.registry import handler
from odradek.protocol.api_keys import ApiKey


@handler(ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, 0, 0, advertised=False)
def get_telemetry_subscriptions(ctx: RequestContext, request: dict) -> dict:
    body = ctx.broker.client_telemetry.subscriptions(bytes(request["client_instance_id"]), now_ms())
    body["throttle_time_ms"] = 0
    return body
