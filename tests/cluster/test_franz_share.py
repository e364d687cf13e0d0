"""franz-go's own share-group integration tests (pkg/kgo, KIP-932 with ShareFetch and ShareAcknowledge v2)
against a three-broker odradek cluster and against a single broker.

franz-go skips these tests unless the broker advertises ShareFetch v2 and ShareAcknowledge v2 (Kafka 4.2+),
so each run parses `go test -v` and requires every expected test to PASS, none to SKIP. The module is fetched
at a pinned version through the Go module proxy into ~/.cache/odradek/franz-go/ and its test binary built
once (`go test -c`), kept beside it. Without `go` (or without the module proxy) the tests skip, except under
CI (`CI` set) where that is a failure.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.cluster.common import REPLICATED
from tests.conftest import BrokerProcess
from tests.interop.test_franz import find_go

FRANZ_VERSION = "v1.22.3"
CACHE = Path.home() / ".cache" / "odradek" / "franz-go" / FRANZ_VERSION
SHARE_TESTS = ("TestShareGroup", "TestShareGroupETL", "TestShareGroupAckOnClose", "TestShareGroupOffsetsAdmin",
               "TestConsumeRegexShareSkipsInternal")
RUN_PATTERN = "^(" + "|".join(SHARE_TESTS) + ")$"
RECORDS = 5000  # KGO_TEST_RECORDS: the ETL test's volume (franz-go's default, 500000, is a soak)
DOWNLOAD_TIMEOUT_S = 300
BUILD_TIMEOUT_S = 400
RUN_TIMEOUT_S = 150  # go test's own -timeout; the process gets 20 s more
OUTCOME = re.compile(r"^\s*--- (PASS|FAIL|SKIP): (\S+)", re.MULTILINE)


def _unavailable(reason: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"franz-go share tests must run in CI: {reason}")
    pytest.skip(reason)


def _go(go: str, args: list[str], cwd: Path, timeout: float, what: str) -> subprocess.CompletedProcess[str]:
    try:
        proc = subprocess.run([go, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                              env=dict(os.environ, GOFLAGS="-mod=mod", GOTOOLCHAIN="local"))
    except subprocess.TimeoutExpired:
        pytest.fail(f"{what} took over {timeout}s")
    return proc


@pytest.fixture(scope="session")
def kgo_test_binary() -> Path:
    """franz-go's pkg/kgo test binary at FRANZ_VERSION, built once into the cache."""
    go = find_go()
    if go is None:
        _unavailable("go not found")
    binary = CACHE / "kgo.test"
    if binary.is_file():
        return binary
    source = CACHE / "src"
    if not (source / "pkg" / "kgo").is_dir():
        scratch = CACHE / "download"
        scratch.mkdir(parents=True, exist_ok=True)
        (scratch / "go.mod").write_text("module franzshare\n\ngo 1.22\n")
        proc = _go(go, ["mod", "download", "-json", f"github.com/twmb/franz-go@{FRANZ_VERSION}"], scratch,
                   DOWNLOAD_TIMEOUT_S, "go mod download of franz-go")
        found = re.search(r'"Dir":\s*"([^"]+)"', proc.stdout)
        if proc.returncode != 0 or found is None:
            _unavailable(f"go mod download of franz-go {FRANZ_VERSION} failed: {proc.stdout[-1000:]}"
                         f"{proc.stderr[-1000:]}")
        staging = CACHE / f"src.partial-{os.getpid()}"  # another run may be filling the cache too
        shutil.rmtree(staging, ignore_errors=True)
        shutil.copytree(found.group(1), staging)  # a writable copy of the read-only module cache
        for path in staging.rglob("*"):
            path.chmod(path.stat().st_mode | 0o200)
        try:
            staging.rename(source)
        except OSError:  # the other run got there first
            shutil.rmtree(staging, ignore_errors=True)
    partial = f"{binary}.partial-{os.getpid()}"
    proc = _go(go, ["test", "-c", "-o", partial, "./pkg/kgo/"], source, BUILD_TIMEOUT_S,
               "go test -c of franz-go's pkg/kgo")
    if proc.returncode != 0:
        pytest.fail(f"go test -c of franz-go failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    os.replace(partial, binary)
    return binary


def run_share_tests(binary: Path, bootstrap: str, replication_factor: int) -> dict[str, str]:
    """Run franz-go's share tests against ``bootstrap``; the outcome (PASS, FAIL, SKIP) of each test run."""
    env = dict(os.environ, KGO_SEEDS=bootstrap, KGO_TEST_RF=str(replication_factor), KGO_TEST_RECORDS=str(RECORDS))
    argv = [str(binary), "-test.run", RUN_PATTERN, "-test.v", "-test.count=1", f"-test.timeout={RUN_TIMEOUT_S}s"]
    try:
        proc = subprocess.run(argv, cwd=binary.parent / "src" / "pkg" / "kgo", env=env, capture_output=True,
                              text=True, timeout=RUN_TIMEOUT_S + 20)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"franz-go's share tests did not end within {RUN_TIMEOUT_S + 20}s:\n{str(e.stdout)[-4000:]}")
    outcomes = {name: verdict for verdict, name in OUTCOME.findall(proc.stdout)}
    problems = {name: outcomes.get(name, "not run") for name in SHARE_TESTS if outcomes.get(name) != "PASS"}
    assert not problems and proc.returncode == 0, \
        f"franz-go share tests: {problems}, exit {proc.returncode}\n{proc.stdout[-6000:]}\n{proc.stderr[-2000:]}"
    return outcomes


def test_franz_share_tests_single_broker(kgo_test_binary: Path, tmp_path: Path) -> None:
    broker = BrokerProcess(tmp_path / "data").start()
    try:
        outcomes = run_share_tests(kgo_test_binary, broker.bootstrap, replication_factor=1)
    finally:
        broker.stop()
    assert set(SHARE_TESTS) <= {name for name, verdict in outcomes.items() if verdict == "PASS"}


def test_franz_share_tests_three_brokers(kgo_test_binary: Path, cluster_factory) -> None:
    """Every broker is a seed; franz-go sends share requests to whichever broker leads or coordinates."""
    cluster = cluster_factory(3, settings=REPLICATED)
    cluster.start()
    cluster.wait_ready()
    outcomes = run_share_tests(kgo_test_binary, cluster.bootstrap, replication_factor=3)
    assert set(SHARE_TESTS) <= {name for name, verdict in outcomes.items() if verdict == "PASS"}
