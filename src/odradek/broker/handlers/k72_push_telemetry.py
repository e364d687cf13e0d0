"""PushTelemetry (key 72), version 0 (KIP-714), answered as Kafka 4.4 does without a telemetry plugin.

Not advertised in ApiVersions. A push is checked and its metrics dropped: zero client instance id or a push
after the terminating one → INVALID_REQUEST; an instance id this broker did not hand out (or forgot) →
UNKNOWN_SUBSCRIPTION_ID; a push sooner than the push interval after the last one (a terminating push
excepted) → THROTTLING_QUOTA_EXCEEDED; then a wrong subscription id → UNKNOWN_SUBSCRIPTION_ID, an unknown
compression type → UNSUPPORTED_COMPRESSION_TYPE, more than `telemetry.max.bytes` → TELEMETRY_TOO_LARGE
(see `broker.client_telemetry`).
"""

from odradek.broker.context import RequestContext
from odradek.broker.core import now_ms
from odradek.broker.registry import handler
from odradek.protocol.api_keys import ApiKey


@handler(ApiKey.PUSH_TELEMETRY, 0, 0, advertised=False)
def push_telemetry(ctx: RequestContext, request: dict) -> dict:
    error = ctx.broker.client_telemetry.push(bytes(request["client_instance_id"]), request["subscription_id"],
                                             request["terminating"], request["compression_type"],
                                             bytes(request["metrics"]), now_ms())
    return {"throttle_time_ms": 0, "error_code": error}
