"""Event-loop stalls under producer load: how long odradek keeps a tiny request waiting while it writes.

Usage:  .venv/bin/python bench/loop_stall.py --scenario roll|compressed [--rounds N] [--seconds S]
            [--rate-mb MB] [--segment-bytes N] [--odradek-src DIR]

A stall of the broker's event loop (a blocking call, or a long stretch of Python between two awaits) delays
every connection, not only the one that caused it. To see it from the outside, a pinger process keeps its own
TCP connection to the broker and sends an ApiVersions v0 request every 1 ms (one outstanding at a time),
recording each round trip: ApiVersions needs no storage, so its round trip is the loop's wake-up delay plus
a few tens of µs. Meanwhile a confluent-kafka Producer in this process loads the broker:

  roll        1 KiB incompressible values at --rate-mb MB/s (default 150) into a 1-partition topic created
              with segment.bytes = --segment-bytes (default 64 MiB): a segment roll every fraction of a second.
  compressed  1 KiB JSON-like values that zstd compresses about 2.7x (a pool of 4,096, each with a random hex
              token), linger.ms=50, batch.size=4000000, topic max.message.bytes 16 MiB: large compressed
              batches for the broker to check. Paced by --rate-mb (default 0: as fast as it goes).

Each round starts odradek afresh (disk log in a temp dir, default flush policy, default event loop) on a free
loopback port, pings it idle for --baseline-seconds, then produces for --seconds and flushes; the load window
runs from the first produce() to the end of flush(). The broker is stopped and its data dir removed after each
round. `--odradek-src DIR` puts DIR first on the broker's PYTHONPATH, so another checkout's src (e.g. a git
worktree of an older commit) can be compared with this one.

Prints a markdown table, one row per round; the raw figures (every ping, the producer's counts, the worst
pings with their times) go to bench/results/loop_stall-<scenario>.json. Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import queue
import random
import socket
import struct
import sys
import tempfile
import time
from array import array

from confluent_kafka import Producer

import brokers
from workloads import REPO, ClientLog, CpuMeter, create_topic, machine, percentile

MiB = 1024 * 1024
VALUE_SIZE = 1024
PING_INTERVAL_NS = 1_000_000
PING_TIMEOUT_S = 10.0  # a single round trip longer than this ends the pinger with an error
FLUSH_TIMEOUT_S = 60.0
READY_TIMEOUT_S = 30.0
# A backstop on what one round writes, far beyond --seconds at the default rates: 4 GB of segment files for
# `roll`; `compressed` counts values before compression, about 2.7x what reaches the disk.
MAX_VALUE_BYTES = {"roll": 4 * 10**9, "compressed": 10 * 10**9}
STALL_THRESHOLDS_MS = (5, 20, 50)
WORST_PINGS = 20


# --------------------------------------------------------------------------------------------------
# The pinger (a child process, so that its timing never waits for this process's GIL or librdkafka)


def _api_versions_v0(correlation_id: int) -> bytes:
    # size, api key 18, version 0, correlation id, null client id; the v0 request has no body
    return struct.pack(">ihhih", 10, 18, 0, correlation_id, -1)


def _read_frame(sock: socket.socket) -> bytes:
    """One size-prefixed Kafka response, without its size."""
    head = b""
    while len(head) < 4:
        chunk = sock.recv(4 - len(head))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        head += chunk
    size = struct.unpack(">i", head)[0]
    body = bytearray()
    while len(body) < size:
        chunk = sock.recv(size - len(body))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        body += chunk
    return bytes(body)


def _pinger(port: int, budget_s: float, ready, stop, results) -> None:
    """Ping 127.0.0.1:`port` every 1 ms until `stop` is set or `budget_s` has passed, then put the samples
    on `results`: send times (CLOCK_MONOTONIC ns, comparable with the parent's), round trips and wake-up
    lags in ns, as array bytes, and an error text or None."""
    sent_at, rtt, lag = array("q"), array("q"), array("q")
    error = None
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=PING_TIMEOUT_S) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.sendall(_api_versions_v0(0))
            _read_frame(sock)  # the connection is set up and answered before the clock matters
            ready.set()
            start = time.monotonic_ns()
            deadline = start + int(budget_s * 1e9)
            max_pings = int(budget_s * 1e9 / PING_INTERVAL_NS) + 1
            due = start
            for correlation_id in range(1, max_pings + 1):
                if stop.is_set():
                    break
                now = time.monotonic_ns()
                if now >= deadline:
                    break
                if now < due:
                    time.sleep((due - now) / 1e9)
                t0 = time.monotonic_ns()
                sock.sendall(_api_versions_v0(correlation_id))
                response = _read_frame(sock)
                t1 = time.monotonic_ns()
                got = struct.unpack(">i", response[:4])[0]
                if got != correlation_id:
                    raise RuntimeError(f"correlation id {got} in the response to {correlation_id}")
                sent_at.append(t0)
                rtt.append(t1 - t0)
                # How late this process itself woke up: its own scheduling delay, the machine's noise floor.
                lag.append(t0 - due)
                # The next request 1 ms after this one was sent, or at once when the round trip took longer.
                due = max(t0 + PING_INTERVAL_NS, t1)
    except Exception as exc:  # report, never hang the parent
        error = f"{type(exc).__name__}: {exc} (after {len(rtt)} pings)"
    finally:
        ready.set()
    results.put({"sent_at": sent_at.tobytes(), "rtt": rtt.tobytes(), "lag": lag.tobytes(), "error": error})


class Pinger:
    """The pinger process, started on a spawn context; `samples()` stops it and returns what it measured."""

    def __init__(self, port: int, budget_s: float) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._ready, self._stop, self._results = ctx.Event(), ctx.Event(), ctx.Queue()
        self.process = ctx.Process(target=_pinger, args=(port, budget_s, self._ready, self._stop, self._results),
                                   daemon=True)
        self.process.start()
        if not self._ready.wait(READY_TIMEOUT_S):
            self.close()
            raise RuntimeError(f"pinger not ready within {READY_TIMEOUT_S:.0f} s")

    def samples(self) -> dict:
        """{"sent_at", "rtt", "lag": array("q") of ns, "error": str | None}."""
        self._stop.set()
        try:
            raw = self._results.get(timeout=PING_TIMEOUT_S + 20.0)  # stopped: at most one round trip to go
        except queue.Empty:
            raw = {"sent_at": b"", "rtt": b"", "lag": b"", "error": "the pinger returned nothing"}
        out = {"error": raw["error"]}
        for key in ("sent_at", "rtt", "lag"):
            out[key] = array("q")
            out[key].frombytes(raw[key])
        return out

    def close(self) -> None:
        self._stop.set()
        self.process.join(5)
        if self.process.is_alive():
            self.process.kill()
            self.process.join(5)


def window_stats(samples: dict, start_ns: int, end_ns: int) -> dict:
    """Round trips (ms) of the pings sent in [start_ns, end_ns]: count, percentiles, how many exceeded each
    of STALL_THRESHOLDS_MS, the pinger's wake-up lag p99 and the worst pings (at_s: seconds from start_ns)."""
    picked = [(t, r, lag) for t, r, lag in zip(samples["sent_at"], samples["rtt"], samples["lag"])
              if start_ns <= t <= end_ns]
    rtts = sorted(r / 1e6 for _, r, _ in picked)
    lags = sorted(lag / 1e6 for _, _, lag in picked)
    out = {"count": len(rtts), "window_s": (end_ns - start_ns) / 1e9,
           "p50_ms": percentile(rtts, 0.50), "p99_ms": percentile(rtts, 0.99),
           "p999_ms": percentile(rtts, 0.999), "max_ms": rtts[-1] if rtts else None,
           "lag_p99_ms": percentile(lags, 0.99), "lag_max_ms": lags[-1] if lags else None}
    for threshold in STALL_THRESHOLDS_MS:
        out[f"over_{threshold}ms"] = sum(1 for r in rtts if r > threshold)
    worst = sorted(picked, key=lambda p: p[1], reverse=True)[:WORST_PINGS]
    out["worst"] = [{"at_s": round((t - start_ns) / 1e9, 3), "rtt_ms": round(r / 1e6, 2)}
                    for t, r, _ in sorted(worst)]
    return out


# --------------------------------------------------------------------------------------------------
# The load


def json_like_values(count: int = 4096, seed: int = 1) -> list[bytes]:
    """`count` distinct VALUE_SIZE-byte JSON objects. The 350 random bytes of each token, written as hex,
    are what zstd cannot squeeze below about half; the repeated note around them it almost removes: about
    2.7x over a batch (zstd's default level, as librdkafka uses). Seeded, so every round sends the same."""
    rnd = random.Random(seed)
    note = "some fairly repetitive text value, "
    values = []
    for i in range(count):
        head = (f'{{"id": {i}, "user": "user-{i % 1000}", "event": "page_view", '
                f'"token": "{rnd.randbytes(350).hex()}", "note": "')
        room = VALUE_SIZE - len(head) - 2
        values.append((head + (note * (room // len(note) + 1))[:room] + '"}').encode())
    return values


def scenario_settings(args: argparse.Namespace) -> tuple[dict, dict, list[bytes]]:
    """(topic config, producer config, the values to cycle through) for args.scenario."""
    if args.scenario == "roll":
        return ({"segment.bytes": str(args.segment_bytes)},
                {"linger.ms": 5, "batch.size": 1_000_000, "compression.type": "none"},
                [random.Random(VALUE_SIZE).randbytes(VALUE_SIZE)])
    return ({"max.message.bytes": str(16 * MiB)},
            {"linger.ms": 50, "batch.size": 4_000_000, "compression.type": "zstd", "message.max.bytes": 16 * MiB},
            json_like_values())


def produce_load(bootstrap: str, topic: str, producer_config: dict, values: list[bytes], seconds: float,
                 rate_mb: float, max_bytes: int, broker_pid: int) -> dict:
    """Produce `values` round-robin to partition 0 of `topic` for `seconds` (or `max_bytes` of values), paced
    to `rate_mb` MB/s of values when it is above 0, then flush. Returns the counts, "start_ns"/"end_ns" (first
    produce() / end of flush(), CLOCK_MONOTONIC) and "mb_per_s": delivered value bytes over that window."""
    client_log = ClientLog()
    state = {"failed": 0, "first_error": None}

    def on_delivery(err, _msg) -> None:
        if err is not None:
            state["failed"] += 1
            state["first_error"] = state["first_error"] or str(err)

    producer = Producer({
        "bootstrap.servers": bootstrap, "acks": 1, "enable.idempotence": False,
        # A modest local queue, so the producer is paced by the broker and flush() stays short.
        "queue.buffering.max.kbytes": 128 * 1024, "queue.buffering.max.messages": 200_000,
        "message.timeout.ms": int((seconds + FLUSH_TIMEOUT_S) * 1000), "delivery.report.only.error": True,
        "on_delivery": on_delivery, "logger": client_log.logger, **producer_config})
    producer.list_topics(topic, timeout=10)  # connect and load metadata before the clock starts
    cpu = CpuMeter(broker_pid)
    start = time.monotonic_ns()
    deadline = start + int(seconds * 1e9)
    sent = sent_bytes = queue_full = 0
    max_attempts = max_bytes // VALUE_SIZE * 2  # every attempt either sends or waits 10 ms for room
    for attempt in range(max_attempts):
        if attempt % 256 == 0:  # the clock and the pacing, every 256 records (~1.7 ms at 150 MB/s)
            now = time.monotonic_ns()
            if now >= deadline or sent_bytes >= max_bytes:
                break
            producer.poll(0)
            if rate_mb > 0:
                ahead_s = sent_bytes / (rate_mb * 1e6) - (now - start) / 1e9
                if ahead_s > 0:
                    time.sleep(min(ahead_s, (deadline - now) / 1e9))
        value = values[sent % len(values)]
        try:
            producer.produce(topic, value, partition=0)
        except BufferError:
            queue_full += 1
            producer.poll(0.01)
            continue
        sent += 1
        sent_bytes += len(value)
    produced = time.monotonic_ns()
    unflushed = producer.flush(FLUSH_TIMEOUT_S)
    end = time.monotonic_ns()
    cpu_used = cpu.used()
    if unflushed:
        producer.purge()
        producer.flush(5)
    delivered = sent - unflushed - state["failed"]
    seconds_taken = (end - start) / 1e9
    return {"start_ns": start, "end_ns": end, "produce_s": (produced - start) / 1e9, "flush_s": (end - produced) / 1e9,
            "sent": sent, "delivered": delivered, "failed": state["failed"], "unflushed": unflushed,
            "first_error": state["first_error"], "client_log": client_log.summary(), "queue_full": queue_full,
            # every value is VALUE_SIZE bytes
            "mb_per_s": delivered * VALUE_SIZE / seconds_taken / 1e6 if seconds_taken > 0 else None, **cpu_used}


# --------------------------------------------------------------------------------------------------
# One round: a fresh broker, the idle baseline, the load


def segment_files(partition_dir: str) -> tuple[int | None, int | None]:
    """(number of .log segment files, their bytes) in one partition's directory: how many segments the load
    filled (rolls + 1) and how much it stored; (None, None) if the directory is not there."""
    if not os.path.isdir(partition_dir):
        return None, None
    sizes = [os.path.getsize(os.path.join(partition_dir, name)) for name in os.listdir(partition_dir)
             if name.endswith(".log")]
    return len(sizes), sum(sizes)


def run_round(args: argparse.Namespace, spec: brokers.BrokerSpec, number: int) -> dict:
    """Start a broker from `spec`, ping it idle, load it, stop it. Every figure of the round, or "error"."""
    topic_config, producer_config, values = scenario_settings(args)
    result: dict = {"round": number, "loadavg_1m_at_start": round(os.getloadavg()[0], 2), "error": None}
    broker = brokers.BrokerProcess(spec)
    pinger = None
    try:
        pinger = Pinger(broker.port, args.baseline_seconds + args.seconds + FLUSH_TIMEOUT_S + 60.0)
        idle_start = time.monotonic_ns()
        time.sleep(args.baseline_seconds)
        idle_end = time.monotonic_ns()
        topic = f"loop-stall-{args.scenario}-{number}"
        create_topic(broker.bootstrap, topic, config=topic_config)
        try:
            load = produce_load(broker.bootstrap, topic, producer_config, values, args.seconds, args.rate_mb,
                                MAX_VALUE_BYTES[args.scenario], broker.pid)
        except Exception as exc:
            load = None
            result["error"] = f"load: {type(exc).__name__}: {exc}"
        time.sleep(0.2)  # the pings in flight at the end of flush() come back
        samples = pinger.samples()
        result["segments"], result["segment_bytes"] = segment_files(os.path.join(broker.tmp, "data", f"{topic}-0"))
        result["broker_alive"] = broker.alive()
        if not broker.alive():
            result["broker_log"] = broker.log_tail()
        if samples["error"]:
            result["error"] = result["error"] or f"pinger: {samples['error']}"
        result["idle"] = window_stats(samples, idle_start, idle_end)
        if load is not None:
            result["load"] = window_stats(samples, load["start_ns"], load["end_ns"])
            result["producer"] = load
            if load["failed"] or load["unflushed"]:
                result["error"] = result["error"] or (f"{load['failed']} records failed, {load['unflushed']} not "
                                                      f"delivered within {FLUSH_TIMEOUT_S:.0f} s; first: "
                                                      f"{load['first_error'] or load['client_log']}")
        origin = samples["sent_at"][0] if samples["sent_at"] else idle_start
        result["pings"] = {"sent_at_ms": [round((t - origin) / 1e6, 3) for t in samples["sent_at"]],
                           "rtt_us": [r // 1000 for r in samples["rtt"]],
                           "idle_from_ms": round((idle_start - origin) / 1e6, 3),
                           "load_from_ms": round((load["start_ns"] - origin) / 1e6, 3) if load else None,
                           "load_to_ms": round((load["end_ns"] - origin) / 1e6, 3) if load else None}
    finally:
        if pinger is not None:
            pinger.close()
        broker.stop()
    return result


# --------------------------------------------------------------------------------------------------
# Report


def ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def render(args: argparse.Namespace, info: dict, origin: str, rounds: list[dict]) -> str:
    if args.scenario == "roll":
        load = (f"1 KiB incompressible values at {args.rate_mb:g} MB/s, segment.bytes "
                f"{args.segment_bytes:,}, linger.ms=5, batch.size=1000000")
    else:
        pace = f"paced at {args.rate_mb:g} MB/s" if args.rate_mb > 0 else "as fast as it goes"
        load = f"1 KiB JSON-like values, zstd, linger.ms=50, batch.size=4000000, {pace}"
    out = [f"# odradek event-loop stalls: {args.scenario}\n",
           f"{info['date']}, {info['nproc']} cores, load average {info['loadavg_1m']}, Python {info['python']}, "
           f"librdkafka {info['librdkafka']}; odradek from {origin}\n",
           f"Producer: {load}, {args.seconds:g} s per round. Pinger: ApiVersions v0 every 1 ms on its own "
           f"connection; round trips in ms over the load window (first produce() to end of flush()).\n",
           "| round | pings | p50 | p99 | p99.9 | max | "
           + " | ".join(f">{t} ms" for t in STALL_THRESHOLDS_MS) + " | MB/s | idle p99 | pinger lag p99 |",
           "|---:|---:|---:|---:|---:|---:|" + "---:|" * len(STALL_THRESHOLDS_MS) + "---:|---:|---:|"]
    for r in rounds:
        w, idle, producer = r.get("load"), r.get("idle"), r.get("producer")
        if w is None:
            out.append(f"| {r['round']} | n/a |" + " |" * (7 + len(STALL_THRESHOLDS_MS)))
            continue
        mb_s = "n/a" if not producer or producer["mb_per_s"] is None else f"{producer['mb_per_s']:.0f}"
        out.append(f"| {r['round']} | {w['count']:,} | {ms(w['p50_ms'])} | {ms(w['p99_ms'])} | {ms(w['p999_ms'])} "
                   f"| {ms(w['max_ms'])} | " + " | ".join(str(w[f"over_{t}ms"]) for t in STALL_THRESHOLDS_MS)
                   + f" | {mb_s} | {ms(idle['p99_ms'] if idle else None)} | {ms(w['lag_p99_ms'])} |")
    out.append("")
    for r in rounds:
        if r.get("segments") is not None and r.get("producer"):
            stored = r["segment_bytes"]
            ratio = r["producer"]["delivered"] * VALUE_SIZE / stored if stored else None
            files = "segment file" + ("s" if r["segments"] != 1 else "")
            out.append(f"- round {r['round']}: {r['segments']} {files}, {stored / 1e6:,.0f} MB stored "
                       f"(values ÷ stored {ratio:.2f}x)" if ratio else f"- round {r['round']}: nothing stored")
        if r["error"]:
            out.append(f"- round {r['round']} failed: " + r["error"].replace("\n", " ").replace("|", "/"))
    return "\n".join(out) + "\n"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", required=True, choices=("roll", "compressed"))
    parser.add_argument("--rounds", type=int, default=2, help="rounds, each on a fresh broker (default 2)")
    parser.add_argument("--seconds", type=float, default=20.0, help="produce time per round (default 20)")
    parser.add_argument("--rate-mb", type=float,
                        help="pace the producer to this many MB/s of values; 0: as fast as it goes "
                             "(default 150 for roll, 0 for compressed)")
    parser.add_argument("--segment-bytes", type=int, default=64 * MiB,
                        help="the roll topic's segment.bytes (default 64 MiB)")
    parser.add_argument("--baseline-seconds", type=float, default=2.0,
                        help="idle pinging before the load, per round (default 2)")
    parser.add_argument("--odradek-src", metavar="DIR", help="run the broker with DIR first on PYTHONPATH "
                                                             "(a checkout's src directory, holding odradek/)")
    parser.add_argument("--out-dir", default=os.path.join(brokers.BENCH, "results"),
                        help="where loop_stall-<scenario>.json goes (default bench/results)")
    args = parser.parse_args()
    if not 0 < args.seconds <= 600:
        parser.error("--seconds must be in (0, 600]")
    if not 0 <= args.baseline_seconds <= 60:
        parser.error("--baseline-seconds must be in [0, 60]")
    if not 1 <= args.rounds <= 20:
        parser.error("--rounds must be in 1..20")
    if args.rate_mb is None:
        args.rate_mb = 150.0 if args.scenario == "roll" else 0.0
    env = {}
    if args.odradek_src:
        src = os.path.abspath(args.odradek_src)
        if not os.path.isfile(os.path.join(src, "odradek", "__init__.py")):
            parser.error(f"--odradek-src: no odradek/__init__.py in {src}")
        env["PYTHONPATH"] = os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p)
    origin = brokers.odradek_origin(env)
    spec = brokers.BrokerSpec("odradek-disk", "odradek (disk)", "segment files in a temp dir, default flush policy",
                              brokers.odradek_command, tempfile.gettempdir(), env=env)
    info = machine()
    rounds = []
    for number in range(1, args.rounds + 1):
        log(f"round {number}/{args.rounds}: {args.scenario}, odradek from {origin}")
        try:
            rounds.append(run_round(args, spec, number))
        except Exception as exc:  # a broker that does not start, a topic it refuses: the next round still runs
            rounds.append({"round": number, "error": f"{type(exc).__name__}: {exc}"})
        r = rounds[-1]
        if r.get("load"):
            log(f"  {r['load']['count']:,} pings under load, p99 {ms(r['load']['p99_ms'])} ms, "
                f"max {ms(r['load']['max_ms'])} ms; {ms(r['producer']['mb_per_s'])} MB/s")
        if r["error"]:
            log(f"  failed: {r['error']}")
    print(render(args, info, origin, rounds))
    os.makedirs(args.out_dir, exist_ok=True)
    path = os.path.join(args.out_dir, f"loop_stall-{args.scenario}.json")
    with open(path, "w") as fh:
        json.dump({"machine": info, "odradek": origin, "args": vars(args), "rounds": rounds}, fh, default=str)
    log(f"wrote {os.path.relpath(path, REPO) if path.startswith(REPO + os.sep) else path}")
    return 1 if any(r["error"] for r in rounds) else 0


if __name__ == "__main__":
    sys.exit(main())
