"""Native client: odradek measured with franz-go (Go) instead of a Python client, against loopback bandwidth.

    .venv/bin/python bench/native.py [--count 1000000] [--rounds 3] [--clients 2] [--quick]

The load generator is the `bench` and `loopback` subcommands of tests/franz (one Go module with the franz-go
interop tests), built here with `go build` into a temporary directory; its modules come through the Go module
proxy on first use. One odradek broker (disk log, default settings: bench/brokers.py's odradek (disk)) runs on a
free loopback port. In one run this measures:

* loopback TCP bandwidth: one Go process, one goroutine writing 1 MiB buffers and one reading them over a
  127.0.0.1 socket for 3 s (`--rounds` times, median);
* produce: `--count` records of 1 KiB (random bytes, no key, no compression) into a fresh 1-partition topic as fast
  as one kgo client goes, with acks=1 (idempotence off, up to 5 requests in flight) and then acks=all (idempotent,
  kgo's default, 5 in flight), each capped at 20 s;
* consume: the acks=1 topic's records read back from offset 0 by one kgo client (fetch.max.bytes 64 MiB, 16 MiB per
  partition), a fresh client each of `--rounds` rounds (median), capped at 20 s; reported as MB/s of values and as a
  fraction of the loopback bandwidth. One kgo client decoding 1 KiB records keeps a core busy by itself, so a
  second row has `--clients` processes (2) each read every record at the same time (their sum).

Each row also shows the CPU the broker and the client used (seconds per million records, and cores: CPU seconds
over wall seconds). Writes bench/results/native.md and native.json; `make bench` runs it too (bench/compare.py,
its "native" part).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Callable

import brokers
from workloads import REPO

FRANZ_SRC = os.path.join(REPO, "tests", "franz")
SIZE = 1024
CAP_S = 20
LOOPBACK_S = 3
BUILD_TIMEOUT_S = 300
_TICK = os.sysconf("SC_CLK_TCK")


def log(msg: str) -> None:
    print(f"[native] {msg}", file=sys.stderr, flush=True)


def find_go() -> str | None:
    found = shutil.which("go")
    if found:
        return found
    default = "/usr/local/go/bin/go"  # the official tarball's place, often not on PATH
    return default if os.path.isfile(default) else None


def build(out_dir: str) -> str:
    """`go build` tests/franz into out_dir; the binary's path. RuntimeError without go or on failure."""
    go = find_go()
    if go is None:
        raise RuntimeError("go not found (tests/franz needs Go 1.26)")
    binary = os.path.join(out_dir, "franz")
    r = subprocess.run([go, "build", "-o", binary, "."], cwd=FRANZ_SRC, env={**os.environ, "GOFLAGS": "-mod=mod"},
                       capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    if r.returncode != 0:
        raise RuntimeError(f"go build of tests/franz failed: {(r.stderr or r.stdout).strip()[-500:]}")
    return binary


def cpu_s(pid: int) -> float:
    """utime + stime of `pid`, seconds."""
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def franz_argv(binary: str, command: str, *args, bootstrap: str | None = None, timeout: float = 60) -> list[str]:
    return [binary, command, "-timeout", f"{timeout}s", *(["-brokers", bootstrap] if bootstrap else []),
            *[str(a) for a in args]]


def last_line(command: str, returncode: int, stdout: str, stderr: str) -> dict:
    if returncode != 0:
        raise RuntimeError(f"franz {command} exited {returncode}: {stderr.strip()[-500:]}")
    lines = [json.loads(line) for line in stdout.splitlines() if line.strip()]
    if not lines:
        raise RuntimeError(f"franz {command} printed nothing")
    return lines[-1]


def franz(binary: str, command: str, *args, bootstrap: str | None = None, timeout: float = 60) -> dict:
    """Run one subcommand of the Go program; its last JSON line. RuntimeError if it fails."""
    r = subprocess.run(franz_argv(binary, command, *args, bootstrap=bootstrap, timeout=timeout), capture_output=True,
                       text=True, timeout=timeout + 15)
    return last_line(command, r.returncode, r.stdout, r.stderr)


def measured(binary: str, broker_pid: int, bootstrap: str, *args, clients: int = 1) -> dict:
    """`franz bench` in `clients` processes at once (each does all of `args`), with the broker's and the clients'
    CPU over it. Records and bytes are the clients' sums, seconds the longest client's."""
    argv = franz_argv(binary, "bench", *args, "-duration", f"{CAP_S}s", bootstrap=bootstrap, timeout=CAP_S + 30)
    broker0, client0, t0 = cpu_s(broker_pid), children_cpu_s(), time.perf_counter()
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(clients)]
    results = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=CAP_S + 45)
            results.append(last_line("bench", proc.returncode, out, err))
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    wall = time.perf_counter() - t0
    broker, client = cpu_s(broker_pid) - broker0, children_cpu_s() - client0
    res = dict(results[0], clients=clients, per_client=results)
    for key in ("records", "bytes", "failures"):
        res[key] = sum(r[key] for r in results)
    res["seconds"] = max(r["seconds"] for r in results)
    res["capped"] = any(r["capped"] for r in results)
    res["msgs_per_s"], res["mb_per_s"] = res["records"] / res["seconds"], res["bytes"] / res["seconds"] / 1e6
    per_m = 1e6 / res["records"] if res["records"] else float("nan")
    res.update(broker_cpu_s=broker, client_cpu_s=client, broker_cpu_per_m=broker * per_m,
               client_cpu_per_m=client * per_m, broker_cores=broker / wall, client_cores=client / wall)
    if res["failures"]:
        errors = [r.get("first_error") for r in results if r.get("first_error")]
        raise RuntimeError(f"franz bench {args[:2]}: {res['failures']} failures, first: {errors[:1]}")
    return res


