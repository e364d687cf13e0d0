"""Apache Kafka's own command-line tools, run by main class from the reference install, against two sides.

`kafka-topics.sh` and its siblings are `java -cp libs/* <main class> ARGS` with a log4j configuration; this
module runs the same main classes (TOOLS) with the jars `make reference` installs (reference/pom.xml has
kafka-tools and its runtime closure), logging at WARN to stderr. They run in tool servers
(java/ToolServer.java): JVMs that run one tool's main after another with its output captured and its
Exit.exit turned into the exit code, so that a run costs no JVM start; the tools that call System.exit
themselves (the verifiable clients, OWN_JVM) get a JVM each. A `Side` is one cluster the tools are
pointed at: the three-broker odradek cluster or the Kafka 4.4 reference. `run_both` runs one tool against
both sides at once (two JVMs in parallel) and returns each side's `Outcome`; `normalise` strips from an
output what differs by nature between two clusters (addresses, ids, timestamps) so that the rest can be
compared as text.
"""

from __future__ import annotations

import os
import re
import select
import shutil
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

TOOLS = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-configs": "org.apache.kafka.tools.ConfigCommand",
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    "kafka-cluster": "org.apache.kafka.tools.ClusterTool",
    "kafka-verifiable-producer": "org.apache.kafka.tools.VerifiableProducer",
    "kafka-verifiable-consumer": "org.apache.kafka.tools.VerifiableConsumer",
}
# they end with System.exit, which would end a tool server
OWN_JVM = {"kafka-verifiable-producer", "kafka-verifiable-consumer"}
SERVER_SOURCE = Path(__file__).resolve().parent / "java" / "ToolServer.java"
COMPILE_TIMEOUT_S = 180
TOOL_TIMEOUT_S = 120.0
# A tool is a short-lived JVM on a shared 2-core machine: the client compiler only and the serial collector
# (about a second less per start than the scripts' defaults), as reference/kafka.py starts the broker.
JVM_OPTIONS = ("-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Djava.awt.headless=true",
               "-Djava.net.preferIPv4Stack=true")
LOG4J2 = """\
status = warn
appender.err.type = Console
appender.err.name = err
appender.err.target = SYSTEM_ERR
appender.err.layout.type = PatternLayout
appender.err.layout.pattern = %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.err.ref = err
"""
# a tool server's: the console appender follows System.err, which the server points at each run's capture
LOG4J2_SERVER = LOG4J2.replace("appender.err.target = SYSTEM_ERR\n",
                               "appender.err.target = SYSTEM_ERR\nappender.err.follow = true\n")


@dataclass(frozen=True)
class Outcome:
    rc: int
    out: str
    err: str

    def __str__(self) -> str:
        return f"exit {self.rc}\n--- stdout\n{self.out}\n--- stderr\n{self.err[-4000:]}"


@dataclass
class Side:
    """One cluster the tools run against. `replication` is what its topics are created with (3 on odradek's
    three brokers, 1 on the single-node reference); `broker_id` a broker the per-broker commands name."""

    name: str
    bootstrap: str
    broker_ids: list[int]
    replication: int
    broker_id: int
    addresses: list[str] = field(default_factory=list)  # every broker's host:port, for normalise()


