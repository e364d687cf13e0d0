#!/usr/bin/env bash
# `make reference`: installs Apache Kafka, the reference broker of the differential tests (tests/reference),
# with Maven from reference/pom.xml into a cache outside the repository:
#
#   $ODRADEK_REFERENCE_DIR/kafka-<version>/libs/*.jar   kafka_2.13 and its runtime dependencies
#   $ODRADEK_REFERENCE_DIR/kafka-<version>/.installed   stamp: the sha256 of the pom it was installed from
#   $ODRADEK_REFERENCE_DIR/kafka-<version>.failed       marker of the last failed attempt (kind=, reason=)
#
# ODRADEK_REFERENCE_DIR defaults to ~/.cache/odradek/reference. With the stamp in place and the pom unchanged
# it returns at once. A failed install never fails the caller (make test): it prints a warning, leaves no
# stamp and records why in the marker, kind=unreachable when Maven could not reach its repository and
# kind=error otherwise; tests/reference/conftest.py skips on it, and under CI fails unless unreachable.
# ODRADEK_REFERENCE_MVN_ARGS adds Maven options (e.g. -Dmaven.repo.local=DIR).
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
pom="$here/pom.xml"
version=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$pom" | head -n1)
root=${ODRADEK_REFERENCE_DIR:-$HOME/.cache/odradek/reference}
dest="$root/kafka-$version"
stamp="$dest/.installed"
marker="$root/kafka-$version.failed"
mvn_log="$root/kafka-$version.mvn.log"
want=$(sha256sum "$pom" | cut -d' ' -f1)

installed() { [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; }

installed && exit 0

mkdir -p "$root"
exec 9>"$root/.lock"
flock 9  # another `make reference` may be installing the same thing
installed && exit 0

give_up() {  # kind reason
    printf 'kind=%s\nreason=%s\ndate=%s\n' "$1" "$2" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" >"$marker"
    echo "make reference: WARNING: Apache Kafka $version not installed ($1): $2" >&2
    echo "make reference: the differential tests (tests/reference) will skip; details in $marker" >&2
    rm -rf "$tmp"
    exit 0
}

tmp=$(mktemp -d "$root/.kafka-$version.XXXXXX")
command -v java >/dev/null 2>&1 || give_up error "java not found (tools/install-system-deps.sh installs a JDK)"
command -v mvn >/dev/null 2>&1 || give_up error "mvn (Apache Maven) not found"

echo "make reference: installing Apache Kafka $version with Maven into $dest (first run only)"
start=$(date +%s)
# shellcheck disable=SC2086  # ODRADEK_REFERENCE_MVN_ARGS is a list of options
timeout 900 mvn -B -q -Dstyle.color=never -f "$pom" \
    org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies -DincludeScope=runtime \
    -DoutputDirectory="$tmp/libs" ${ODRADEK_REFERENCE_MVN_ARGS:-} >"$mvn_log" 2>&1
rc=$?
if [ $rc -ne 0 ]; then
    last=$(sed 's/\x1b\[[0-9;]*m//g' "$mvn_log" | grep -m1 -E '\[ERROR\] [^ ]' | cut -c1-400)
    [ -n "$last" ] || last=$(tail -n1 "$mvn_log" | cut -c1-400)
    if [ $rc -eq 124 ]; then
        give_up unreachable "mvn timed out after 900 s (log: $mvn_log)"
    elif grep -qE 'UnknownHostException|Unknown host|ConnectException|Connection refused|Connect timed out|Read timed out|Network is unreachable|No route to host|Connection reset|transfer failed|Could not transfer|SocketTimeoutException|Temporary failure in name resolution' "$mvn_log"; then
        give_up unreachable "Maven could not reach its repository: $last"
    else
        give_up error "mvn exited $rc: $last (log: $mvn_log)"
    fi
fi
[ -f "$tmp/libs/kafka_2.13-$version.jar" ] || give_up error "kafka_2.13-$version.jar missing after mvn (log: $mvn_log)"

rm -rf "$dest"
mv "$tmp" "$dest"
echo "$want" >"$stamp"
rm -f "$marker" "$mvn_log"
echo "make reference: Apache Kafka $version: $(ls "$dest/libs" | wc -l) jars, $(du -sh "$dest/libs" | cut -f1)," \
     "in $(( $(date +%s) - start )) s"
