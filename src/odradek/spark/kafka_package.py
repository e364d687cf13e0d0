"""Spark's own Kafka connector (`format("kafka")`, the spark-sql-kafka-0-10 package) for a local PySpark,
resolved once from Maven Central into a cache outside any repository and handed to sessions as local jars.

    python -m odradek.spark.kafka_package      # resolve (`make spark-kafka`); prints the jars or why not

Spark's `spark.jars.packages` would resolve the package with Ivy at every JVM start (network each time);
here Maven copies it once and `spark_conf()` gives `spark.jars` with the cached files, so later starts are
offline. The cache, `$ODRADEK_SPARK_KAFKA_DIR` (default ~/.cache/odradek/spark-kafka):

    <version>/*.jar       the connector, its token provider, kafka-clients and commons-pool2: the package's
                          runtime closure less every artifact pyspark already ships (Spark's own copy wins,
                          as Spark's Ivy resolution excludes Spark's modules)
    <version>/.installed  stamp: JSON with the coordinate resolved and, if not the installed pyspark's, why
    <version>.failed      marker of the last failed attempt: kind=unreachable|error, reason=

<version> is the installed pyspark's. The package is published with each Spark release under the same
version; where Maven Central has no package of that version (a pyspark newer than the repository, as on a
mirror that lags), the newest release of the same major version below it is taken instead, and the stamp
says so. `ODRADEK_SPARK_KAFKA_VERSION` pins the package version. A failed resolution never raises from
`resolve()`: it records the reason, kind=unreachable when the repository could not be reached.
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

GROUP = "org.apache.spark"
MVN_TIMEOUT_S = 600
# Maven's words for a repository it could not talk to (as opposed to an artifact the repository lacks).
UNREACHABLE = re.compile(r"UnknownHostException|Unknown host|ConnectException|Connection refused|Connect timed out|"
                         r"Read timed out|Network is unreachable|No route to host|Connection reset|"
                         r"SocketTimeoutException|Temporary failure in name resolution|transfer failed")
NOT_FOUND = re.compile(r"Could not find artifact|Failure to find")
JAR_NAME = re.compile(r"(.+?)-\d+(?:\.\d+)+[^/]*\.jar$")


@dataclass
class Status:
    """Whether the connector is in the cache; if not, why (from the marker of the last failed attempt)."""

    spark_version: str
    installed: bool = False
    jars: list[Path] = field(default_factory=list)
    coordinate: str = ""  # what was resolved, group:artifact:version
    note: str = ""  # set when the package version differs from the installed pyspark's, and why
    reason: str = ""
    unreachable: bool = False  # the last attempt could not reach the repository
    attempted: bool = False  # a failed attempt is on record


def cache_root() -> Path:
    return Path(os.environ.get("ODRADEK_SPARK_KAFKA_DIR") or Path.home() / ".cache" / "odradek" / "spark-kafka")


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


def artifact_id() -> str:
    return f"spark-sql-kafka-0-10_{scala_binary_version()}"


def coordinate(version: str | None = None) -> str:
    """The Maven coordinate of the package for the installed pyspark (what spark.jars.packages takes)."""
    return f"{GROUP}:{artifact_id()}:{version or os.environ.get('ODRADEK_SPARK_KAFKA_VERSION') or spark_version()}"


def _dest() -> Path:
    return cache_root() / spark_version()


def _marker() -> Path:
    return cache_root() / f"{spark_version()}.failed"


def status() -> Status:
    st = Status(spark_version())
    stamp = _dest() / ".installed"
    if stamp.is_file():
        try:
            info = json.loads(stamp.read_text())
        except ValueError:
            info = {}
        pinned = os.environ.get("ODRADEK_SPARK_KAFKA_VERSION")
        jars = sorted(_dest().glob("*.jar"))
        if jars and (not pinned or info.get("coordinate", "").endswith(":" + pinned)):
            st.installed, st.jars = True, jars
            st.coordinate, st.note = info.get("coordinate", ""), info.get("note", "")
            return st
    marker = _marker()
    if marker.is_file():
        fields = dict(line.split("=", 1) for line in marker.read_text().splitlines() if "=" in line)
        st.attempted = True
        st.unreachable = fields.get("kind") == "unreachable"
        st.reason = f"{coordinate()} not resolved ({fields.get('kind', '?')}): {fields.get('reason', '?')}"
    else:
        st.reason = f"{coordinate()} not resolved yet (make spark-kafka)"
    return st


def spark_conf(st: Status | None = None) -> dict[str, str]:
    """Session settings that put the cached connector on the classpath ({} when it is not installed)."""
    st = st or status()
    return {"spark.jars": ",".join(str(j) for j in st.jars)} if st.installed else {}


class _Failed(Exception):
    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(reason)
        self.kind, self.reason = kind, reason


def _pom(version: str) -> str:
    return ('<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
            "<groupId>odradek</groupId><artifactId>spark-kafka</artifactId><version>1</version>"
            "<packaging>pom</packaging><dependencies><dependency>"
            f"<groupId>{GROUP}</groupId><artifactId>{artifact_id()}</artifactId><version>{version}</version>"
            "</dependency></dependencies></project>\n")


def _mvn_copy(version: str, work: Path, out: Path) -> None:
    """Copy the package's runtime closure into `out`; raises _Failed (kind unreachable, missing or error)."""
    pom = work / f"pom-{version}.xml"
    pom.write_text(_pom(version))
    rc, text = _mvn(["-U", "-f", str(pom), "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies",
                     "-DincludeScope=runtime", f"-DoutputDirectory={out}"], work, version)
    if rc == 0:
        return
    first = next((ln for ln in text.splitlines() if re.match(r"\[ERROR\] \S", ln)), text.strip()[-400:])[:400]
    if NOT_FOUND.search(text) and f"{artifact_id()}:jar:{version}" in text:
        raise _Failed("missing", first)
    if UNREACHABLE.search(text) or "Could not transfer" in text:
        raise _Failed("unreachable", f"Maven could not reach its repository: {first}")
    raise _Failed("error", f"mvn exited {rc}: {first}")


