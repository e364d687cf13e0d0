"""Apache Kafka, the reference broker: start one as a single-node KRaft broker+controller on loopback.

`make reference` (reference/install.sh) puts Kafka's jars in the cache, `<reference dir>/kafka-<version>/libs`,
where the reference dir is $ODRADEK_REFERENCE_DIR or ~/.cache/odradek/reference and the version is
`kafka.version` in reference/pom.xml. This module starts that Kafka the way a 4.x distribution's scripts do,
without the scripts:

* `kafka-storage.sh format -t ID -c server.properties` is `kafka.tools.StorageTool format`; with the
  static quorum (`controller.quorum.voters`) a cluster id is all it needs (no `--standalone`).
* `kafka-server-start.sh server.properties` is `java <heap> <log4j> -cp libs/* kafka.Kafka server.properties`.

Everything it writes lives in one temporary directory: server.properties, log4j2.properties (root logger at
WARN into kafka.log there), the log dirs and the JVM's own output (kafka.out). Ready means a connection to
the PLAINTEXT port answers ApiVersions v0 and a Metadata v1 request lists a broker. Stopping sends SIGTERM,
then SIGKILL after a grace period, and removes the directory unless asked to keep it.

Importable with no test framework (tests/reference loads it by path); also a command:

    .venv/bin/python reference/kafka.py [--port 9092] [--keep]

starts Kafka in the foreground, prints its bootstrap address and start time, and stops it on Ctrl-C.
"""

from __future__ import annotations

import argparse
import base64
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
POM = HERE / "pom.xml"
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0
HEAP = "512m"
# For a short-lived broker on a shared 2-core machine: the serial collector (no GC threads) and the C1 compiler
# only (start-up about 9 s instead of 14 s here; Kafka's scripts use G1 and both compilers, which pay off for
# long runs, not for this).
JVM_OPTIONS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true",
               "-Djava.net.preferIPv4Stack=true")


def kafka_version() -> str:
    """`kafka.version` of reference/pom.xml, the one place it is named."""
    m = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", POM.read_text())
    if m is None:
        raise RuntimeError(f"no <kafka.version> in {POM}")
    return m.group(1).strip()


def reference_dir() -> Path:
    return Path(os.environ.get("ODRADEK_REFERENCE_DIR") or Path.home() / ".cache" / "odradek" / "reference")


def install_dir() -> Path:
    return reference_dir() / f"kafka-{kafka_version()}"


@dataclass(frozen=True)
class InstallStatus:
    """Whether `make reference` left an install; if not, why (from its marker file, when there is one)."""

    installed: bool
    libs: Path
    reason: str = ""
    unreachable: bool = False  # the last attempt could not reach Maven's repository


def install_status() -> InstallStatus:
    libs = install_dir() / "libs"
    stamp = install_dir() / ".installed"
    if stamp.is_file() and (libs / f"kafka_2.13-{kafka_version()}.jar").is_file():
        return InstallStatus(True, libs)
    marker = reference_dir() / f"kafka-{kafka_version()}.failed"
    if marker.is_file():
        fields = dict(line.split("=", 1) for line in marker.read_text().splitlines() if "=" in line)
        kind = fields.get("kind", "error")
        return InstallStatus(False, libs, f"`make reference` failed ({kind}, {fields.get('date', '?')}): "
                                          f"{fields.get('reason', '?')}", unreachable=kind == "unreachable")
    return InstallStatus(False, libs, f"Apache Kafka {kafka_version()} is not installed in {install_dir()}: "
                                      "run `make reference`")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def random_cluster_id() -> str:
    """What `kafka-storage.sh random-uuid` prints: 16 random bytes, URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.file.ref = file
"""


