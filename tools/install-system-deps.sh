#!/usr/bin/env bash
# Installs the Debian packages the tests drive: kcat, a JDK (javac) for the Java client harness, ZooKeeper
# (its jars in /usr/share/java) for cluster mode and the cluster tests, iproute2 (`ip`), with which the
# fault tests make network namespaces, and chromium, the headless browser of the console tests.
set -euo pipefail
missing=()
command -v kcat >/dev/null 2>&1 || missing+=(kcat)
command -v mvn >/dev/null 2>&1 || missing+=(maven)  # make reference: Apache Kafka from Maven Central
command -v javac >/dev/null 2>&1 || missing+=(default-jdk-headless)
[ -f /usr/share/java/zookeeper.jar ] || missing+=(zookeeper)
command -v ip >/dev/null 2>&1 || missing+=(iproute2)
[ -x /usr/bin/chromium ] || missing+=(chromium)  # the web console's browser tests (tests/console)
[ ${#missing[@]} -eq 0 ] && exit 0
sudo=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
        echo "install-system-deps: need root to install: ${missing[*]}" >&2; exit 1
    fi
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