def median_row(rows: list[dict]) -> dict:
    """The row of median MB/s (the upper middle one of an even count)."""
    return sorted(rows, key=lambda r: r["mb_per_s"])[len(rows) // 2]


def run(count: int = 1_000_000, rounds: int = 3, clients: int = 2) -> dict:
    """The whole measurement; the part of the report that render() writes. Raises RuntimeError when the Go
    program cannot be built or a step fails."""
    part = {"when": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "count": count,
            "rounds": rounds, "clients": clients, "size": SIZE, "nproc": os.cpu_count(),
            "loadavg_1m_at_start": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory(prefix="odradek-native-") as tmp:
        log("building tests/franz…")
        t0 = time.perf_counter()
        binary = build(tmp)
        part["build_s"] = time.perf_counter() - t0
        part["go"] = subprocess.run([find_go(), "version"], capture_output=True, text=True, timeout=30).stdout.strip()
        loops = []
        for i in range(rounds):
            loops.append(franz(binary, "loopback", "-duration", f"{LOOPBACK_S}s", timeout=LOOPBACK_S + 30))
            log(f"loopback {i + 1}/{rounds}: {loops[-1]['mb_per_s']:,.0f} MB/s")
        part["loopback"] = loops
        part["loopback_mb_per_s"] = statistics.median(r["mb_per_s"] for r in loops)
        spec = brokers.BrokerSpec("odradek-disk", "odradek (disk)", "disk log", brokers.odradek_command,
                                  tempfile.gettempdir())
        broker = brokers.BrokerProcess(spec)
        try:
            boot = broker.bootstrap
            topics = {"1": "native-acks-1", "all": "native-acks-all"}
            for topic in topics.values():
                created = franz(binary, "admin", "-op", "create", "-topics", topic, "-partitions", 1, bootstrap=boot)
                if created["err"]:
                    raise RuntimeError(f"create {topic}: {created['err']}")
            part["produce"] = {}
            for acks, topic in topics.items():
                res = measured(binary, broker.pid, boot, "-mode", "produce", "-topic", topic, "-n", count,
                               "-size", SIZE, "-acks", acks)
                part["produce"][acks] = res
                log(f"produce acks={acks}: {res['msgs_per_s']:,.0f} msgs/s, {res['mb_per_s']:,.1f} MB/s"
                    + (" (time cap)" if res["capped"] else ""))
            stored = part["produce"]["1"]["records"]
            consumes = []
            for i in range(rounds):
                res = measured(binary, broker.pid, boot, "-mode", "consume", "-topic", topics["1"], "-n", stored,
                               "-size", SIZE)
                consumes.append(res)
                log(f"consume {i + 1}/{rounds}: {res['msgs_per_s']:,.0f} msgs/s, {res['mb_per_s']:,.1f} MB/s"
                    + (" (time cap)" if res["capped"] else ""))
            part["consume"] = consumes
            part["consume_median"] = median_row(consumes)
            if clients > 1:
                many = []
                for i in range(rounds):
                    res = measured(binary, broker.pid, boot, "-mode", "consume", "-topic", topics["1"], "-n", stored,
                                   "-size", SIZE, clients=clients)
                    many.append(res)
                    log(f"consume, {clients} clients at once, {i + 1}/{rounds}: {res['msgs_per_s']:,.0f} msgs/s, "
                        f"{res['mb_per_s']:,.1f} MB/s" + (" (time cap)" if res["capped"] else ""))
                part["consume_clients"] = many
                part["consume_clients_median"] = median_row(many)
        finally:
            broker.stop()
    part["consume_vs_loopback"] = part["consume_median"]["mb_per_s"] / part["loopback_mb_per_s"]
    return part


def render(part: dict) -> str:
    lines = ["## Native client (bench/native.py)", ""]
    if "na" in part:
        return "\n".join(lines + [f"n/a: {part['na']}", ""])
    loop = part["loopback_mb_per_s"]
    lines += [f"{part['when']}; {part['nproc']} cores, load average {part['loadavg_1m_at_start']:.2f} at the start; "
              f"franz-go ({part['go']}), one client process per row unless it says otherwise; one odradek (disk "
              f"log, default settings); {part['size']:,} B records, no key, no compression. Loopback: one TCP "
              f"stream in one Go process, median of {part['rounds']}: {loop:,.0f} MB/s.", "",
              "| row | records | msgs/s | MB/s | % of loopback | broker CPU s/M (cores) | client CPU s/M (cores) |",
              "|---|---:|---:|---:|---:|---:|---:|"]

    def row(label: str, r: dict) -> None:
        cap = " †" if r["capped"] else ""
        lines.append(f"| {label} | {r['records']:,}{cap} | {r['msgs_per_s']:,.0f} | {r['mb_per_s']:,.1f} | "
                     f"{100 * r['mb_per_s'] / loop:.1f} % | {r['broker_cpu_per_m']:.2f} ({r['broker_cores']:.2f}) | "
                     f"{r['client_cpu_per_m']:.2f} ({r['client_cores']:.2f}) |")

    row("produce acks=1", part["produce"]["1"])
    row("produce acks=all (idempotent)", part["produce"]["all"])
    row(f"consume, one client (median of {part['rounds']})", part["consume_median"])
    spread = ", ".join(f"{r['mb_per_s']:,.1f}" for r in part["consume"])
    many = ""
    if part.get("consume_clients_median"):
        k = part["clients"]
        row(f"consume, {k} clients at once, each all records (median of {part['rounds']})",
            part["consume_clients_median"])
        many = (f" With {k} clients each reading every record at once: "
                f"{100 * part['consume_clients_median']['mb_per_s'] / loop:.1f} % (rounds: "
                + ", ".join(f"{r['mb_per_s']:,.1f}" for r in part["consume_clients"])
                + " MB/s, summed over the clients over the slowest client's time).")
    lines += ["", f"Consume throughput of one client is {100 * part['consume_vs_loopback']:.1f} % of loopback "
              f"bandwidth (rounds: {spread} MB/s).{many} MB = 10^6 bytes of values; † the {CAP_S} s cap ended "
              "the row first. CPU: seconds per million records and, in brackets, CPU seconds over the row's wall "
              "time (client processes' start included).", ""]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, help="1 KiB records produced per acks setting (default 1,000,000)")
    parser.add_argument("--rounds", type=int, default=3, help="loopback and consume rounds, median (default 3)")
    parser.add_argument("--clients", type=int, default=2,
                        help="one more consume row: this many clients at once, each reading every record "
                             "(default 2; 1 leaves the row out)")
    parser.add_argument("--quick", action="store_true", help="200,000 records")
    args = parser.parse_args()
    count = args.count or (200_000 if args.quick else 1_000_000)
    if count < 1 or args.rounds < 1 or args.clients < 1:
        parser.error("--count, --rounds and --clients must be at least 1")
    part = run(count, args.rounds, args.clients)
    text = render(part)
    print(text)
    log(f"wrote {write_results('native', text, part)} and native.json")
    return 0


def write_results(name: str, text: str, part: dict) -> str:
    """bench/results/NAME.md (the rendered report) and NAME.json (the figures); the .md's path."""
    out = os.path.join(REPO, "bench", "results")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, f"{name}.json"), "w") as fh:
        json.dump(part, fh, indent=2)
    path = os.path.join(out, f"{name}.md")
    with open(path, "w") as fh:
        fh.write(text)
    return path


def publish(name: str, part: dict, render: Callable[[dict], str]) -> int:
    """Print a benchmark's report and write it with its figures (`write_results`); exit status 0."""
    text = render(part)
    print(text)
    write_results(name, text, part)
    return 0


if __name__ == "__main__":
    sys.exit(main())
