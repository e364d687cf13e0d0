"""A real ZooKeeper server (Debian's `zookeeper` package, 3.8) run as a child process.

Cluster mode keeps its shared state in ZooKeeper; `odradek cluster run` and the cluster tests start one
standalone server with this class:

    with ZooKeeperServer(Path("data/zk")) as zk:      # port 0 (the default): a free loopback port
        print(zk.connect_string)                      # "127.0.0.1:40123"
        zk.restart()                                  # same port, same data

A three-node ensemble (a quorum, so that one server may die) is `ZooKeeperEnsemble`:

    ensemble = ZooKeeperEnsemble(Path("data/zk"), size=3).start()   # all three, in parallel
    ensemble.connect_string                         # "127.0.0.1:40123,127.0.0.1:40125,127.0.0.1:40127"
    ensemble.servers[0].kill(); ensemble.servers[0].start()   # one member down and back

`start()` writes `zoo.cfg` into the data directory (ZooKeeper's snapshots and transaction logs go to its
`version-2/` subdirectory), starts `java ... QuorumPeerMain zoo.cfg` with its output in `zookeeper.log`
there, and returns once the server answers the `ruok` four-letter command with `imok` and `conf` shows
this data directory (see `_serving`).

The classpath is `ODRADEK_ZOOKEEPER_CLASSPATH` when set, else the few jars a standalone server needs if
they are all in /usr/share/java, else `/usr/share/java/*`. Of Debian's jars, zookeeper.jar names most of
its dependencies (jute, slf4j-api, netty's buffer, common, handler and transport, ...) in its manifest's
Class-Path; netty-codec.jar is the one more that the Netty connection factory (see JVM_OPTIONS) needs.
netty-all.jar is an empty aggregate jar and is left out. The slf4j binding is slf4j-simple at WARN: as
quiet as slf4j-nop on a good start (two warnings), but a failed start leaves its cause (a port in use, a
bad dataDir) in the log. On this 2-core machine (busy with other tests) the server answered `ruok` after
0.55 s and served after 0.70 s (medians of 6), and 0.2 s later on `/usr/share/java/*`.

Not thread-safe: one owner starts and stops the server.
"""

from __future__ import annotations

import os
import shutil
import random
import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Sequence

JAVA_DIR = Path("/usr/share/java")
NARROW_JARS = ("zookeeper.jar", "zookeeper-jute.jar", "slf4j-api.jar", "slf4j-simple.jar", "netty-codec.jar")
CLASSPATH_ENV = "ODRADEK_ZOOKEEPER_CLASSPATH"
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
# Small heap and serial GC: a test server holds a few hundred znodes beside several brokers on two cores.
# C1 only (TieredStopAtLevel=1) starts faster; a test server never runs hot enough to miss C2.
# The Netty connection factory, not the default NIO one: ZooKeeper 3.8 listens a few hundred ms before it
# serves, and NIO fails to close a client connection that arrives then (a NullPointerException in
# NIOServerCnxn.close, ZOOKEEPER-5051), so the client hears nothing until its connect timeout, which
# kazoo sets to the session timeout: a broker reconnecting during a restart finds its session expired.
# Restarting the server under a connected kazoo client, NIO lost the session in 4 of 29 runs here, Netty
# in none of 35. Netty costs about 0.18 s more per start (serving after 0.70 s against 0.52 s).
JVM_OPTIONS = ("-Xms32m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
               "-Djava.net.preferIPv4Stack=true", "-Djava.awt.headless=true",
               "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-Dzookeeper.jmx.log4j.disable=true",
               "-Dzookeeper.serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory")
LOG_NAME = "zookeeper.log"
CONFIG_NAME = "zoo.cfg"
LOG4J_NAME = "log4j.properties"
# Only for the `/usr/share/java/*` classpath, where slf4j may bind to log4j 1.2: warnings to stderr (the log).
LOG4J_PROPERTIES = """log4j.rootLogger=WARN, stderr
log4j.appender.stderr=org.apache.log4j.ConsoleAppender
log4j.appender.stderr.Target=System.err
log4j.appender.stderr.layout=org.apache.log4j.PatternLayout
log4j.appender.stderr.layout.ConversionPattern=%d{ISO8601} %p %c: %m%n
"""
STOP_GRACE_S = 10.0
PORT_RETRIES = 3  # a port picked by us (port=0) may be taken before the server binds it: pick another


class ZooKeeperError(RuntimeError):
    """The server did not start (the message carries the end of its log)."""