class ToolServer:
    """One tool server JVM (java/ToolServer.java), running one tool at a time."""

    def __init__(self, argv: list[str], stderr_path: Path, cwd: Path) -> None:
        self.stderr_path = stderr_path
        with open(stderr_path, "ab") as err:
            self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, cwd=cwd)
        self._pending = b""

    def alive(self) -> bool:
        return self.proc.poll() is None

    def run(self, main: str, args: Sequence[str], timeout: float) -> Outcome:
        """The tool's outcome; subprocess.TimeoutExpired (the server killed) past `timeout`, as subprocess.run."""
        assert all("\n" not in a and "\r" not in a for a in args), f"an argument with a line break: {args}"
        request = f"RUN {main} {len(args)}\n" + "".join(f"{a}\n" for a in args)
        deadline = time.monotonic() + timeout
        try:
            self.proc.stdin.write(request.encode())  # type: ignore[union-attr]
            self.proc.stdin.flush()  # type: ignore[union-attr]
            head = self._read_until(lambda b: b.find(b"\n") + 1 or None, deadline)
            _, code, out_len, err_len = head.decode().split()
            size = int(out_len) + int(err_len)  # 0 for a tool that printed nothing
            body = self._read_until(lambda b: size if len(b) >= size else None, deadline)
        except subprocess.TimeoutExpired:
            self.stop()
            raise subprocess.TimeoutExpired([main, *args], timeout) from None
        except (OSError, ValueError, EOFError) as exc:
            self.stop()
            raise RuntimeError(f"tool server failed running {main} {list(args)}: {exc!r}; its stderr: "
                               f"{self.stderr_path.read_text(errors='replace')[-3000:]}") from exc
        return Outcome(int(code), body[:int(out_len)].decode(errors="replace"),
                       body[int(out_len):].decode(errors="replace"))

    def _read_until(self, complete: Callable[[bytes], int | None], deadline: float) -> bytes:
        """Bytes from the server until `complete(bytes)` says how many make the piece (None: not yet)."""
        fd = self.proc.stdout.fileno()  # type: ignore[union-attr]
        while True:
            n = complete(self._pending)
            if n is not None:
                piece, self._pending = self._pending[:n], self._pending[n:]
                return piece
            left = deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired("tool server", 0)
            ready, _, _ = select.select([fd], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    raise EOFError(f"tool server exited ({self.proc.poll()})")
                self._pending += chunk

    def stop(self) -> None:
        """End of input, then SIGKILL if it lingers (a tool may have left a non-daemon thread behind)."""
        try:
            self.proc.stdin.close()  # type: ignore[union-attr]
        except OSError:
            pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self.proc.stdout.close()  # type: ignore[union-attr]


class ToolRunner:
    """Runs TOOLS with the reference install's jars (`libs`); the log4j2 files, the tool server's classes and
    the tool servers' stderr go into `work_dir`. Tool servers are started as needed, so that each runs one
    tool at a time (run_both runs two at once), and are reused; `close()` stops them.

    The tools of OWN_JVM get a JVM each: the first such run also writes a class-data sharing archive of the
    classes it loaded (JDK 13+'s dynamic CDS, `-XX:ArchiveClassesAtExit`) into `work_dir`, and the runs after it
    map that archive instead of loading those classes from the jars again: about a third less time per tool
    start here (2.4 s against 3.7 s on the loaded 2-core machine). Runs that start while the archive is being
    written go without it. The JVM's own log goes to stderr, so that no CDS warning ever lands in the output
    compared.
    """

    def __init__(self, libs: Path, work_dir: Path) -> None:
        self.libs = libs
        self.work_dir = work_dir
        work_dir.mkdir(parents=True, exist_ok=True)
        self.log4j = work_dir / "tools-log4j2.properties"
        self.log4j.write_text(LOG4J2)
        self.java = shutil.which("java") or "java"
        self.archive = work_dir / "kafka-tools.jsa"
        self._archiving = threading.Lock()  # held by the one run that writes the archive
        self.log4j_server = work_dir / "tool-server-log4j2.properties"
        self.log4j_server.write_text(LOG4J2_SERVER)
        self._servers_lock = threading.Lock()
        self._idle: list[ToolServer] = []  # started servers not running a tool now
        self._all: list[ToolServer] = []
        self._classes: Path | None = None  # ToolServer compiled, once

    def _server_classes(self) -> Path:
        with self._servers_lock:
            if self._classes is None:
                out = self.work_dir / "tool-server-classes"
                javac = shutil.which("javac")
                assert javac is not None, "javac not found (tools/install-system-deps.sh installs a JDK)"
                proc = subprocess.run([javac, "-nowarn", "-d", str(out), "-cp", f"{self.libs}/*", str(SERVER_SOURCE)],
                                      capture_output=True, text=True, timeout=COMPILE_TIMEOUT_S)
                assert proc.returncode == 0, f"javac failed on ToolServer.java:\n{proc.stdout}\n{proc.stderr}"
                self._classes = out
            return self._classes

    def _take_server(self) -> ToolServer:
        classes = self._server_classes()
        with self._servers_lock:
            while self._idle:
                server = self._idle.pop()
                if server.alive():
                    return server
            n = len(self._all)
        argv = [self.java, *JVM_OPTIONS, "-Xlog:disable", "-Xlog:all=warning:stderr",
                f"-Dlog4j2.configurationFile={self.log4j_server}", "-cp", f"{classes}{os.pathsep}{self.libs}/*",
                "ToolServer"]
        server = ToolServer(argv, self.work_dir / f"tool-server-{n}.stderr", self.work_dir)
        with self._servers_lock:
            self._all.append(server)
        return server

    def close(self) -> None:
        """Stops the tool servers."""
        with self._servers_lock:
            servers, self._all, self._idle = self._all, [], []
        for server in servers:
            server.stop()

    def argv(self, tool: str, args: Sequence[str], sharing: Sequence[str] = ()) -> list[str]:
        return [self.java, *JVM_OPTIONS, "-Xlog:disable", "-Xlog:all=warning:stderr", *sharing,
                f"-Dlog4j2.configurationFile={self.log4j}", "-cp", f"{self.libs}/*", TOOLS[tool], *args]

    def run(self, tool: str, args: Sequence[str], timeout: float = TOOL_TIMEOUT_S) -> Outcome:
        if tool not in OWN_JVM:
            server = self._take_server()
            outcome = server.run(TOOLS[tool], args, timeout)
            with self._servers_lock:
                self._idle.append(server)
            return outcome
        if self.archive.exists():
            return self._run(self.argv(tool, args, [f"-XX:SharedArchiveFile={self.archive}"]), timeout)
        if not self._archiving.acquire(blocking=False):
            return self._run(self.argv(tool, args), timeout)
        try:
            return self._run(self.argv(tool, args, [f"-XX:ArchiveClassesAtExit={self.archive}"]), timeout)
        finally:
            self._archiving.release()

    def _run(self, argv: list[str], timeout: float) -> Outcome:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
                              cwd=self.work_dir)
        return Outcome(proc.returncode, proc.stdout, proc.stderr)

    def run_both(self, sides: Sequence[Side], tool: str, args: Callable[[Side], Sequence[str]],
                 timeout: float = TOOL_TIMEOUT_S) -> dict[str, Outcome]:
        """The tool against every side at once: `args(side)` gives that side's arguments."""
        with ThreadPoolExecutor(max_workers=len(sides)) as pool:
            futures = {s.name: pool.submit(self.run, tool, list(args(s)), timeout) for s in sides}
        return {name: f.result() for name, f in futures.items()}


