"""ListConfigResources (key 74), versions 0-1 (v0 was ListClientMetricsResources, KIP-714; v1 KIP-1142).

Needs DESCRIBE_CONFIGS on the cluster (else CLUSTER_AUTHORIZATION_FAILED and nothing listed). v0 lists the
client metrics subscriptions: odradek has none (broker/client_telemetry.py), so the list is empty. v1 lists
the config resources of the types asked for (none asked: all of them), as Kafka does: groups that have
configs set (32), client metrics subscriptions (16, none), this broker's loggers (8, named by its id), the
brokers of the cluster (4, by id) and every topic (2, internal ones included); a type outside these is
UNSUPPORTED_VERSION for the whole request.
"""

from odradek.security.authorizer import CLUSTER_NAME, Operation as Op, ResourceType as Res
from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
SUPPORTED_TYPES = (GROUP, CLIENT_METRICS, BROKER_LOGGER, BROKER, TOPIC)  # the order they are listed in


def _names(ctx: RequestContext, kind: int) -> list[str]:
    broker = ctx.broker
    if kind == GROUP:
        share_groups = broker.coordinator.share_groups
        return sorted({g for configs in (share_groups.group_configs, share_groups.remote_configs)
                       for g, values in configs.items() if values})
    if kind == BROKER_LOGGER:
        return [str(broker.node_id)]
    if kind == BROKER:
        return [str(node_id) for node_id in sorted(broker.metadata.brokers)] or [str(broker.node_id)]
    if kind == TOPIC:
        return sorted(t.name for t in broker.metadata.all_topics())
    return []  # CLIENT_METRICS: no subscriptions


@handler(ApiKey.LIST_CONFIG_RESOURCES, 0, 1)
def list_config_resources(ctx: RequestContext, request: dict) -> dict:
    if not ctx.allowed(Op.DESCRIBE_CONFIGS, Res.CLUSTER, CLUSTER_NAME):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "config_resources": []}
    if ctx.api_version == 0:
        return {"throttle_time_ms": 0, "error_code": 0, "config_resources": []}
    asked = set(request["resource_types"]) or set(SUPPORTED_TYPES)
    if not asked <= set(SUPPORTED_TYPES):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.UNSUPPORTED_VERSION, "config_resources": []}
    return {"throttle_time_ms": 0, "error_code": 0, "config_resources": [
        {"resource_name": name, "resource_type": kind} for kind in SUPPORTED_TYPES if kind in asked
        for name in _names(ctx, kind)]}
