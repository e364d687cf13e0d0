"""JVM packages for a local PySpark (Spark's Kafka connector, Delta Lake), resolved once from Maven Central
into a cache outside any repository and handed to sessions as local jars.

    python -m odradek.spark.packages [kafka|delta ...]   # resolve (`make spark-packages`); prints the jars

Spark's `spark.jars.packages` would resolve a package with Ivy at every JVM start (network each time); here
Maven copies it once and `MavenPackage.spark_conf()` gives `spark.jars` with the cached files, so later starts
are offline. Each package has its own cache root (`$ODRADEK_<NAME>_DIR`, default ~/.cache/odradek/<name>):

    <key>/*.jar       the package's runtime closure less every artifact pyspark already ships (Spark's own
                      copy wins, as Spark's Ivy resolution excludes Spark's modules)
    <key>/.installed  stamp: JSON with the coordinate resolved and, if not the wanted version, why
    <key>.failed      marker of the last failed attempt: kind=unreachable|error, reason=

<key> names what the jars must match (the installed pyspark, and for Delta the installed delta-spark). Where
Maven Central has no release of the wanted version (a pyspark newer than the repository, a Python package
published before its jars), the newest release of the same major version below it is taken instead, and the
stamp says so. `$ODRADEK_<NAME>_VERSION` pins the version. A failed resolution never raises from
`resolve()`: it records the reason, kind=unreachable when the repository could not be reached.
`ODRADEK_SPARK_PACKAGES_MVN_ARGS` adds arguments to every Maven run (a mirror's settings, say).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

MVN_TIMEOUT_S = 600
# Maven's words for a repository it could not talk to (as opposed to an artifact the repository lacks).
UNREACHABLE = re.compile(r"UnknownHostException|Unknown host|ConnectException|Connection refused|Connect timed out|"
                         r"Read timed out|Network is unreachable|No route to host|Connection reset|"
                         r"SocketTimeoutException|Temporary failure in name resolution|transfer failed")
NOT_FOUND = re.compile(r"Could not find artifact|Failure to find")
JAR_NAME = re.compile(r"(.+?)-\d+(?:\.\d+)+[^/]*\.jar$")


@dataclass
class Status:
    """Whether a package is in the cache; if not, why (from the marker of the last failed attempt)."""

    key: str
    installed: bool = False
    jars: list[Path] = field(default_factory=list)
    coordinate: str = ""  # what was resolved, group:artifact:version
    note: str = ""  # set when the version differs from the wanted one, and why
    reason: str = ""
    unreachable: bool = False  # the last attempt could not reach the repository
    attempted: bool = False  # a failed attempt is on record


def pyspark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "jars"


def spark_version() -> str:
    import pyspark

    return pyspark.__version__


def scala_binary_version() -> str:
    """2.13 for every pyspark 4.x, read from the name of the spark-core jar pyspark ships."""
    for jar in pyspark_jars().glob("spark-core_*.jar"):
        m = re.match(r"spark-core_(\d+\.\d+)-", jar.name)
        if m:
            return m.group(1)
    return "2.13"


class _Failed(Exception):
    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(reason)
        self.kind, self.reason = kind, reason


@dataclass(frozen=True)
class MavenPackage:
    """One Maven artifact and its runtime closure, cached per `key()` (what the jars must match)."""

    name: str  # cache directory and environment prefix: spark-kafka -> ODRADEK_SPARK_KAFKA_*
    group: str
    artifact: Callable[[], str]
    wanted_version: Callable[[], str]  # the version that matches the installed Python packages
    key: Callable[[], str]
    make_target: str  # what a user runs to retry
    session_conf: dict[str, str] = field(default_factory=dict)  # more settings a session needs besides the jars

    @property
    def _env(self) -> str:
        return "ODRADEK_" + re.sub(r"\W", "_", self.name).upper()

    def cache_root(self) -> Path:
        return Path(os.environ.get(f"{self._env}_DIR") or Path.home() / ".cache" / "odradek" / self.name)

    def pinned(self) -> str | None:
        return os.environ.get(f"{self._env}_VERSION") or None

    def coordinate(self, version: str | None = None) -> str:
        """The Maven coordinate for the installed pyspark (what spark.jars.packages takes)."""
        return f"{self.group}:{self.artifact()}:{version or self.pinned() or self.wanted_version()}"

    def _dest(self) -> Path:
        return self.cache_root() / self.key()

    def _marker(self) -> Path:
        return self.cache_root() / f"{self.key()}.failed"

    def status(self) -> Status:
        st = Status(self.key())
        stamp = self._dest() / ".installed"
        if stamp.is_file():
            try:
                info = json.loads(stamp.read_text())
            except ValueError:
                info = {}
            pinned = self.pinned()
            jars = sorted(self._dest().glob("*.jar"))
            if jars and (not pinned or info.get("coordinate", "").endswith(":" + pinned)):
                st.installed, st.jars = True, jars
                st.coordinate, st.note = info.get("coordinate", ""), info.get("note", "")
                return st
        marker = self._marker()
        if marker.is_file():
            fields = dict(line.split("=", 1) for line in marker.read_text().splitlines() if "=" in line)
            st.attempted = True
            st.unreachable = fields.get("kind") == "unreachable"
            st.reason = f"{self.coordinate()} not resolved ({fields.get('kind', '?')}): {fields.get('reason', '?')}"
        else:
            st.reason = f"{self.coordinate()} not resolved yet ({self.make_target})"
        return st

    def spark_conf(self, st: Status | None = None) -> dict[str, str]:
        """Session settings that put the cached package on the classpath ({} when it is not installed)."""
        st = st or self.status()
        return {"spark.jars": ",".join(str(j) for j in st.jars), **self.session_conf} if st.installed else {}

    # -- resolution ------------------------------------------------------------------------------

    def _pom(self, version: str) -> str:
        return ('<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
                f"<groupId>odradek</groupId><artifactId>{self.name}</artifactId><version>1</version>"
                "<packaging>pom</packaging><dependencies><dependency>"
                f"<groupId>{self.group}</groupId><artifactId>{self.artifact()}</artifactId><version>{version}</version>"
                "</dependency></dependencies></project>\n")

    def _mvn_copy(self, version: str, work: Path, out: Path) -> None:
        """Copy the runtime closure into `out`; raises _Failed (kind unreachable, missing or error)."""
        pom = work / f"pom-{version}.xml"
        pom.write_text(self._pom(version))
        rc, text = _mvn(["-U", "-f", str(pom), "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies",
                         "-DincludeScope=runtime", f"-DoutputDirectory={out}"], work, version)
        if rc == 0:
            return
        first = next((ln for ln in text.splitlines() if re.match(r"\[ERROR\] \S", ln)), text.strip()[-400:])[:400]
        if NOT_FOUND.search(text) and f"{self.artifact()}:jar:{version}" in text:
            raise _Failed("missing", first)
        if UNREACHABLE.search(text) or "Could not transfer" in text:
            raise _Failed("unreachable", f"Maven could not reach its repository: {first}")
        raise _Failed("error", f"mvn exited {rc}: {first}")

    def _copy_newest_below(self, version: str, work: Path, out: Path) -> str:
        """Copy the newest X.Y.Z release with `version`'s major version, not above `version`, into `out`; the
        version taken. Maven fetches the artifact's version list (the repository's maven-metadata, kept in the
        local repository) while it resolves LATEST, and the list is read from there."""
        rc, text = _mvn(["-U", "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:get",
                         f"-Dartifact={self.group}:{self.artifact()}:LATEST", "-Dtransitive=false"], work, "latest")
        if rc != 0:
            raise _Failed("unreachable" if UNREACHABLE.search(text) else "error", f"mvn could not list versions: "
                          f"{text.strip()[-300:]}")
        rc, repo = _mvn(["help:evaluate", "-Dexpression=settings.localRepository", "-DforceStdout"], work, "repo")
        listed = set()
        for meta in (Path(repo.strip()) / self.group.replace(".", "/") / self.artifact()).glob("maven-metadata-*.xml"):
            listed |= set(re.findall(r"<version>(\d+\.\d+\.\d+)</version>", meta.read_text(errors="replace")))
        want = tuple(int(x) for x in re.findall(r"\d+", version)[:3])
        fits = [v for v in (tuple(int(x) for x in v.split(".")) for v in listed) if v[0] == want[0] and v < want]
        if not fits:
            raise _Failed("error", f"no {version.split('.')[0]}.x release of {self.artifact()} below {version} listed")
        best = ".".join(map(str, max(fits)))
        self._mvn_copy(best, work, out)
        return best

    def resolve(self, quiet: bool = False) -> Status:
        """Resolve the package into the cache unless it is there; never raises for a failed resolution."""
        st = self.status()
        if st.installed:
            return st
        root = self.cache_root()
        root.mkdir(parents=True, exist_ok=True)
        say = (lambda _msg: None) if quiet else (lambda msg: print(f"{self.make_target}: {msg}", file=sys.stderr))
        with open(root / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be resolving the same thing
            st = self.status()
            if st.installed:
                return st
            began = time.monotonic()
            work = Path(tempfile.mkdtemp(prefix=f".{self.key()}.", dir=root))
            try:
                if shutil.which("mvn") is None:
                    raise _Failed("error", "mvn (Apache Maven) not found (tools/install-system-deps.sh installs it)")
                pinned = self.pinned()
                version, note = pinned or self.wanted_version(), ""
                say(f"resolving {self.coordinate(version)} with Maven into {self._dest()} (first run only)")
                try:
                    self._mvn_copy(version, work, work / "all")
                except _Failed as exc:
                    if exc.kind != "missing" or pinned:
                        raise
                    shutil.rmtree(work / "all", ignore_errors=True)
                    try:
                        below = self._copy_newest_below(version, work, work / "all")
                    except _Failed as again:
                        if again.kind == "unreachable":
                            raise
                        raise _Failed("error", f"Maven Central has no {self.coordinate(version)} and no earlier "
                                               f"{version.split('.')[0]}.x release: {exc.reason}") from None
                    note = f"Maven Central has no {self.coordinate(version)}; took {below}, its newest release before it"
                    say(note)
                    version = below
                shipped = {m.group(1) for j in pyspark_jars().glob("*.jar") if (m := JAR_NAME.match(j.name))}
                keep = work / "jars"
                keep.mkdir()
                for jar in sorted((work / "all").glob("*.jar")):
                    m = JAR_NAME.match(jar.name)
                    if m is None or m.group(1) not in shipped:
                        shutil.move(str(jar), keep / jar.name)
                if not any(j.name.startswith(self.artifact()) for j in keep.glob("*.jar")):
                    raise _Failed("error", f"{self.artifact()} jar missing after mvn")
                (keep / ".installed").write_text(json.dumps({"coordinate": self.coordinate(version), "note": note}) + "\n")
                shutil.rmtree(self._dest(), ignore_errors=True)
                keep.rename(self._dest())
                self._marker().unlink(missing_ok=True)
                st = self.status()
                say(f"{st.coordinate}: {len(st.jars)} jars in {time.monotonic() - began:.0f} s")
                return st
            except _Failed as exc:
                kind = "unreachable" if exc.kind == "unreachable" else "error"
                self._marker().write_text(f"kind={kind}\nreason={exc.reason}\n"
                                          f"date={time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n")
                say(f"WARNING: {self.coordinate()} not resolved ({kind}): {exc.reason}")
                return self.status()
            finally:
                shutil.rmtree(work, ignore_errors=True)


def _mvn(args: list[str], work: Path, name: str) -> tuple[int, str]:
    """Run Maven (ODRADEK_SPARK_PACKAGES_MVN_ARGS added) in `work`; its exit code and output."""
    log = work / f"mvn-{name}.log"
    extra = os.environ.get("ODRADEK_SPARK_PACKAGES_MVN_ARGS", "").split()
    cmd = ["mvn", "-B", "-q", "-Dstyle.color=never", *args, *extra]
    try:
        with open(log, "w") as f:
            rc = subprocess.run(cmd, cwd=work, stdout=f, stderr=subprocess.STDOUT, timeout=MVN_TIMEOUT_S).returncode
    except subprocess.TimeoutExpired:
        raise _Failed("unreachable", f"mvn timed out after {MVN_TIMEOUT_S} s") from None
    return rc, re.sub(r"\x1b\[[0-9;]*m", "", log.read_text(errors="replace"))


def _spark_minor() -> str:
    return ".".join(spark_version().split(".")[:2])


def delta_version() -> str:
    """The installed delta-spark (Python package), whose jars must match it; raises RuntimeError without it."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("delta-spark")
    except PackageNotFoundError:
        raise RuntimeError("Delta Lake is not installed: pip install 'odradek[delta]'") from None