UUID_FIELD = re.compile(r"\b(TopicId|Cluster ID|ClusterId):\s*[A-Za-z0-9_-]{22}\b")


def normalise(text: str, side: Side) -> str:
    """`text` with the side's addresses as <broker> (and a coordinator's "address  (id)" as "<broker> (<id>)"),
    22-character base64 topic and cluster ids as <id>, tabs and runs of spaces as one space, trailing spaces
    and empty lines gone."""
    for address in sorted({side.bootstrap, *side.addresses}, key=len, reverse=True):
        text = text.replace(address, "<broker>")
    text = UUID_FIELD.sub(lambda m: f"{m.group(1)}: <id>", text)
    text = re.sub(r"<broker>\s+\(\d+\)", "<broker> (<id>)", text)  # a coordinator: address (broker id)
    lines = [re.sub(r"[ \t]+", " ", line).strip() for line in text.splitlines()]
    return "\n".join(line for line in lines if line)


def assert_same(outcomes: dict[str, Outcome], sides: Sequence[Side],
                fix: Callable[[str, Side], str] = lambda text, side: text) -> str:
    """Every side exited alike and printed the same once normalised (and `fix`ed: what is left that differs
    by nature, e.g. replica lists of three brokers against one); returns that output."""
    seen = {s.name: fix(normalise(outcomes[s.name].out, s), s) for s in sides}
    codes = {s.name: outcomes[s.name].rc for s in sides}
    report = "\n".join(f"=== {name}: {outcomes[name]}" for name in outcomes)
    assert len(set(codes.values())) == 1, f"exit codes differ: {codes}\n{report}"
    assert len(set(seen.values())) == 1, "outputs differ:\n" + "\n".join(
        f"--- {name} (normalised)\n{text}" for name, text in seen.items()) + f"\n{report}"
    return next(iter(seen.values()))


def assert_converges(runner: ToolRunner, sides: Sequence[Side], tool: str, args: Callable[[Side], Sequence[str]],
                     fix: Callable[[str, Side], str] = lambda text, side: text, timeout: float = 30.0) -> str:
    """assert_same of a read-only tool run that follows a change: run again (up to `timeout`) until the sides
    agree. A change made through one of odradek's brokers reaches the others through ZooKeeper a moment later,
    and a tool run in a tool server comes sooner after the one before than a JVM start would."""
    deadline = time.monotonic() + timeout
    while True:
        outcomes = runner.run_both(sides, tool, args)
        if time.monotonic() > deadline:
            return assert_same(outcomes, sides, fix)
        try:
            return assert_same(outcomes, sides, fix)
        except AssertionError:
            time.sleep(0.5)


ASSIGNMENT_FIELDS = re.compile(r"\b(Leader|Replicas|Isr|ReplicationFactor): [\d,]+")
MIN_ISR = re.compile(r"\bmin\.insync\.replicas=\d+")


def without_assignment(text: str, side: Side) -> str:
    """Leader, replica and ISR lists as <brokers>, and the cluster's min.insync.replicas (a topic lists it on
    both, 2 of three replicas on odradek, 1 on the single node) as <n>: three brokers against one."""
    text = ASSIGNMENT_FIELDS.sub(lambda m: f"{m.group(1)}: <brokers>", text)
    return MIN_ISR.sub("min.insync.replicas=<n>", text)


def table(text: str) -> list[dict[str, str]]:
    """A tool's tab-separated table (header line first) as one dict per row."""
    lines = [line.rstrip("\t").split("\t") for line in text.splitlines() if line.strip()]
    if not lines:
        return []
    header = [h.strip() for h in lines[0]]
    return [dict(zip(header, (c.strip() for c in row))) for row in lines[1:]]