def _mvn(args: list[str], work: Path, name: str) -> tuple[int, str]:
    """Run Maven (ODRADEK_SPARK_KAFKA_MVN_ARGS added) in `work`; its exit code and output."""
    log = work / f"mvn-{name}.log"
    cmd = ["mvn", "-B", "-q", "-Dstyle.color=never", *args, *os.environ.get("ODRADEK_SPARK_KAFKA_MVN_ARGS", "").split()]
    try:
        with open(log, "w") as f:
            rc = subprocess.run(cmd, cwd=work, stdout=f, stderr=subprocess.STDOUT, timeout=MVN_TIMEOUT_S).returncode
    except subprocess.TimeoutExpired:
        raise _Failed("unreachable", f"mvn timed out after {MVN_TIMEOUT_S} s") from None
    return rc, re.sub(r"\x1b\[[0-9;]*m", "", log.read_text(errors="replace"))


def _copy_newest_below(version: str, work: Path, out: Path) -> str:
    """Copy the newest X.Y.Z release of the package with `version`'s major version, not above `version`, into
    `out`; the version taken. Maven fetches the package's version list (the repository's maven-metadata,
    kept in the local repository) while it resolves LATEST, and the list is read from there."""
    rc, text = _mvn(["-U", "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:get",
                     f"-Dartifact={GROUP}:{artifact_id()}:LATEST", "-Dtransitive=false"], work, "latest")
    if rc != 0:
        raise _Failed("unreachable" if UNREACHABLE.search(text) else "error", f"mvn could not list versions: "
                      f"{text.strip()[-300:]}")
    rc, repo = _mvn(["help:evaluate", "-Dexpression=settings.localRepository", "-DforceStdout"], work, "repo")
    listed = set()
    for meta in (Path(repo.strip()) / GROUP.replace(".", "/") / artifact_id()).glob("maven-metadata-*.xml"):
        listed |= set(re.findall(r"<version>(\d+\.\d+\.\d+)</version>", meta.read_text(errors="replace")))
    want = tuple(int(x) for x in re.findall(r"\d+", version)[:3])
    fits = [v for v in (tuple(int(x) for x in v.split(".")) for v in listed) if v[0] == want[0] and v < want]
    if not fits:
        raise _Failed("error", f"no {version.split('.')[0]}.x release of {artifact_id()} below {version} listed")
    best = ".".join(map(str, max(fits)))
    _mvn_copy(best, work, out)
    return best


