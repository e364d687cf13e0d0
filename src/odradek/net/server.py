"""The listener: accepts connections, runs the periodic maintenance tick, and shuts down cleanly on signals."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys

from odradek.broker.core import Broker
from odradek.net.connection import KafkaConnection

log = logging.getLogger(__name__)

READY_MARKER = "odradek: accepting connections on"
TICK_INTERVAL_S = 1.0


async def serve(broker: Broker, host: str, port: int) -> None:
    loop = asyncio.get_running_loop()
    max_request = broker.config.int("socket.request.max.bytes")
    connections: set[KafkaConnection] = set()

    def make_connection() -> KafkaConnection:
        conn = KafkaConnection(broker, max_request)
        connections.add(conn)
        return conn

    def drop_connections() -> None:
        for conn in list(connections):
            conn.close()
        connections.clear()

    broker.drop_connections = drop_connections
    server = await loop.create_server(make_connection, host, port, reuse_address=True, backlog=1024)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    bound = server.sockets[0].getsockname()
    broker.listening_on(bound[0], bound[1])
    try:
        await broker.start()
    except Exception as exc:
        log.error("cannot join the cluster: %s", exc)
        server.close()
        broker.close()
        raise
    print(f"{READY_MARKER} {bound[0]}:{bound[1]}", flush=True)
    sys.stdout.flush()

    async def ticker() -> None:
        while True:
            await asyncio.sleep(TICK_INTERVAL_S)
            try:
                broker.tick()
            except Exception:
                log.exception("maintenance tick failed")
            connections.difference_update([c for c in connections if not c.is_open])

    tick_task = asyncio.create_task(ticker())
    try:
        await stop.wait()
    finally:
        log.info("shutting down")
        tick_task.cancel()
        await broker.shutdown()  # cluster mode: leadership moves away first (controlled shutdown)
        server.close()
        for conn in list(connections):
            conn.close()
        await server.wait_closed()
        broker.close()
