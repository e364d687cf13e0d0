"""The clients of the soak (tests/faults/nemesis.py) and the checks of what they were told.

Four workloads run in the root namespace while the nemesis breaks the cluster, each a `Workload` with a
monotone progress counter (what the liveness check watches) and a `check()` of its safety afterwards:

- `IdempotentWorkload`: tests/cluster/checker.py's LoadProducer (confluent-kafka, idempotent, acks=all) into
  the input topic; its ledger of acknowledged writes is checked for lost, duplicated and reordered records.
- `TransformLoop`: a consume-transform-produce loop (confluent-kafka): reads the input topic read_committed in
  group `<run>-ctp`, writes ``<input value>@<transaction number>`` to the output topic (same partition), sends
  the consumed offsets to the transaction and commits, aborting every `ABORT_EVERY`-th on purpose. After an
  abort it goes back to the group's committed offsets. Check: every input record has exactly one output
  among the committed outputs, in input order per partition, and no output of an aborted transaction is
  visible to read_committed.
- `GroupWorkload`: two members (checker.py's ConsumerRecorder, auto-committing) of group `<run>-group` on the
  input topic, and a sampler of the group's committed offsets. Check: no committed offset ever passes a
  record no member was given (the group's committed progress never skips records).
- `JavaProducer`: the Java client harness (tests/interop/java/OdradekClient.java, `produce-load`: kafka-clients'
  default idempotent acks=all producer) into a topic of its own, where Kafka's own client is installed;
  its acknowledgements are checked as the idempotent producer's.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import traceback
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from tests.cluster.checker import AckLedger, ConsumerRecorder, LoadProducer, check_history, read_partitions

ABORT_EVERY = 7  # the transform loop aborts every 7th transaction on purpose
PRODUCER_INTERVAL_S = 0.01  # about 100 records a second: enough to see every stall, light on 2 cores
JAVA_INTERVAL_MS = 20
END_TXN_TIMEOUT_S = 60.0  # a commit or abort retried this long is given up (and the producer made anew)
REQUEST_TIMEOUT_MS = 30_000  # the request timeout of the liveness deadline's derivation (nemesis.py)
TXN_CALL_S = 25.0  # the timeout given to each send_offsets/commit/abort call
TXN_CALL_MARGIN_S = 5.0  # a call not back this long after its own timeout is blocked for good (see TransformLoop)


class BlockedCall(Exception):
    """A librdkafka transactional call that did not return within its own timeout (and a margin)."""


class Workload:
    """One client: `progress()` grows while it works; `problems()` after `check()` names what went wrong."""

    name = "workload"

    def progress(self) -> int:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def check(self, bootstrap: str) -> list[str]:
        raise NotImplementedError

    def state(self) -> str:
        """Where the client is now (for a liveness failure): the innermost calls of its thread, if it has one."""
        thread = getattr(self, "_thread", None)
        frame = sys._current_frames().get(thread.ident) if thread is not None and thread.ident else None
        if frame is None:
            return "no thread"
        calls = [f"{f.name} ({os.path.basename(f.filename)}:{f.lineno}) {(f.line or '').strip()[:120]}"
                 for f in traceback.extract_stack(frame)[-3:]]
        return " <- ".join(reversed(calls))

    def stall_account(self, since: float = 0.0, lines: int = 40) -> list[str]:
        """What the client's own log says of a stall since ``since`` (time.time()), for a liveness failure:
        nothing by default."""
        return []


class IdempotentWorkload(Workload):
    name = "idempotent producer"

    def __init__(self, bootstrap: str, topic: str, partitions: int, run_s: float) -> None:
        self.topic, self.partitions = topic, partitions
        self.load = LoadProducer(bootstrap, topic, partitions, prefix="p", interval_s=PRODUCER_INTERVAL_S,
                                 max_records=int(run_s / PRODUCER_INTERVAL_S) + 1000, log_level=3)

    def start(self) -> "IdempotentWorkload":
        self.load.start()
        return self

    @property
    def ledger(self) -> AckLedger:
        return self.load.ledger

    def progress(self) -> int:
        return self.load.ledger.count()

    def stop(self) -> None:
        self.load.stop(flush_timeout=120.0)

    def check(self, bootstrap: str) -> list[str]:
        read = read_partitions(bootstrap, self.topic, self.partitions, timeout=120.0)
        history = check_history(self.ledger.acked, read, producer_errors=self.ledger.errors)
        return [] if history.ok else [f"{self.name}: {history}"]


class TransformLoop(Workload):
    """The consume-transform-produce loop, doing what librdkafka documents for each error of its transactional
    calls: abortable (`txn_requires_abort`) -> abort_transaction and read again from the committed offsets;
    retriable -> call again (commit and abort resume the operation under way); fatal -> a new producer.

    One more rule, for a librdkafka defect: `send_offsets_to_transaction` waits for its result without a
    timeout (rd_kafka_txn_op_req1 with RD_POLL_INFINITE; its timeout is checked only when an answer arrives),
    and its TxnOffsetCommit goes through librdkafka's coordinator-request machinery, whose own timeout is
    never checked (librdkafka issue #5456, open in 2.16) and which, when the cached group coordinator is a
    broker gone from Metadata (librdkafka 2.x decommissions such a broker and ends its thread), waits for a
    state change of that broker that never comes (issue #5511, open). A broker leaves Metadata when it dies,
    stops, is paused or is cut off past its session: the soak's faults, on odradek and on Apache Kafka alike
    (a Kafka 4.4 run hung the same way after kill -9). The call then never returns (seen in the soak with gdb:
    the application thread in rd_kafka_send_offsets_to_transaction -> rd_kafka_txn_op_req0 -> cnd_wait).
    An application cannot cancel it; what it can do is what this loop does: run each transactional call on
    a thread of its own, and when one is not back TXN_CALL_MARGIN_S after its own timeout, abandon that
    producer and make a new one with the same transactional.id, whose InitProducerId bumps the epoch,
    fences the old producer and aborts its open transaction (what `_fatal` does)."""

    name = "transactional loop"

    def __init__(self, bootstrap: str, source: str, sink: str, partitions: int, group: str, txn_id: str,
                 debug_log: Path | None = None) -> None:
        self.bootstrap, self.source, self.sink, self.partitions = bootstrap, source, sink, partitions
        # librdkafka's own account of the transactions (debug=eos,protocol,broker,topic) for a stall's cause
        self._debug = open(debug_log, "a", buffering=1) if debug_log is not None else None
        self._debug_path = debug_log
        self.group, self.txn_id = group, txn_id
        self.committed = 0  # transactions committed (the progress counter)
        self.aborted_txns: set[int] = set()
        self.errors: list[str] = []  # fatal errors (each made the producer anew)
        self.abandoned: list[Producer] = []  # producers left with a call blocked for good (kept referenced)
        self.blocked_calls: list[str] = []  # which call of each abandoned producer
        self._txn = 0
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="transform-loop", daemon=True)
        self._consumer_config = {"bootstrap.servers": bootstrap, "group.id": group, "broker.address.family": "v4",
                                 "isolation.level": "read_committed", "enable.auto.commit": False,
                                 "auto.offset.reset": "earliest", "session.timeout.ms": 10_000, "log_level": 3}
        self._consumer = Consumer(self._consumer_config)
        self._producer = self._new_producer()

    def _new_producer(self) -> Producer:
        config: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap, "transactional.id": self.txn_id, "broker.address.family": "v4",
            "linger.ms": 5, "transaction.timeout.ms": 60_000, "log_level": 3,
            # librdkafka times out a request to a coordinator (TxnOffsetCommit, AddOffsetsToTxn, EndTxn) after
            # socket.timeout.ms, 60 s by default, not request.timeout.ms: a request sent into a paused broker
            # would alone outlast the liveness deadline. 30 s is the deadline's request timeout (nemesis.py).
            "socket.timeout.ms": int(REQUEST_TIMEOUT_MS)}
        if self._debug is not None:
            config.update({"debug": "eos,protocol,broker,topic", "log_level": 7, "logger": self})
        producer = Producer(config)
        producer.init_transactions(END_TXN_TIMEOUT_S)
        return producer

    def log(self, level: int, fmt: str, *args: Any) -> None:
        """confluent-kafka's `logger` interface (librdkafka's log lines, on its threads): into the debug file."""
        if self._debug is not None:
            self._debug.write(f"{time.time():.3f} {fmt % args}\n")

    # librdkafka's lines that tell a transaction's course: API calls and their results, state changes, errors
    STALL_TAGS = (" TXNAPI ", " TXNERR ", " TXNSTATE ", " REQERR ", " ADDOFFSETS ", " ENDTXN ", " BROKERUA ",
                  " DRAIN ")

    def stall_account(self, since: float = 0.0, lines: int = 40) -> list[str]:
        """The last ``lines`` transactional lines of librdkafka's debug log from ``since`` (time.time()) on, and
        the calls given up so far: a CI log then says what the loop waited on after its work dir is gone."""
        found: list[str] = []
        if self._debug_path is not None:
            try:
                with open(self._debug_path, errors="replace") as debug:
                    for line in debug:
                        stamp = line.split(" ", 1)[0]
                        if any(tag in line for tag in self.STALL_TAGS) and stamp.replace(".", "", 1).isdigit() \
                                and float(stamp) >= since:
                            found.append(line.rstrip()[:300])
                            del found[:-lines]
            except OSError as exc:
                found.append(f"(librdkafka's debug log unreadable: {exc})")
        return [f"given up: {call}" for call in self.blocked_calls] + found

    def _drain_logs(self, producer: Producer) -> None:
        """Deliver librdkafka's queued log lines to `log`. confluent-kafka hands a `logger` its lines only from
        poll() (it routes librdkafka's log to the poll queue), and a transactional call does not poll while it
        waits for librdkafka's main thread: without this, the debug log falls silent exactly while a call is
        blocked (and its timestamps are when a line was delivered, not when it was written). The abandoned
        producers are polled too, so what their main thread does afterwards is still recorded."""
        if self._debug is None:
            return
        producer.poll(0)
        for each in self.abandoned:
            try:
                each.poll(0)
            except KafkaException:
                # its blocked call came back at last, fenced by its successor (a fatal error, which poll()
                # raises): the abandoned producer's, not the running transaction's
                pass

    def start(self) -> "TransformLoop":
        self._consumer.subscribe([self.source])
        self._thread.start()
        return self

    def progress(self) -> int:
        return self.committed

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                msgs = [m for m in self._consumer.consume(num_messages=200, timeout=0.5) if m.error() is None]
                if msgs:
                    self._transaction(msgs)
        finally:
            self._consumer.close()

    def _transaction(self, msgs: list) -> None:
        self._txn += 1
        txn = self._txn
        abort = txn % ABORT_EVERY == 0
        offsets: dict[int, int] = {}
        try:
            self._producer.begin_transaction()
            for m in msgs:
                self._producer.produce(self.sink, key=m.key(), value=m.value() + f"@{txn}".encode(),
                                       partition=m.partition())
                offsets[m.partition()] = m.offset() + 1
            positions = [TopicPartition(self.source, p, o) for p, o in offsets.items()]
            group_metadata = self._consumer.consumer_group_metadata()
            producer = self._producer

            def send_offsets_to_transaction(timeout: float) -> None:
                producer.send_offsets_to_transaction(positions, group_metadata, timeout)
            self._end(send_offsets_to_transaction)
            if not abort:
                self._end(self._producer.commit_transaction)
                self.committed += 1
                return
        except BlockedCall as exc:
            self._fatal(f"transaction {txn}: {exc}", abandon=True)
            return
        except KafkaException as exc:
            error = exc.args[0]
            if not error.txn_requires_abort():
                self._fatal(f"transaction {txn}: {error}")
                return
            abort = False  # an abortable error, not the loop's own choice
        try:
            with self._lock:
                self.aborted_txns.add(txn)
            self._settle_records(after_error=not abort)
            self._end(self._producer.abort_transaction)
        except BlockedCall as exc:
            self._fatal(f"abort of transaction {txn}: {exc}", abandon=True)
            return
        except KafkaException as exc:
            self._fatal(f"abort of transaction {txn}: {exc.args[0]}")
            return
        self._rewind()

    def _settle_records(self, after_error: bool, timeout: float = 60.0) -> None:
        """Before an abort, wait for the transaction's records in flight: librdkafka may otherwise send EndTxn
        before its AddPartitionsToTxn is answered and fail fatally (librdkafka issue #4849; see checker.py).

        After an abortable error librdkafka sends no ProduceRequest any more (the transaction is in
        AbortableError), so a record waiting in a queue, such as one a stale leader answered
        NOT_LEADER_OR_FOLLOWER while the error was raised, would hold a plain flush until its
        message.timeout.ms (the 60 s transaction timeout): the queued records are purged (the abort would purge
        them anyway), again after each short flush, since an answer in flight may put records back."""
        if not after_error:
            self._producer.flush(timeout)
            return
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._producer.purge(in_queue=True, in_flight=False, blocking=False)
            except KafkaException:
                pass  # nothing the abort would not purge too; the flush below stays bounded
            if self._producer.flush(1.0) == 0 or time.monotonic() >= deadline:
                return

    def _end(self, end_transaction: Any) -> None:
        """Send the offsets, commit or abort, again after each retriable error, for at most END_TXN_TIMEOUT_S;
        BlockedCall where one call does not come back (see the class docstring).

        As librdkafka documents: a retriable error of commit_transaction or abort_transaction (a timeout above
        all) leaves the operation running in the background, and calling the same function again resumes it;
        a retriable error of send_offsets_to_transaction may be retried."""
        deadline = time.monotonic() + END_TXN_TIMEOUT_S
        while True:
            try:
                self._bounded(end_transaction, max(1.0, min(TXN_CALL_S, deadline - time.monotonic())))
                return
            except KafkaException as exc:
                if not exc.args[0].retriable() or time.monotonic() >= deadline or self._stop.is_set():
                    raise

    def _bounded(self, call: Any, timeout: float) -> None:
        """call(timeout) on a thread of its own; its exception raised here; BlockedCall if it is not back
        TXN_CALL_MARGIN_S after its timeout (the thread is then left blocked, with the producer it uses).
        While it waits, this thread polls the producers for the debug log (see `_drain_logs`)."""
        outcome: list[BaseException | None] = []
        producer = self._producer

        def run() -> None:
            try:
                call(timeout)
                outcome.append(None)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
                outcome.append(exc)

        thread = threading.Thread(target=run, name="transform-loop-call", daemon=True)
        thread.start()
        give_up = time.monotonic() + timeout + TXN_CALL_MARGIN_S
        while thread.is_alive() and time.monotonic() < give_up:
            thread.join(0.2)
            self._drain_logs(producer)
        if not outcome:
            raise BlockedCall(f"{getattr(call, '__name__', 'transactional call')} not back "
                              f"{TXN_CALL_MARGIN_S:.0f} s after its {timeout:.0f} s timeout")
        if outcome[0] is not None:
            raise outcome[0]

    def _fatal(self, message: str, abandon: bool = False) -> None:
        """What an application does with a producer it cannot use: record why, make it anew (init_transactions
        fences the old one and settles its open transaction), read again from the committed offsets. An
        abandoned producer (a call of it blocked for good) is left as it is: closing it would block too."""
        with self._lock:
            if abandon:  # librdkafka's defect, not a fatal error: counted, not a failure (class docstring)
                self.abandoned.append(self._producer)
                self.blocked_calls.append(message)
            else:
                self.errors.append(message)
            # the outcome of the open transaction is unknown: its outputs may stay; the check allows either
        try:
            self._producer = self._new_producer()
        except KafkaException as exc:
            with self._lock:
                self.errors.append(f"init_transactions after a fatal error: {exc.args[0]}")
            time.sleep(1.0)
            return
        self._rewind()

    def _rewind(self) -> None:
        """Back to the group's committed offsets: what the aborted transaction read is read again. Where the
        consumer cannot seek there, it is made anew: a new member starts from the committed offsets."""
        try:
            assignment = self._consumer.assignment()
            if assignment:
                for tp in self._consumer.committed(assignment, timeout=30):
                    self._consumer.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else 0))
            return
        except KafkaException:
            pass
        self._consumer.close()
        self._consumer = Consumer(self._consumer_config)
        self._consumer.subscribe([self.source])

    def positions_committed(self) -> dict[int, int]:
        """The group's committed offsets on the input topic (-1 where none)."""
        probe = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group, "log_level": 3,
                          "broker.address.family": "v4", "enable.auto.commit": False})
        try:
            tps = probe.committed([TopicPartition(self.source, p) for p in range(self.partitions)], timeout=10)
            return {tp.partition: tp.offset for tp in tps}
        finally:
            probe.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(END_TXN_TIMEOUT_S + 30)
        if self._thread.is_alive():
            raise AssertionError(f"the loop did not stop in {END_TXN_TIMEOUT_S + 30:.0f} s")

    def check(self, bootstrap: str) -> list[str]:
        source = read_partitions(bootstrap, self.source, self.partitions, timeout=120.0)
        sink = read_partitions(bootstrap, self.sink, self.partitions, timeout=120.0,
                               **{"isolation.level": "read_committed"})
        problems = transform_anomalies(source, sink, self.positions_committed(), self.aborted_txns)
        shown = problems[:10] + ([f"... {len(problems) - 10} more"] if len(problems) > 10 else [])
        return [f"{self.name}: {p}" for p in shown] + [f"{self.name}: fatal error {e}" for e in self.errors]


class GroupWorkload(Workload):
    name = "group member"

    def __init__(self, bootstrap: str, topic: str, partitions: int, group: str, run_s: float) -> None:
        self.bootstrap, self.topic, self.partitions, self.group = bootstrap, topic, partitions, group
        self.members = [ConsumerRecorder(bootstrap, [topic], group, max_seconds=run_s + 600, log_level=3)
                        for _ in range(2)]
        self.samples: list[tuple[float, dict[int, int]]] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._sampler = threading.Thread(target=self._sample, name="group-offsets", daemon=True)

    def start(self) -> "GroupWorkload":
        for member in self.members:
            member.start()
        self._sampler.start()
        return self

    def progress(self) -> int:
        return sum(len(m.records) for m in self.members)

    def committed_progress(self) -> int:
        with self._lock:
            return sum(max(o, 0) for o in self.samples[-1][1].values()) if self.samples else 0

    def _sample(self) -> None:
        probe = Consumer({"bootstrap.servers": self.bootstrap, "group.id": self.group, "log_level": 3,
                          "broker.address.family": "v4", "enable.auto.commit": False})
        tps = [TopicPartition(self.topic, p) for p in range(self.partitions)]
        try:
            while not self._stop.wait(1.0):
                try:
                    committed = probe.committed(tps, timeout=5)
                except KafkaException:
                    continue
                with self._lock:
                    self.samples.append((time.monotonic(), {tp.partition: tp.offset for tp in committed}))
        finally:
            probe.close()

    def wait_committed(self, ends: dict[int, int], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                last = self.samples[-1][1] if self.samples else {}
            if all(last.get(p, -1) >= end for p, end in ends.items()):
                return True
            time.sleep(0.5)
        return False

    def stop(self) -> None:
        self._stop.set()
        stuck = []
        for member in self.members:
            try:
                member.stop(timeout=30)
            except AssertionError:
                stuck.append(member)
        self._sampler.join(30)
        if stuck:
            raise AssertionError(f"{len(stuck)} group members did not stop in 30 s")

    def check(self, bootstrap: str) -> list[str]:
        read = read_partitions(bootstrap, self.topic, self.partitions, timeout=120.0)
        given: dict[int, set[int]] = {p: set() for p in range(self.partitions)}
        for member in self.members:
            for p, o, _ in member.consumed(self.topic):
                given[p].add(o)
        problems = [f"{self.name}: {e}" for m in self.members for e in m.non_retriable_errors()]
        problems += [f"{self.name}: {p}" for p in skipped_offsets(read, given, [c for _, c in self.samples])]
        if not self.samples:
            problems.append(f"{self.name}: the group's committed offsets were never read")
        return problems


def transform_anomalies(source: dict[int, list[tuple[int, bytes]]], sink: dict[int, list[tuple[int, bytes]]],
                        committed: dict[int, int], aborted_txns: set[int]) -> list[str]:
    """What is wrong with a consume-transform-produce run: `source` and `sink` read from their start (the sink
    read_committed), `committed` the loop's group offsets on the source, `aborted_txns` the transactions it
    aborted. Every input below the committed offset has exactly one output, in input order per partition; no
    input at or past it has one; no output of an aborted transaction is visible. (Whether the loop read to the
    end is liveness: nemesis.py's _finish waits for it.)"""
    problems: list[str] = []
    input_offset = {v: (p, o) for p, recs in source.items() for o, v in recs}
    outputs: dict[bytes, int] = {}
    for p, recs in sink.items():
        last = -1
        for _, value in recs:
            original, _, txn = value.rpartition(b"@")
            if int(txn) in aborted_txns:
                problems.append(f"aborted output visible to read_committed: {value!r}")
            outputs[original] = outputs.get(original, 0) + 1
            where = input_offset.get(original)
            if where is None or where[0] != p:
                problems.append(f"output {value!r} in partition {p} has no input there")
                continue
            if where[1] <= last:
                problems.append(f"output out of input order in partition {p}: {value!r}")
            last = where[1]
    for p, recs in source.items():
        for offset, value in recs:
            n = outputs.get(value, 0)
            if offset < committed.get(p, -1) and n != 1:
                problems.append(f"input {value!r} (partition {p} offset {offset}) has {n} committed outputs")
            elif offset >= committed.get(p, -1) and n:
                problems.append(f"input {value!r} past the committed offset {committed.get(p)} has an output")
    return problems


def skipped_offsets(read: dict[int, list[tuple[int, bytes]]], given: dict[int, set[int]],
                    samples: list[dict[int, int]]) -> list[str]:
    """Committed offsets (each sample of the group's) that pass a record of `read` no member was `given`."""
    problems = []
    highest = {p: max((c.get(p, -1) for c in samples), default=-1) for p in read}
    for p, records in read.items():
        skipped = [o for o, _ in records if o < highest[p] and o not in given.get(p, set())]
        if skipped:
            problems.append(f"committed offset {highest[p]} of partition {p} passes {len(skipped)} records no "
                            f"member was given, e.g. offsets {skipped[:5]}")
    return problems


def compile_java_harness(work_dir: Path) -> tuple[list[str], str] | str:
    """The JVM command prefix that runs tests/interop/java/OdradekClient.java against kafka-clients of the
    reference install (`make reference`), and the client's version; or why it cannot run."""
    from tests.interop.conftest import HARNESS_SRC, LOG4J2_STDERR, JavaClient, find_reference_jars
    from tests.reference.conftest import load_launcher

    ref = load_launcher()
    status = ref.install_status()
    if not status.installed:
        return f"Apache Kafka's client is not installed: {status.reason}"
    javac, java = shutil.which("javac"), shutil.which("java")
    if javac is None or java is None:
        return "javac/java not found"
    jars = find_reference_jars(status.libs)
    out_dir = work_dir / "java-classes"
    out_dir.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([javac, "-nowarn", "-d", str(out_dir), "-cp", os.pathsep.join(map(str, jars)),
                           str(HARNESS_SRC)], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        return f"javac failed: {done.stderr[-500:]}"
    log_config = out_dir / "log4j2.properties"
    log_config.write_text(LOG4J2_STDERR)
    client = JavaClient(out_dir, jars, java, jvm_options=(f"-Dlog4j2.configurationFile={log_config}",))
    return client.command(()), ref.kafka_version()


class JavaProducer(Workload):
    name = "Java producer"

    def __init__(self, command: list[str], bootstrap: str, topic: str, partitions: int, run_s: float,
                 log_path: Path) -> None:
        self.topic, self.partitions = topic, partitions
        self.ledger = AckLedger()
        n = int((run_s + 900) * 1000 / JAVA_INTERVAL_MS)
        self._log = open(log_path, "w")
        self.proc = subprocess.Popen([*command, "produce-load", bootstrap, topic, str(n), str(partitions),
                                      str(JAVA_INTERVAL_MS)], stdout=subprocess.PIPE, stderr=self._log, text=True)
        self._reader = threading.Thread(target=self._read, name="java-producer", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            parts = line.rstrip("\n").split("\t")
            if parts[0] == "ack" and len(parts) == 4:
                self.ledger.add([(self.topic, int(parts[1]), int(parts[2]), None, f"load-{parts[3]}".encode())])
            elif parts[0] == "error":
                self.ledger.error(line.strip())

    def progress(self) -> int:
        return self.ledger.count()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        """Acknowledgements stop counting here: what was not acknowledged yet was never promised."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(30)
        self._reader.join(10)
        self._log.close()

    def check(self, bootstrap: str) -> list[str]:
        read = read_partitions(bootstrap, self.topic, self.partitions, timeout=120.0)
        history = check_history(self.ledger.snapshot(), read, producer_errors=self.ledger.errors)
        return [] if history.ok else [f"{self.name}: {history}"]


__all__ = ["ABORT_EVERY", "GroupWorkload", "IdempotentWorkload", "JavaProducer", "TransformLoop", "Workload",
           "compile_java_harness", "skipped_offsets", "transform_anomalies"]
