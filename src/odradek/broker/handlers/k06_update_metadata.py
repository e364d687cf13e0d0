"""UpdateMetadata (key 6), versions 0-8 — inter-broker.

The controller tells every broker the live brokers, the controller, and partitions' leaders, replicas, ISR and
offline replicas, which the broker keeps in its metadata cache (cluster/metadata.py) and answers Metadata
from. A partition whose leader is -2 belongs to a topic being deleted: the topic leaves the cache. Controller
and broker epochs are checked as for LeaderAndIsr (STALE_CONTROLLER_EPOCH, STALE_BROKER_EPOCH). v0-4 list
partitions ungrouped, v5+ by topic, v7+ with topic ids; brokers carry one endpoint (v0) or a list of endpoints
(v1+, with listener names from v3). A single node answers STALE_CONTROLLER_EPOCH.
"""

from odradek.broker.controller_requests import states_by_topic
from odradek.security.authorizer import CLUSTER_NAME, Operation as Op, ResourceType as Res
from odradek.broker.context import RequestContext
from odradek.broker.registry import handler
from odradek.cluster.metadata import BrokerInfo
from odradek.net.listeners import SECURITY_PROTOCOLS
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.errors import ErrorCode


@handler(ApiKey.UPDATE_METADATA, 0, 8)
def update_metadata(ctx: RequestContext, request: dict) -> dict:
    if not ctx.allowed(Op.CLUSTER_ACTION, Res.CLUSTER, CLUSTER_NAME):  # brokers only
        return {"error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED}
    version = ctx.api_version
    cluster = ctx.broker.cluster
    error = cluster.check_request(request["controller_epoch"], request["broker_epoch"] if version >= 5 else -1)
    if error:
        return {"error_code": error}
    topics = states_by_topic(request, grouped=version >= 5, with_ids=version >= 7)
    inter_broker = ctx.broker.listeners.inter_broker
    brokers = []
    for b in request["live_brokers"]:
        if version == 0:
            brokers.append(BrokerInfo(b["id"], b["v0_host"], b["v0_port"]))
            continue
        # before v3 an endpoint is named by its security protocol, which is then also its listener name
        endpoints = tuple((e["listener"] if version >= 3 else SECURITY_PROTOCOLS[e["security_protocol"]],
                           e["host"], e["port"]) for e in b["endpoints"]
                          if version >= 3 or 0 <= e["security_protocol"] < len(SECURITY_PROTOCOLS))
        if endpoints:
            _, host, port = next((e for e in endpoints if e[0] == inter_broker), endpoints[0])
            brokers.append(BrokerInfo(b["id"], host, port, b["rack"] if version >= 2 else None, endpoints))
    cluster.update_metadata(request["controller_id"], request["controller_epoch"], brokers, topics)
    return {"error_code": 0}
