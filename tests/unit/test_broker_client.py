"""The inter-broker client when its peer goes away: every failure to reach the other broker is
BrokerUnavailable (a ConnectionError, which forwarding code answers with a retriable error code such as
COORDINATOR_NOT_AVAILABLE), never RuntimeError from writing to a transport that closed under it (uvloop),
and nothing is left as an unretrieved exception. Real sockets on loopback, under uvloop and asyncio."""

from __future__ import annotations

import asyncio

import pytest
import uvloop

from odradek.cluster.broker_client import BrokerClient, BrokerUnavailable
from odradek.protocol.api_keys import ApiKey

LOOPS = {"uvloop": uvloop.new_event_loop, "asyncio": asyncio.new_event_loop}


def run_on(loop_name: str, body) -> list[dict]:
    """Run ``body()`` on a fresh loop of that kind; the loop's unhandled-exception reports."""
    loop = LOOPS[loop_name]()
    reports: list[dict] = []
    loop.set_exception_handler(lambda _, context: reports.append(context))
    try:
        loop.run_until_complete(body())
    finally:
        loop.close()
    return reports


async def closing_peer() -> asyncio.AbstractServer:
    """A broker that accepts connections and closes them at once."""
    async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    return await asyncio.start_server(accept, "127.0.0.1", 0)


@pytest.mark.parametrize("loop_name", sorted(LOOPS))
def test_a_request_to_a_peer_that_hangs_up_is_broker_unavailable(loop_name):
    async def body() -> None:
        server = await closing_peer()
        port = server.sockets[0].getsockname()[1]
        client = BrokerClient(2, "127.0.0.1", port, "test")
        for _ in range(5):
            with pytest.raises(BrokerUnavailable):
                await client.request(ApiKey.API_VERSIONS, 0, {}, timeout_s=5.0)
        client.close()
        server.close()
        await server.wait_closed()

    assert run_on(loop_name, body) == []


@pytest.mark.parametrize("loop_name", sorted(LOOPS))
def test_a_connection_closed_after_it_was_handed_out_is_broker_unavailable(loop_name):
    """The race of the issue: a request that waited for the connect gets a transport the peer has closed
    since; writing to it (RuntimeError under uvloop) must come back as BrokerUnavailable."""
    async def body() -> None:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = BrokerClient(2, "127.0.0.1", port, "test")
        transport = await client._connected()
        transport.close()
        await asyncio.sleep(0)
        with pytest.raises(BrokerUnavailable):
            await client._exchange(transport, ApiKey.API_VERSIONS, 0, {}, timeout_s=5.0)
        assert client._pending == {}
        client.close()
        server.close()
        await server.wait_closed()

    assert run_on(loop_name, body) == []
