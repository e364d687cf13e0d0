"""AlterConfigs (key 33), versions 0-2.

The legacy, non-incremental API: a topic's overrides are REPLACED by the given set (configs not named
revert to their defaults), after every value is validated (INVALID_CONFIG). `validate_only` checks and
changes nothing. Changes persist in the topic registry (in a cluster: ZooKeeper's `/config/topics`, with
a change notification every broker follows) and reach the partition logs at once (retention, segment
size, flush policy). Broker resources (this broker's id, or "" for the cluster default) replace that
entity's dynamic configs, checked as Kafka 4.4 checks them (broker/broker_configs.py; a null value →
INVALID_REQUEST). Other resource types, BROKER_LOGGER (8) included, are INVALID_REQUEST
("Unknown resource type 8") before any authorization, as Kafka answers: log levels change only through
IncrementalAlterConfigs.
"""

from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.broker.topic_configs import RESOURCE_BROKER, apply_broker_configs, apply_overrides, resource_error, \
    response_entry
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode


@handler(ApiKey.ALTER_CONFIGS, 0, 2)
async def alter_configs(ctx: RequestContext, request: dict) -> dict:
    responses = []
    for resource in request["resources"]:
        problem = resource_error(ctx, resource)
        if problem is None and resource["resource_type"] == RESOURCE_BROKER:
            nulls = [c["name"] for c in resource["configs"] if c["value"] is None]
            problem = (ErrorCode.INVALID_REQUEST, f"Null value not supported for : {nulls[0]}") if nulls else None
        if problem is None and resource["resource_type"] == RESOURCE_BROKER:
            problem = await apply_broker_configs(ctx, resource["resource_name"],
                                                 {c["name"]: c["value"] for c in resource["configs"]}, True,
                                                 request["validate_only"])
        elif problem is None:
            overrides = {c["name"]: c["value"] for c in resource["configs"] if c["value"] is not None}
            problem = await apply_overrides(ctx, resource["resource_name"], overrides, request["validate_only"])
        responses.append(response_entry(resource, *problem))
    return {"throttle_time_ms": 0, "responses": responses}
