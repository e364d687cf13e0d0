"""RequestContext: one request as a handler sees it (broker/handlers/): the broker serving it, the API key and
version, the header's correlation and client ids, the connection it came on (its principal), and what the
dispatch adds on the way (a quota's throttle time, the metrics' clock).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from odradek.net.connection import KafkaConnection


@dataclass
class RequestContext:
    broker: Any  # the Broker of core.py that serves it (core.py builds contexts, so it is not imported here)
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    connection: "KafkaConnection"
    throttle_ms: int = 0  # earned by a quota (security/quotas.py): sent as throttle_time_ms, the connection muted
    started: float = 0.0  # with metrics on (broker/metrics.py): perf_counter() at dispatch
    metrics_key: int = 0  # with metrics on: the API key its metrics count it under (a follower's Fetch apart)

    @property
    def quota_client(self) -> tuple[str, str]:
        """(user, client id) as quotas name them: the principal's name, the header's client id."""
        return self.connection.principal.partition(":")[2], self.client_id or ""

    def allowed(self, operation: int, resource_type: int, name: str) -> bool:
        """Whether the authorizer lets this connection's principal do ``operation`` on the resource."""
        conn = self.connection
        return self.broker.authorizer.authorize(conn.principal, conn.peer_host, operation, resource_type, name)