def server_properties(port: int, controller_port: int, log_dir: Path, settings: dict[str, str]) -> str:
    props = {
        "process.roles": "broker,controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
        "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
        "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(log_dir),
        "num.partitions": "1",
        "auto.create.topics.enable": "true",  # odradek's default, and Kafka's
        "offsets.topic.replication.factor": "1",
        "transaction.state.log.replication.factor": "1",
        "transaction.state.log.min.isr": "1",
        "share.coordinator.state.topic.replication.factor": "1",
        "share.coordinator.state.topic.min.isr": "1",
        "group.initial.rebalance.delay.ms": "0",
    }
    props.update(settings)
    return "".join(f"{k}={v}\n" for k, v in props.items())


# ------------------------------------------------------------------------- readiness, by hand-made requests

def _request(sock: socket.socket, api_key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    client = b"odradek-reference"
    header = struct.pack(">hhih", api_key, version, correlation_id, len(client)) + client
    sock.sendall(struct.pack(">i", len(header) + len(body)) + header + body)
    size = struct.unpack(">i", _recv(sock, 4))[0]
    payload = _recv(sock, size)
    if struct.unpack_from(">i", payload)[0] != correlation_id:
        raise OSError("correlation id mismatch")
    return payload[4:]


def _recv(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise OSError("connection closed")
        buf += chunk
    return bytes(buf)


def probe(host: str, port: int, timeout: float = 2.0) -> bool:
    """True when the broker answers ApiVersions v0 without error and Metadata v1 lists a broker."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            api_versions = _request(sock, 18, 0, 1, b"")
            if struct.unpack_from(">h", api_versions)[0] != 0:
                return False
            metadata = _request(sock, 3, 1, 2, struct.pack(">i", -1))  # topics: null, i.e. all
            return struct.unpack_from(">i", metadata)[0] > 0  # brokers array length
    except (OSError, struct.error):
        return False


# ---------------------------------------------------------------------------------------------- process

class KafkaReference:
    """One Apache Kafka process: a single-node KRaft broker and controller on 127.0.0.1.

    `settings` are more server.properties lines (they win over the defaults above). Not thread-safe.
    """

    host = "127.0.0.1"

    def __init__(self, libs: Path | None = None, port: int | None = None, settings: dict[str, str] | None = None,
                 work_dir: Path | None = None, keep: bool = False, java: str | None = None,
                 heap: str = HEAP, jvm_options: tuple[str, ...] = JVM_OPTIONS, cluster_id: str | None = None,
                 controller_port: int | None = None) -> None:
        self.libs = libs or install_status().libs
        self.port = port or free_port()
        # several processes make one cluster when they share a cluster id and their settings name each other's
        # node.id and controller.quorum.voters (bench/kafka_cluster.py)
        self.controller_port = controller_port or free_port()
        self.cluster_id = cluster_id or random_cluster_id()
        self.settings = dict(settings or {})
        self.keep = keep
        self.java = java or shutil.which("java") or "java"
        self.heap = heap
        self.jvm_options = tuple(jvm_options)  # after -Xmx<heap>; bench/ passes kafka-server-start.sh's own
        self._own_dir = work_dir is None
        self.work_dir = Path(work_dir or tempfile.mkdtemp(prefix="odradek-kafka-"))
        self.proc: subprocess.Popen | None = None
        self.start_seconds: float | None = None  # format + JVM start until ready
        self.format_seconds: float | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.work_dir / "kafka.log"

    @property
    def out_path(self) -> Path:
        return self.work_dir / "kafka.out"

    def _java(self, main: str, *args: str) -> list[str]:
        return [self.java, f"-Xmx{self.heap}", *self.jvm_options,
                f"-Dlog4j2.configurationFile={self.work_dir / 'log4j2.properties'}",
                "-cp", f"{self.libs}/*", main, *args]

    def prepare(self, timeout: float = START_TIMEOUT_S) -> list[str]:
        """What start() does before the broker's process: write server.properties and log4j2.properties into
        the work dir and format its log dir (kafka-storage format). Returns the broker's argv
        (kafka-server-start), for a caller that starts and times the process itself (bench/brokers.py)."""
        if not (self.libs / f"kafka_2.13-{kafka_version()}.jar").is_file():
            raise RuntimeError(install_status().reason or f"no Kafka jars in {self.libs}")
        t0 = time.monotonic()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        props = self.work_dir / "server.properties"
        props.write_text(server_properties(self.port, self.controller_port, self.work_dir / "data", self.settings))
        (self.work_dir / "log4j2.properties").write_text(LOG4J2.format(log=self.log_path))
        # --cluster-id=ID, not -t ID: one random id in 64 begins with "-", which argparse takes for an option
        fmt = subprocess.run(self._java("kafka.tools.StorageTool", "format", f"--cluster-id={self.cluster_id}",
                                        "-c", str(props), "--ignore-formatted"),
                             capture_output=True, text=True, timeout=timeout)
        if fmt.returncode != 0:
            raise RuntimeError(f"kafka-storage format exited {fmt.returncode}: {fmt.stderr or fmt.stdout}")
        self.format_seconds = time.monotonic() - t0
        return self._java("kafka.Kafka", str(props))

    def start(self, timeout: float = START_TIMEOUT_S) -> "KafkaReference":
        t0 = time.monotonic()
        argv = self.prepare(timeout)
        out = open(self.out_path, "ab")
        self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                     stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
        out.close()
        deadline = t0 + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                code = self.proc.returncode
                self.proc = None
                raise RuntimeError(f"Kafka exited with {code}; {self.log_tail()}")
            if probe(self.host, self.port):
                self.start_seconds = time.monotonic() - t0
                return self
            time.sleep(0.1)
        tail = self.log_tail()  # before stop(), which removes the work dir and its logs
        self.stop()
        raise RuntimeError(f"Kafka did not answer on {self.bootstrap} within {timeout:.0f} s; {tail}")

    def log_tail(self, n: int = 3000) -> str:
        parts = []
        for path in (self.out_path, self.log_path):
            try:
                parts.append(f"{path.name}: {path.read_text(errors='replace')[-n:]}")
            except OSError:
                pass
        return "\n".join(parts) or "no log"

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM (Kafka's controlled shutdown), SIGKILL after `timeout`; returns the exit code."""
        code = None
        proc, self.proc = self.proc, None
        if proc is not None:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            code = proc.returncode
        if self._own_dir and not self.keep:
            shutil.rmtree(self.work_dir, ignore_errors=True)
        return code

    def __enter__(self) -> "KafkaReference":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _die_with_parent() -> None:
    """In the child before exec: have Linux send it SIGTERM when the parent dies (PR_SET_PDEATHSIG), so a
    killed test run leaves no JVM behind."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run Apache Kafka (the reference broker) on loopback.")
    parser.add_argument("--port", type=int, default=None, help="PLAINTEXT port (default: a free one)")
    parser.add_argument("--dir", type=Path, default=None, help="work directory (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory on exit")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="another server.properties setting")
    args = parser.parse_args(argv)
    status = install_status()
    if not status.installed:
        print(status.reason, file=sys.stderr)
        return 2
    settings = dict(s.split("=", 1) for s in args.set)
    kafka = KafkaReference(status.libs, port=args.port, settings=settings, work_dir=args.dir, keep=args.keep)
    try:
        kafka.start()
        print(f"Apache Kafka {kafka_version()} on {kafka.bootstrap} (started in {kafka.start_seconds:.1f} s, "
              f"storage format {kafka.format_seconds:.1f} s); work dir {kafka.work_dir}; Ctrl-C stops it",
              flush=True)
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
        while kafka.proc is not None and kafka.proc.poll() is None:
            time.sleep(0.5)
        print(f"Kafka exited; {kafka.log_tail()}", file=sys.stderr)
        return 1
    except (KeyboardInterrupt, SystemExit):
        return 0
    except RuntimeError as exc:
        print(exc, file=sys.stderr)
        return 1
    finally:
        kafka.stop()


if __name__ == "__main__":
    sys.exit(main())
