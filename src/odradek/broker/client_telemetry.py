"""ClientTelemetry: the broker side of KIP-714 for a broker without a telemetry plugin.

Kafka answers GetTelemetrySubscriptions and PushTelemetry even when no metrics reporter receives client
metrics; it then leaves the two APIs out of ApiVersions, so clients never start pushing, and a client that
asks anyway is told that no metric is wanted. This class keeps what those answers need, per client
instance id (one per client process, made here when a client sends the zero id):

* the subscription id (derived from the instance id: there are no subscriptions that could change it);
* when the client last asked and last pushed: a GetTelemetrySubscriptions or a push sooner than
  `push_interval_ms` after the previous request is THROTTLING_QUOTA_EXCEEDED (a push right after a Get is
  not, and a terminating push never is);
* whether it sent its terminating push: later pushes are INVALID_REQUEST.

Pushes are checked (subscription id, compression type, size against `telemetry.max.bytes`) and dropped.
Instances not heard of for three push intervals are forgotten; at most MAX_INSTANCES are kept (the oldest
go first).

Not thread-safe; owned by the event loop.
"""

from __future__ import annotations

import uuid
import zlib
from collections import OrderedDict
from dataclasses import dataclass

from odradek.protocol.errors import ErrorCode

ZERO_UUID = bytes(16)
PUSH_INTERVAL_MS = 300_000
MAX_INSTANCES = 16_384
ACCEPTED_COMPRESSION = [4, 3, 1, 2]  # zstd, lz4, gzip, snappy, in Kafka's order of preference


@dataclass
class _Instance:
    subscription_id: int
    last_get_ms: int = -1
    last_push_ms: int = -1
    terminating: bool = False
    last_seen_ms: int = 0


def _subscription_id(instance_id: bytes) -> int:
    value = zlib.crc32(instance_id)
    return value - (1 << 32) if value >= 1 << 31 else value


class ClientTelemetry:
    def __init__(self, max_bytes: int, push_interval_ms: int = PUSH_INTERVAL_MS) -> None:
        self.max_bytes = max_bytes
        self.push_interval_ms = push_interval_ms
        self._instances: OrderedDict[bytes, _Instance] = OrderedDict()

    def _forget_stale(self, now_ms: int) -> None:
        horizon = now_ms - 3 * self.push_interval_ms
        while self._instances:
            oldest = next(iter(self._instances.values()))
            if oldest.last_seen_ms >= horizon and len(self._instances) <= MAX_INSTANCES:
                break
            self._instances.popitem(last=False)

    def _seen(self, instance_id: bytes, instance: _Instance, now_ms: int) -> None:
        instance.last_seen_ms = now_ms
        self._instances[instance_id] = instance
        self._instances.move_to_end(instance_id)

    def subscriptions(self, instance_id: bytes, now_ms: int) -> dict:
        """GetTelemetrySubscriptions: the (empty) subscription, or THROTTLING_QUOTA_EXCEEDED."""
        self._forget_stale(now_ms)
        if instance_id == ZERO_UUID:
            instance_id = uuid.uuid4().bytes
        instance = self._instances.get(instance_id) or _Instance(_subscription_id(instance_id))
        last = max(instance.last_get_ms, instance.last_push_ms)
        if last >= 0 and now_ms - last < self.push_interval_ms:
            self._seen(instance_id, instance, now_ms)
            return {"error_code": ErrorCode.THROTTLING_QUOTA_EXCEEDED}
        instance.last_get_ms = now_ms
        self._seen(instance_id, instance, now_ms)
        return {"error_code": 0, "client_instance_id": instance_id, "subscription_id": instance.subscription_id,
                "accepted_compression_types": list(ACCEPTED_COMPRESSION), "push_interval_ms": self.push_interval_ms,
                "telemetry_max_bytes": self.max_bytes, "delta_temporality": True, "requested_metrics": []}

    def push(self, instance_id: bytes, subscription_id: int, terminating: bool, compression_type: int,
             metrics: bytes, now_ms: int) -> int:
        """PushTelemetry: an error code (the metrics themselves go nowhere)."""
        self._forget_stale(now_ms)
        if instance_id == ZERO_UUID:
            return ErrorCode.INVALID_REQUEST
        instance = self._instances.get(instance_id)
        if instance is None:
            return ErrorCode.UNKNOWN_SUBSCRIPTION_ID
        self._seen(instance_id, instance, now_ms)
        if instance.terminating:
            return ErrorCode.INVALID_REQUEST
        early = instance.last_push_ms >= 0 and instance.last_get_ms <= instance.last_push_ms and \
            now_ms - instance.last_push_ms < self.push_interval_ms
        if early and not terminating:
            return ErrorCode.THROTTLING_QUOTA_EXCEEDED
        instance.last_push_ms = now_ms
        if subscription_id != instance.subscription_id:
            return ErrorCode.UNKNOWN_SUBSCRIPTION_ID
        if compression_type != 0 and compression_type not in ACCEPTED_COMPRESSION:
            return ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
        if len(metrics) > self.max_bytes:
            return ErrorCode.TELEMETRY_TOO_LARGE
        if terminating:
            instance.terminating = True
        return 0
