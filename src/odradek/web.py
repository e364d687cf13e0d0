"""What odradek's HTTP commands (`odradek console`, `odradek registry`) share: reading `--listen` and
`--command-config`, and serving a Starlette app with uvicorn until SIGTERM or Ctrl-C.

Each prints a ready line (its READY_MARKER and the URL) once its socket listens (tests and service managers wait for it) and
exits 0 after a clean stop.
"""

from __future__ import annotations

import signal
import sys
from pathlib import Path
from typing import Any


def listen_address(prog: str, listen: str) -> tuple[str, int] | None:
    """HOST:PORT (IPv6 in brackets) as (host, port); None after printing why it is not one."""
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit():
        print(f"odradek {prog}: --listen expects HOST:PORT, got {listen!r}", file=sys.stderr)
        return None
    return host.strip("[]") or "127.0.0.1", int(port)


def client_properties(prog: str, path: Path | None) -> dict[str, str] | None:
    """The `--command-config` file's client properties ({} without one); None after printing why not."""
    from odradek.config import read_properties

    try:
        return read_properties(path) if path is not None else {}
    except (OSError, ValueError) as exc:
        print(f"odradek {prog}: --command-config: {exc}", file=sys.stderr)
        return None


def serve(app: Any, host: str, port: int, ready: str, log_level: str, lifespan: str = "off", path: str = "") -> bool:
    """Serve `app` until SIGTERM or SIGINT; print `ready` followed by the URL (ending in `path`) once
    listening. Whether the server started (a taken port, say, stops it before)."""
    import uvicorn

    class Server(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            if self.started:
                shown = f"[{host}]" if ":" in host else host
                print(f"{ready}http://{shown}:{port}{path}", flush=True)

    server = Server(uvicorn.Config(app, host=host, port=port, log_level=log_level.lower(), access_log=False,
                                   lifespan=lifespan))
    # uvicorn shuts down gracefully on SIGTERM/SIGINT, then restores the handlers it found and raises the
    # signal again; with these no-op handlers restored, that second delivery does nothing and the command
    # exits 0, as a service manager expects of a clean stop
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: None)
    server.run()
    return bool(server.started)
