"""The composition root: builds a broker from its configuration and serves it. In order: the listeners' setup
and their TLS and SASL sides, the broker (storage, the cluster layer, coordinators, security state; broker/core.py),
its logs loaded, the listeners opened (the controller's requests come through them, so they open before the
broker has joined; client requests are held until it knows its cluster), the broker started (cluster mode:
registration), and then the maintenance tick until a signal stops it all in reverse order. Everything below
(net/, broker/, cluster/, ...) is assembled here and imports nothing of it.

Serving: accept connections (one server per listener, TLS on SSL listeners), run the periodic
maintenance tick (which also reloads changed certificates and gives memory that closed connections held
back to the kernel: net/allocator.py), sweep idle connections (`connections.max.idle.ms`), and shut down
cleanly on signals.

The idle sweep is one task for every listener, not a timer per connection or per read: it runs
IDLE_SWEEPS_PER_PERIOD times per shortest idle period (at most every IDLE_SWEEP_MAX_S), so a connection is
closed between one and 1.2 idle periods after its last read. A TLS connection still in its handshake is
no KafkaConnection yet; the listener's ssl_handshake_timeout (the idle period, at most asyncio's 60 s)
closes it instead."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys
import time
from pathlib import Path
from typing import Awaitable, Callable

from odradek.broker.core import Broker
from odradek.cluster import ClusterError
from odradek.config import BrokerConfig, ConfigError
from odradek.legacy07.server import Kafka07Server
from odradek.net.allocator import FreedMemory
from odradek.net.connection import KafkaConnection
from odradek.net.framing import RequestMemory
from odradek.net.limits import ConnectionLimits
from odradek.net.listeners import Listener
from odradek.net.sasl import SaslListener, SaslSession
from odradek.net.tls import TlsListener

log = logging.getLogger(__name__)

READY_MARKER = "odradek: accepting connections on"
TICK_INTERVAL_S = 1.0
IDLE_SWEEPS_PER_PERIOD = 10
IDLE_SWEEP_MAX_S = 10.0
TLS_HANDSHAKE_TIMEOUT_MAX_S = 60.0  # asyncio's and uvloop's default


def run_broker(config: BrokerConfig, data_dir: Path, listen: tuple[str, int] | None,
               advertise: tuple[str, int] | None, run: Callable[[Awaitable[None]], None]) -> int:
    """Build the broker of ``config`` and serve it on the event loop ``run`` drives until SIGTERM or SIGINT;
    the process's exit status (2: a configuration error, 1: cannot listen or join the cluster)."""
    from odradek.broker.handlers import load_handlers
    from odradek.net.allocator import keep_freed_memory
    from odradek.net.listeners import listener_setup
    from odradek.net.tls import tls_listeners

    keep_freed_memory()
    load_handlers()
    try:
        listeners = listener_setup(config, listen, advertise)
        tls = tls_listeners(config, listeners)
        broker = Broker(config, data_dir, listeners)
        sasl = {b.name: SaslListener.from_config(config, b.name, broker.scram.get) for b in listeners.bind
                if b.uses_sasl}
        # other brokers are let in whatever max.connections says (cluster mode only: a single node has none)
        limits = ConnectionLimits(config, listeners.inter_broker if config.get("zookeeper.connect") else None)
        # dynamic broker configs (broker/dynamic_configs.py) reach the connection limits and the TLS listeners
        broker.reconfigure_hooks.append(limits.reconfigure)
        broker.reconfigure_hooks.extend(listener.reconfigure for listener in tls.values())
    except (ClusterError, ConfigError) as exc:
        print(f"odradek: configuration error: {exc}", file=sys.stderr)
        return 2
    broker.load()
    try:
        run(serve(broker, tls, sasl, limits))
    except ClusterError as exc:
        print(f"odradek: cannot join the cluster: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"odradek: cannot listen on {', '.join(map(str, listeners.bind))}: {exc}", file=sys.stderr)
        broker.close()
        return 1
    return 0


async def serve(broker: Broker, tls: dict[str, TlsListener], sasl: dict[str, SaslListener],
                limits: ConnectionLimits) -> None:
    """Serve ``broker`` on its listeners (``tls`` and ``sasl``: the TLS and SASL sides of those that use them,
    by listener name), within the connection ``limits``."""
    loop = asyncio.get_running_loop()
    max_request = broker.config.int("socket.request.max.bytes")
    connections: set[KafkaConnection] = set()
    queued_max = broker.config.int("queued.max.request.bytes")
    memory = RequestMemory(queued_max) if queued_max > 0 else None  # -1: no bound (Kafka's default)
    freed = FreedMemory()
    idle_s = {listener.name: broker.config.for_listener(listener.name, "connections.max.idle.ms") / 1000.0
              for listener in broker.listeners.bind}

    def connection_factory(listener: Listener):
        listener_idle_s = idle_s[listener.name]

        def make_connection() -> KafkaConnection:
            conn = KafkaConnection(broker, max_request, listener, tls.get(listener.name), memory)
            conn.limits = limits
            conn.freed = freed
            conn.max_idle_s = listener_idle_s
            if listener.name in sasl:
                conn.sasl = SaslSession(sasl[listener.name], "?")
            connections.add(conn)
            return conn
        return make_connection

    def drop_connections() -> None:
        for conn in list(connections):
            conn.close()
        connections.clear()

    broker.drop_connections = drop_connections
    metrics_server = None
    if broker.metrics is not None:  # metrics.listen: /metrics, /healthz and /readyz on this loop
        from odradek.broker.metrics import MetricsServer, parse_listen

        broker.metrics.connections = connections
        metrics_server = MetricsServer(broker.metrics, *parse_listen(broker.config.get("metrics.listen")))
        await metrics_server.start()
    servers = []
    kafka07 = Kafka07Server(broker, broker.listeners.legacy07, memory) if broker.listeners.legacy07 else None

    async def close_serving() -> None:
        """Close the listeners' servers, the 0.7 server and the metrics server (startup failure or shutdown)."""
        for server in servers:
            server.close()
        drop_connections()
        for server in servers:
            await server.wait_closed()
        if kafka07 is not None:
            await kafka07.close()
        if metrics_server is not None:
            await metrics_server.close()

    try:
        if kafka07 is not None:  # the Kafka 0.7 protocol: a server of its own (legacy07/)
            await kafka07.start()
        for listener in broker.listeners.bind:
            context = tls[listener.name].context if listener.name in tls else None
            tls_options = {}
            if context is not None:  # a handshake never finished is closed like an idle connection
                handshake_s = idle_s[listener.name]
                tls_options["ssl_handshake_timeout"] = (min(handshake_s, TLS_HANDSHAKE_TIMEOUT_MAX_S)
                                                        if handshake_s > 0 else TLS_HANDSHAKE_TIMEOUT_MAX_S)
            servers.append(await loop.create_server(connection_factory(listener), listener.host or None,
                                                    listener.port, reuse_address=True, backlog=1024, ssl=context,
                                                    **tls_options))
    except OSError:
        await close_serving()
        raise
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    bound = [server.sockets[0].getsockname() for server in servers]
    broker.listening_on({listener.name: address[1] for listener, address in zip(broker.listeners.bind, bound)})
    try:
        await broker.start()
        if kafka07 is not None:
            await kafka07.register()
    except Exception as exc:
        log.error("cannot join the cluster: %s", exc)
        await close_serving()
        broker.close()
        raise
    for listener, address in zip(broker.listeners.bind, bound):
        log.info("listener %s (%s) on %s:%d", listener.name, listener.security_protocol, address[0], address[1])
    if broker.metrics is not None:
        broker.metrics.ready = True
    print(f"{READY_MARKER} {bound[0][0]}:{bound[0][1]}", flush=True)
    sys.stdout.flush()

    async def ticker() -> None:
        while True:
            await asyncio.sleep(TICK_INTERVAL_S)
            try:
                broker.tick()
                if kafka07 is not None:
                    kafka07.tick()
                for listener in tls.values():
                    listener.reload_if_changed()
            except Exception:
                log.exception("maintenance tick failed")
            connections.difference_update([c for c in connections if not c.is_open])
            freed.trim_if_due()

    async def idle_sweeper(interval_s: float) -> None:
        while True:
            await asyncio.sleep(interval_s)
            now = time.monotonic()
            for conn in connections:  # closing one does not change the set (the ticker prunes it)
                conn.sweep_idle(now)

    tick_task = asyncio.create_task(ticker())
    idle_periods = [period for period in idle_s.values() if period > 0]
    sweep_task = None
    if idle_periods:
        sweep_every_s = min(min(idle_periods) / IDLE_SWEEPS_PER_PERIOD, IDLE_SWEEP_MAX_S)
        sweep_task = asyncio.create_task(idle_sweeper(sweep_every_s))
    try:
        await stop.wait()
    finally:
        log.info("shutting down")
        tick_task.cancel()
        if sweep_task is not None:
            sweep_task.cancel()
        await broker.shutdown()  # cluster mode: leadership moves away first (controlled shutdown)
        await close_serving()
        broker.close()