def zookeeper_classpath() -> str:
    """The classpath the server runs with (see the module docstring)."""
    override = os.environ.get(CLASSPATH_ENV)
    if override:
        return override
    narrow = [JAVA_DIR / jar for jar in NARROW_JARS]
    if all(jar.is_file() for jar in narrow):
        return os.pathsep.join(str(jar) for jar in narrow)
    return str(JAVA_DIR / "*")


def zookeeper_unavailable() -> str | None:
    """Why a ZooKeeperServer cannot start here (no java, no ZooKeeper jars), or None if it can."""
    if shutil.which("java") is None:
        return "java not found (tools/install-system-deps.sh installs Debian's zookeeper and a JRE)"
    override = os.environ.get(CLASSPATH_ENV)
    if override:
        for entry in filter(None, override.split(os.pathsep)):
            path = Path(entry[:-1] if entry.endswith("*") else entry)
            if not path.exists():
                return f"{CLASSPATH_ENV} names {entry}, which does not exist"
        return None
    if not (JAVA_DIR / "zookeeper.jar").is_file():
        return f"{JAVA_DIR / 'zookeeper.jar'} not found (tools/install-system-deps.sh installs Debian's zookeeper)"
    return None


def _ephemeral_low() -> int:
    try:
        return int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def pick_free_port(host: str) -> int:
    """A port nothing listens on right now, chosen at random below the kernel's ephemeral range: the OS
    hands ports of that range to every outgoing connection, so a port picked there (bind to 0) may be a
    client's before the server that was to listen on it starts; below it only another pick can collide."""
    low = min(_ephemeral_low(), 65536)
    rng = random.SystemRandom()
    for _ in range(200):
        port = rng.randrange(10_000, low) if low > 11_000 else 0
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            return s.getsockname()[1]
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def four_letter_word(host: str, port: int, word: str, timeout: float = 1.0) -> str:
    """Send a four-letter command (`ruok`, `srvr`, `stat`) and return the whole answer ("" on no answer)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(word.encode("ascii"))
            sock.shutdown(socket.SHUT_WR)
            chunks = []
            while chunk := sock.recv(4096):
                chunks.append(chunk)
    except OSError:
        return ""
    return b"".join(chunks).decode("utf-8", errors="replace")


def end_process(proc: subprocess.Popen, grace: float) -> int:
    """End a child: SIGTERM and up to `grace` seconds to exit, then SIGKILL (at once if `grace` is 0).
    Returns its exit code."""
    if grace > 0 and proc.poll() is None:
        proc.terminate()
        try:
            return proc.wait(grace)
        except subprocess.TimeoutExpired:
            pass
    if proc.poll() is None:
        proc.kill()
    return proc.wait()


@dataclass(frozen=True)
class QuorumPeer:
    """One member of an ensemble as every member's zoo.cfg names it: `server.ID=host:peer_port:election_port`
    and the port its clients connect to."""

    server_id: int
    host: str
    client_port: int
    peer_port: int
    election_port: int

    def config_line(self) -> tuple[str, str]:
        return f"server.{self.server_id}", f"{self.host}:{self.peer_port}:{self.election_port}"


class ZooKeeperServer:
    """One ZooKeeper server process; restartable on the same port and data directory. Standalone unless
    `quorum` names the members of an ensemble (this one is `server_id` among them, on its client port);
    see ZooKeeperEnsemble.

    `tick_time_ms` is ZooKeeper's tick: sessions are checked for expiry once a tick. Clients may ask for
    any session timeout between `min_session_timeout_ms` and `max_session_timeout_ms` (1 s and 30 s by
    default; ZooKeeper's own bounds would be 2 and 20 ticks). `extra_config` adds zoo.cfg lines
    (e.g. `{"forceSync": "no"}`).
    """

    def __init__(self, data_dir: Path, host: str = "127.0.0.1", port: int = 0, tick_time_ms: int = 500,
                 min_session_timeout_ms: int = 1000, max_session_timeout_ms: int = 30000,
                 extra_config: dict[str, str] | None = None, server_id: int | None = None,
                 quorum: tuple[QuorumPeer, ...] = (), command_prefix: Sequence[str] = ()) -> None:
        self.data_dir = Path(data_dir).absolute()
        # runs the server elsewhere, e.g. `ip netns exec NS` (tests/faults/netns.py); the port must then be
        # given, since a free one is picked here, where `host` may not even exist
        self.command_prefix = list(command_prefix)
        if self.command_prefix and port == 0:
            raise ValueError("a server run under a command prefix needs an explicit port")
        self.server_id = server_id
        self.quorum = tuple(quorum)
        if self.quorum and server_id not in {peer.server_id for peer in self.quorum}:
            raise ValueError(f"server id {server_id} is not among the quorum's {[q.server_id for q in self.quorum]}")
        self.host = host
        self.port = port
        self.tick_time_ms = tick_time_ms
        self.min_session_timeout_ms = min_session_timeout_ms
        self.max_session_timeout_ms = max_session_timeout_ms
        self.extra_config = dict(extra_config or {})
        self._auto_port = port == 0
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def connect_string(self) -> str:
        """`host:port`, the form ZooKeeper clients (and `zookeeper.connect`) take."""
        return f"{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.data_dir / LOG_NAME

    @property
    def config_path(self) -> Path:
        return self.data_dir / CONFIG_NAME

    def is_running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, timeout: float = 30.0) -> "ZooKeeperServer":
        """Start the server and wait until it serves (see `_serving`); ZooKeeperError (with the log's
        tail) if it exits or does not serve within `timeout` seconds. With port 0, a port that turns out
        to be taken is replaced by another (up to PORT_RETRIES times)."""
        if self.is_running():
            return self
        reason = zookeeper_unavailable()
        if reason is not None:
            raise ZooKeeperError(f"cannot start ZooKeeper: {reason}")
        deadline = time.monotonic() + timeout
        for attempt in range(PORT_RETRIES):
            if self.port == 0 or (self._auto_port and attempt > 0):
                self.port = pick_free_port(self.host)
            try:
                return self._start_once(deadline)
            except ZooKeeperError as exc:
                port_taken = "Address already in use" in str(exc)
                if not (self._auto_port and port_taken) or attempt == PORT_RETRIES - 1:
                    raise
        raise AssertionError("unreachable")

    def _start_once(self, deadline: float) -> "ZooKeeperServer":
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._write_config()
        log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        cmd = [*self.command_prefix, "java", *JVM_OPTIONS, f"-Dlog4j.configuration=file:{self.data_dir / LOG4J_NAME}",
               "-cp", zookeeper_classpath(), MAIN_CLASS, str(self.config_path)]
        with open(self.log_path, "ab") as log:
            # a session of its own: a Ctrl-C meant for the owner (odradek cluster run) does not reach the
            # server before the brokers that use it have stopped
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                         cwd=self.data_dir, start_new_session=True)
        while True:
            if self.proc.poll() is not None:
                code, self.proc = self.proc.returncode, None
                raise ZooKeeperError(f"ZooKeeper exited with {code} on {self.connect_string}; "
                                     f"log:\n{self.log_tail(since=log_offset)}")
            if self._serving():
                self._auto_port = False  # clients will know this port: restarts keep it
                return self
            if time.monotonic() >= deadline:
                self.kill()
                raise ZooKeeperError(f"ZooKeeper did not serve on {self.connect_string} in time; "
                                     f"log:\n{self.log_tail(since=log_offset)}")
            time.sleep(0.02)

    def _serving(self) -> bool:
        """True once this server serves clients. `ruok` says `imok` as soon as the port is open, a few
        hundred ms before the server takes sessions (until then other commands answer "not currently
        serving requests"), and it may come from another server on a port we failed to bind: `conf`
        must then show our data directory."""
        if four_letter_word(self.host, self.port, "ruok", timeout=0.5) != "imok":
            return False
        conf = four_letter_word(self.host, self.port, "conf", timeout=0.5)
        return f"dataDir={self.data_dir / 'version-2'}" in conf.splitlines()

    def _write_config(self) -> None:
        settings = {
            "tickTime": str(self.tick_time_ms),
            "dataDir": str(self.data_dir),
            "clientPort": str(self.port),
            "clientPortAddress": self.host,
            "minSessionTimeout": str(self.min_session_timeout_ms),
            "maxSessionTimeout": str(self.max_session_timeout_ms),
            "maxClientCnxns": "0",  # no per-address limit: every broker and test client comes from 127.0.0.1
            "admin.enableServer": "false",
            "4lw.commands.whitelist": "ruok,srvr,stat,conf",
        }
        if self.quorum:
            # a member waits for a quorum before it serves; initLimit/syncLimit are in ticks
            settings.update({"initLimit": "20", "syncLimit": "10"})
            settings.update(peer.config_line() for peer in self.quorum)
            (self.data_dir / "myid").write_text(f"{self.server_id}\n")
        settings.update(self.extra_config)
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
        (self.data_dir / LOG4J_NAME).write_text(LOG4J_PROPERTIES)

    def log_tail(self, n: int = 4000, since: int = 0) -> str:
        """The last `n` characters of the log (from byte `since`: this start's output only)."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(since)
                return f.read().decode("utf-8", errors="replace")[-n:]
        except OSError:
            return ""

    def stop(self, grace: float = STOP_GRACE_S) -> int | None:
        """SIGTERM, then SIGKILL if the server is still there after `grace` seconds; returns the exit code
        (None if it was not started)."""
        proc, self.proc = self.proc, None
        return None if proc is None else end_process(proc, grace)

    def kill(self) -> None:
        """SIGKILL: the server stops at once; what it had written to its transaction log stays."""
        proc, self.proc = self.proc, None
        if proc is not None:
            end_process(proc, grace=0)

    def restart(self, timeout: float = 30.0) -> "ZooKeeperServer":
        """Stop (if running) and start again on the same port with the same data."""
        self.stop()
        return self.start(timeout)

    def __enter__(self) -> "ZooKeeperServer":
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def mode(self) -> str:
        """What `srvr` says this server is: "standalone", "leader", "follower" ("" when it does not serve)."""
        for line in four_letter_word(self.host, self.port, "srvr").splitlines():
            if line.startswith("Mode: "):
                return line[len("Mode: "):].strip()
        return ""

    def __repr__(self) -> str:
        state = "running" if self.is_running() else "stopped"
        return f"ZooKeeperServer({self.connect_string}, {self.data_dir}, {state})"


class ZooKeeperEnsemble:
    """`size` ZooKeeperServers forming one quorum on loopback, each in `base_dir/server-ID`: what a
    production ZooKeeper is, so a cluster can ride out the death of one server (any minority).

    The ports (client, peer, election: three per server) are picked when it is built, since every member's
    zoo.cfg names them all; a port taken before its server binds it fails `start()` (ZooKeeperError).
    Each server is restartable alone (`servers[i].kill()`, `.start()`): a member that comes back rejoins
    the quorum and then serves. `connect_string` lists every member, as `zookeeper.connect` takes them.
    Not thread-safe: one owner starts and stops it.
    """

    def __init__(self, base_dir: Path, size: int = 3, host: str = "127.0.0.1", **server_options: Any) -> None:
        if size < 1:
            raise ValueError("an ensemble needs at least one server")
        self.base_dir = Path(base_dir).absolute()
        taken: set[int] = set()

        def port() -> int:
            for _ in range(100):  # the OS may hand out a port twice while none is bound yet
                chosen = pick_free_port(host)
                if chosen not in taken:
                    taken.add(chosen)
                    return chosen
            raise ZooKeeperError("no free ports for the ensemble")

        self.peers = tuple(QuorumPeer(i, host, port(), port(), port()) for i in range(1, size + 1))
        self.servers = [ZooKeeperServer(self.base_dir / f"server-{peer.server_id}", host=host,
                                        port=peer.client_port, server_id=peer.server_id, quorum=self.peers,
                                        **server_options)
                        for peer in self.peers]

    @property
    def connect_string(self) -> str:
        """`host:port,host:port,...`: every member, for `zookeeper.connect`."""
        return ",".join(server.connect_string for server in self.servers)

    def start(self, timeout: float = 60.0) -> "ZooKeeperEnsemble":
        """Start every member that is not running, in parallel (none serves before a quorum is up), and wait
        until each serves; ZooKeeperError (naming each failure) if one does not."""
        todo = [server for server in self.servers if not server.is_running()]
        if todo:
            with ThreadPoolExecutor(max_workers=len(todo)) as pool:
                futures = [(server, pool.submit(server.start, timeout)) for server in todo]
            errors = [f"{server!r}: {f.exception()}" for server, f in futures if f.exception() is not None]
            if errors:
                raise ZooKeeperError("\n".join(errors))
        return self

    def stop(self) -> None:
        """Stop every member (in parallel: a member left alone would wait for the others' quorum)."""
        with ThreadPoolExecutor(max_workers=len(self.servers)) as pool:
            list(pool.map(lambda server: server.stop(), self.servers))

    def leader(self) -> ZooKeeperServer | None:
        """The member that leads the quorum now, if one answers so."""
        return next((server for server in self.servers if server.is_running() and server.mode() == "leader"), None)

    def __enter__(self) -> "ZooKeeperEnsemble":
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def __repr__(self) -> str:
        return f"ZooKeeperEnsemble({self.connect_string}, {self.base_dir})"