def resolve(quiet: bool = False) -> Status:
    """Resolve the connector into the cache unless it is there; never raises for a failed resolution."""
    st = status()
    if st.installed:
        return st
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be resolving the same thing
        st = status()
        if st.installed:
            return st
        began = time.monotonic()
        work = Path(tempfile.mkdtemp(prefix=f".{spark_version()}.", dir=root))
        try:
            if shutil.which("mvn") is None:
                raise _Failed("error", "mvn (Apache Maven) not found (tools/install-system-deps.sh installs it)")
            pinned = os.environ.get("ODRADEK_SPARK_KAFKA_VERSION")
            version, note = pinned or spark_version(), ""
            if not quiet:
                print(f"make spark-kafka: resolving {coordinate(version)} with Maven into {_dest()} (first run only)",
                      file=sys.stderr)
            try:
                _mvn_copy(version, work, work / "all")
            except _Failed as exc:
                if exc.kind != "missing" or pinned:
                    raise
                shutil.rmtree(work / "all", ignore_errors=True)
                try:
                    below = _copy_newest_below(version, work, work / "all")
                except _Failed as again:
                    if again.kind == "unreachable":
                        raise
                    raise _Failed("error", f"Maven Central has no {coordinate(version)} and no earlier "
                                           f"{version.split('.')[0]}.x release: {exc.reason}") from None
                note = (f"Maven Central has no {coordinate(version)}; took {below}, its newest release "
                        f"before pyspark {version}")
                if not quiet:
                    print(f"make spark-kafka: {note}", file=sys.stderr)
                version = below
            shipped = {m.group(1) for j in pyspark_jars().glob("*.jar") if (m := JAR_NAME.match(j.name))}
            keep = work / "jars"
            keep.mkdir()
            for jar in sorted((work / "all").glob("*.jar")):
                m = JAR_NAME.match(jar.name)
                if m is None or m.group(1) not in shipped:
                    shutil.move(str(jar), keep / jar.name)
            if not any(j.name.startswith(artifact_id()) for j in keep.glob("*.jar")):
                raise _Failed("error", f"{artifact_id()} jar missing after mvn")
            (keep / ".installed").write_text(json.dumps({"coordinate": coordinate(version), "note": note}) + "\n")
            shutil.rmtree(_dest(), ignore_errors=True)
            keep.rename(_dest())
            _marker().unlink(missing_ok=True)
            st = status()
            if not quiet:
                print(f"make spark-kafka: {st.coordinate}: {len(st.jars)} jars in "
                      f"{time.monotonic() - began:.0f} s", file=sys.stderr)
            return st
        except _Failed as exc:
            kind = "unreachable" if exc.kind == "unreachable" else "error"
            _marker().write_text(f"kind={kind}\nreason={exc.reason}\n"
                                 f"date={time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n")
            if not quiet:
                print(f"make spark-kafka: WARNING: {coordinate()} not resolved ({kind}): {exc.reason}\n"
                      "make spark-kafka: the tests of Spark's own Kafka connector will skip", file=sys.stderr)
            return status()
        finally:
            shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    st = resolve()
    if st.installed:
        for jar in st.jars:
            print(jar)
    return 0  # a failed resolution warns and lets the caller (make install / make test) go on


if __name__ == "__main__":
    sys.exit(main())
