"""A long run of the pre-authentication mutation fuzz (tests/security/fuzzing.py; `make test` runs 2,000 cases).

    .venv/bin/python bench/fuzz_preauth.py --frames 1000000 --seconds 3600 --seed 1
    .venv/bin/python bench/fuzz_preauth.py --seed 20261128 --case 1234        # replay one case, verbosely

Starts a fresh broker (PLAINTEXT for setup, SASL_PLAINTEXT with PLAIN and SCRAM-SHA-256, KAFKA07; its data and
log in a temporary directory, kept when something is found) unless `--sasl-port` and `--kafka07-port` name a
running one. One connection per case; a case is one mutated frame, after the unmutated corpus frames it needs
(a handshake); `--frames` bounds the cases. Prints progress every 10 s, then the summary, each finding with
its seed and case, and the lines of the broker's log that show an unhandled error; exits 1 if anything was
found. The report also goes to bench/results/fuzz_preauth.md.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # tests.* : the engine and the broker process of the tests
from tests.conftest import BrokerProcess, free_port  # noqa: E402
from tests.security import fuzzing  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--frames", type=int, default=1_000_000, help="cases (mutated frames) at most")
    parser.add_argument("--seconds", type=float, default=180.0, help="wall time at most")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--case", type=int, action="append", help="run only this case (repeatable)")
    parser.add_argument("--concurrency", type=int, default=8, help="connections in flight")
    parser.add_argument("--deadline", type=float, default=10.0, help="seconds a connection may take to answer or close")
    parser.add_argument("--secured", action="store_true",
                        help="the broker under the authorizer, the 0.7 principal granted the fuzz topic alone")
    parser.add_argument("--sasl-port", type=int, help="attack a running broker: its SASL_PLAINTEXT port")
    parser.add_argument("--kafka07-port", type=int, help="attack a running broker: its KAFKA07 port")
    args = parser.parse_args()

    started = datetime.datetime.now(datetime.timezone.utc)
    workdir = Path(tempfile.mkdtemp(prefix="odradek-fuzz-"))
    broker: BrokerProcess | None = None
    if args.sasl_port and args.kafka07_port:
        target = fuzzing.Target("127.0.0.1", args.sasl_port, args.kafka07_port)
    else:
        plain, sasl, kafka07 = free_port(), free_port(), free_port()
        broker = BrokerProcess(workdir / "data", fuzzing.broker_settings(plain, sasl, kafka07, args.secured),
                               port=plain, args=["--log-level", "WARNING"]).start()
        fuzzing.setup(sasl, args.secured)
        target = fuzzing.Target("127.0.0.1", sasl, kafka07, broker.proc.pid)
    try:
        asyncio.run(fuzzing.prepare(target))
        if args.case:
            seeds = fuzzing.corpus()
            for index in args.case:
                case = fuzzing.make_case(args.seed, index, seeds)
                print(case.describe())
                print(f"  prefix frames: {[f.hex() for f in case.seed.prefix]}")
                print(f"  frame: {case.frame.hex()}")
        report = asyncio.run(fuzzing.fuzz(
            target, args.seed, args.frames, args.seconds, concurrency=args.concurrency, deadline_s=args.deadline,
            only=args.case, progress=lambda r: print(f"  {r.summary()}", file=sys.stderr, flush=True)))
        alive = broker is None or broker.is_running()
        problems = fuzzing.log_problems(broker.log_path.read_text()) if broker is not None else []
    finally:
        if broker is not None:
            broker.stop()

    command = (f"bench/fuzz_preauth.py --frames {args.frames} --seconds {args.seconds:g} --seed {args.seed}"
               + (" --secured" if args.secured else ""))
    lines = [f"# Pre-authentication fuzz, {started:%Y-%m-%d %H:%M} UTC", "",
             f"`{command}` (concurrency {args.concurrency}, deadline {args.deadline:g} s)", "", report.summary(), ""]
    lines += [f"- {f.describe(args.seed)}" for f in report.findings]
    lines += [f"- broker log: {line}" for line in problems]
    if not alive:
        lines.append("- the broker process is gone")
    found = bool(report.findings or problems or not alive)
    lines.append("" if found else "No finding.")
    text = "\n".join(lines)
    print(text)
    results = REPO / "bench" / "results"
    results.mkdir(exist_ok=True)
    (results / "fuzz_preauth.md").write_text(text + "\n")
    if found and broker is not None:
        print(f"broker data and log kept in {workdir}")
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if found else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
