"""`make soak`: a three-broker odradek cluster under random faults for a given number of minutes, with an
idempotent producer, a transactional consume-transform-produce loop, a consumer group and the Java client
running throughout; checked for safety at the end and for liveness after every fault.

Usage:  .venv/bin/python bench/soak.py [--minutes 15] [--seed N] [--one-each] [--no-java] [--loopback]
                                       [--out-dir bench/results] [--keep]

The engine, its faults, its clients and the derivation of the liveness deadline are tests/faults/nemesis.py's
(the short run of `make test`, tests/faults/test_soak_short.py, uses the same). Network namespaces need root
and iproute2; without them the cluster runs on loopback without the network-partition fault. Prints a summary
table and writes bench/results/soak.md and soak.json; exits 1 when a safety, liveness or broker-log check
failed (the broker and ZooKeeper logs are then kept, and their directory printed).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the checkout, for tests.*
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # bench/, for workloads

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from tests.faults.nemesis import KIND_TITLES, LIVENESS_DEADLINE_S, SoakConfig, SoakResult, run_soak  # noqa: E402
from workloads import machine, write_results  # noqa: E402


def _s(value: float | None) -> str:
    return "stuck" if value is None else f"{value:.1f}"


def summary_table(result: SoakResult) -> Table:
    table = Table(title=f"soak: {len(result.faults)} faults, seed {result.config.seed}, {result.placement}")
    table.add_column("fault")
    table.add_column("n", justify="right")
    table.add_column("producer unavailable s (median / max)", justify="right")
    table.add_column("client: progress after the heal s (median / max), longest stall s")
    for kind, row in result.by_kind().items():
        clients = "\n".join(f"{client}: {_s(r['after_heal_median_s'])} / {_s(r['after_heal_max_s'])}, "
                            f"stall {_s(r['stall_max_s'])}" + (f", STUCK {r['stuck']}x" if r["stuck"] else "")
                            for client, r in row["recovery"].items())
        table.add_row(KIND_TITLES[kind], str(row["faults"]),
                      f"{_s(row['unavailable_median_s'])} / {_s(row['unavailable_max_s'])}", clients)
    return table


def markdown(result: SoakResult, info: dict) -> str:
    lines = [f"# odradek soak ({result.config.minutes:g} min, seed {result.config.seed})\n",
             f"- date: {info['date']}; machine: {info['nproc']} cores; load average at start {info['loadavg_1m']}",
             f"- cluster: 3 brokers on {result.placement}; Java client: {result.java}",
             f"- liveness deadline after each heal: {LIVENESS_DEADLINE_S:.0f} s (tests/faults/nemesis.py)",
             f"- counts: {result.counts}",
             f"- verdict: {'PASS' if result.ok else 'FAIL'}\n",
             "| fault | n | producer unavailable, s (median / max) | client recovery after the heal, s "
             "(median / max; longest stall from the fault) |", "|---|---:|---:|---|"]
    for kind, row in result.by_kind().items():
        clients = "<br>".join(f"{c}: {_s(r['after_heal_median_s'])} / {_s(r['after_heal_max_s'])}; "
                              f"stall {_s(r['stall_max_s'])}" + (f"; STUCK {r['stuck']}x" if r["stuck"] else "")
                              for c, r in row["recovery"].items())
        lines.append(f"| {KIND_TITLES[kind]} | {row['faults']} | {_s(row['unavailable_median_s'])} / "
                     f"{_s(row['unavailable_max_s'])} | {clients} |")
    for name in ("safety", "liveness", "logs"):
        items = getattr(result, name)
        if items:
            lines.append(f"\n## {name} failures\n")
            lines.extend(f"- {item}" for item in items[:50])
    lines.append("\nApache Kafka 4.4 under the same faults: not measured yet (see the report of issue 37).")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=15.0, help="minutes of faults (default 15)")
    parser.add_argument("--seed", type=int, help="the random seed of the faults (default: a new one, printed)")
    parser.add_argument("--one-each", action="store_true", help="one fault of each kind instead of --minutes")
    parser.add_argument("--no-java", action="store_true", help="without the Java client")
    parser.add_argument("--loopback", action="store_true", help="on loopback even where namespaces can be made")
    parser.add_argument("--out-dir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results"))
    parser.add_argument("--keep", action="store_true", help="keep the logs also when the soak passes")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 31)
    config = SoakConfig(minutes=args.minutes, seed=seed, one_each=args.one_each, java=not args.no_java,
                        netns=False if args.loopback else None)
    console = Console(stderr=True)
    info = machine()
    work_dir = Path(tempfile.mkdtemp(prefix="odradek-soak-"))
    console.print(f"soak: seed {seed}, {args.minutes:g} min, logs in {work_dir}")
    t0 = time.monotonic()
    result = run_soak(config, work_dir, log=lambda line: console.print(f"[{time.monotonic() - t0:6.0f} s] {line}",
                                                                       highlight=False))
    console.print(summary_table(result))
    console.print(str(result), highlight=False)
    write_results(args.out_dir, "soak", markdown(result, info), {"machine": info, "soak": result.as_json()})
    if result.ok and not args.keep:
        shutil.rmtree(work_dir, ignore_errors=True)
    else:
        console.print(f"logs kept in {work_dir}")
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
