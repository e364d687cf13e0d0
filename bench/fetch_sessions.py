"""Incremental fetch sessions (KIP-227): a consumer of many partitions with little traffic, with and without.

    .venv/bin/python bench/fetch_sessions.py [--partitions 1000] [--rate 100] [--seconds 20] [--rounds 2]

One odradek broker (disk log, default settings) on a free loopback port and one topic of `--partitions`
partitions. The `sessions` subcommand of tests/franz (franz-go) consumes every partition from its end while a
second client in the same process produces `--rate` small records a second, spread over the partitions; after
a 5 s warm-up it measures for `--seconds`: the consumer's Fetch requests and the bytes of those requests and
of their responses on the wire (kgo's broker hooks), with fetch sessions (kgo's default: after the first full
fetch each request names only what changed and each response only the partitions with news) and without
(every request names all partitions, every response answers for all of them). fetch.max.wait is 500 ms, the
Java client's default. The broker's CPU over the same window comes from /proc (utime + stime). Rounds
alternate the two modes. Writes bench/results/fetch_sessions.md and .json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import brokers
import native


def log(msg: str) -> None:
    print(f"[fetch-sessions] {msg}", file=sys.stderr, flush=True)


def measure(binary: str, broker_pid: int, bootstrap: str, topic: str, partitions: int, sessions: bool, rate: int,
            seconds: int) -> dict:
    """One `franz sessions` run; its result with the broker's CPU over the measured window."""
    argv = native.franz_argv(binary, "sessions", "-topic", topic, "-partitions", partitions, "-rate", rate,
                             f"-sessions={'true' if sessions else 'false'}", "-duration", f"{seconds}s",
                             bootstrap=bootstrap, timeout=seconds + 60)
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # {"phase": "measure"} once the warm-up is over
        if json.loads(first or "{}").get("phase") != "measure":
            raise RuntimeError(f"franz sessions: {first!r} {proc.stderr.read()[-500:] if proc.stderr else ''}")
        cpu0, t0 = native.cpu_s(broker_pid), time.perf_counter()
        out, err = proc.communicate(timeout=seconds + 60)
        cpu, wall = native.cpu_s(broker_pid) - cpu0, time.perf_counter() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    res = native.last_line("sessions", proc.returncode, out, err)
    s = res["seconds"]
    res.update(broker_cpu_s=cpu, broker_cores=cpu / wall, requests_per_s=res["fetch_requests"] / s,
               request_bytes_per_s=res["request_bytes"] / s, response_bytes_per_s=res["response_bytes"] / s,
               consumed_per_s=res["consumed"] / s, produced_per_s=res["produced"] / s)
    return res


def run(partitions: int, rate: int, seconds: int, rounds: int) -> dict:
    part = {"when": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "partitions": partitions, "rate": rate, "seconds": seconds, "rounds": rounds, "nproc": os.cpu_count(),
            "loadavg_1m_at_start": os.getloadavg()[0], "runs": {"with": [], "without": []}}
    with tempfile.TemporaryDirectory(prefix="odradek-fetch-sessions-") as tmp:
        binary = native.build(tmp)
        spec = brokers.BrokerSpec("odradek-disk", "odradek (disk)", "disk log", brokers.odradek_command,
                                  tempfile.gettempdir())
        broker = brokers.BrokerProcess(spec)
        try:
            topic = "fetch-sessions"
            created = native.franz(binary, "admin", "-op", "create", "-topics", topic, "-partitions", partitions,
                                   bootstrap=broker.bootstrap, timeout=120)
            if created["err"]:
                raise RuntimeError(f"create {topic}: {created['err']}")
            for i in range(rounds):
                for mode in (("with", "without") if i % 2 == 0 else ("without", "with")):
                    res = measure(binary, broker.pid, broker.bootstrap, topic, partitions, mode == "with", rate,
                                  seconds)
                    part["runs"][mode].append(res)
                    log(f"{mode} sessions, round {i + 1}: {res['requests_per_s']:.1f} fetches/s, requests "
                        f"{res['request_bytes_per_s'] / 1e3:,.1f} kB/s, responses "
                        f"{res['response_bytes_per_s'] / 1e3:,.1f} kB/s, broker {res['broker_cores']:.3f} cores")
        finally:
            broker.stop()
    for mode, runs in part["runs"].items():
        part[mode] = {k: statistics.median(r[k] for r in runs) for k in
                      ("requests_per_s", "request_bytes_per_s", "response_bytes_per_s", "broker_cores",
                       "consumed_per_s", "produced_per_s")}
    return part


def render(part: dict) -> str:
    w, wo = part["with"], part["without"]
    lines = ["## Fetch sessions (bench/fetch_sessions.py)", "",
             f"{part['when']}; {part['nproc']} cores, load average {part['loadavg_1m_at_start']:.2f} at the start; "
             f"one franz-go consumer of {part['partitions']:,} partitions from their end, {part['rate']} records/s "
             f"produced meanwhile, fetch.max.wait 500 ms; {part['seconds']} s measured after a 5 s warm-up, median "
             f"of {part['rounds']} rounds per mode.", "",
             "| per second | with fetch sessions | without | without ÷ with |", "|---|---:|---:|---:|"]
    rows = [("Fetch requests", "requests_per_s", 1, "{:,.1f}"),
            ("request bytes (kB)", "request_bytes_per_s", 1e3, "{:,.1f}"),
            ("response bytes (kB)", "response_bytes_per_s", 1e3, "{:,.1f}"),
            ("broker CPU (cores)", "broker_cores", 1, "{:.3f}"),
            ("records consumed", "consumed_per_s", 1, "{:,.0f}")]
    for label, key, scale, fmt in rows:
        ratio = wo[key] / w[key] if w[key] else float("nan")
        lines.append(f"| {label} | {fmt.format(w[key] / scale)} | {fmt.format(wo[key] / scale)} | {ratio:.1f}× |")
    lines.append("")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--rate", type=int, default=100, help="records a second produced meanwhile")
    parser.add_argument("--seconds", type=int, default=20, help="the measured window of each run")
    parser.add_argument("--rounds", type=int, default=2, help="runs per mode, alternating (median)")
    args = parser.parse_args()
    return native.publish("fetch_sessions", run(args.partitions, args.rate, args.seconds, args.rounds), render)


if __name__ == "__main__":
    sys.exit(main())