# Spark's own Kafka connector (format("kafka")): published with each Spark release under the same version.
KAFKA = MavenPackage(
    name="spark-kafka", group="org.apache.spark",
    artifact=lambda: f"spark-sql-kafka-0-10_{scala_binary_version()}",
    wanted_version=spark_version, key=spark_version, make_target="make spark-packages")

# Delta Lake for Spark: one artifact per Spark minor version (delta-spark_4.2_2.13), versioned as the
# delta-spark Python package, whose requirement on pyspark says which Spark releases it is built for.
DELTA = MavenPackage(
    name="delta", group="io.delta",
    artifact=lambda: f"delta-spark_{_spark_minor()}_{scala_binary_version()}",
    wanted_version=delta_version, key=lambda: f"{spark_version()}-{delta_version()}",
    make_target="make spark-packages",
    session_conf={"spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
                  "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog"})

PACKAGES = {"kafka": KAFKA, "delta": DELTA}


def combined_conf(*confs: dict[str, str]) -> dict[str, str]:
    """Several packages' `spark_conf()` as one: their `spark.jars` joined, the other settings merged."""
    out: dict[str, str] = {}
    for conf in confs:
        for key, value in conf.items():
            out[key] = f"{out[key]},{value}" if key == "spark.jars" and out.get(key) else value
    return out


def main(argv: list[str] | None = None) -> int:
    names = (argv if argv is not None else sys.argv[1:]) or list(PACKAGES)
    for name in names:
        if name not in PACKAGES:
            print(f"unknown package {name!r}: one of {', '.join(PACKAGES)}", file=sys.stderr)
            return 2
        try:
            st = PACKAGES[name].resolve()
        except RuntimeError as exc:  # the Python side of the package is not installed
            print(f"{PACKAGES[name].make_target}: {name}: {exc}", file=sys.stderr)
            continue
        for jar in st.jars:
            print(jar)
    return 0  # a failed resolution warns and lets the caller (make install / make test) go on


if __name__ == "__main__":
    sys.exit(main())
