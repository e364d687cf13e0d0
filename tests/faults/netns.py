"""Network namespaces as hosts: each broker and the ZooKeeper server on a machine of its own, so that a test can
cut the network between two of them while everything else (and the test itself) still reaches both.

Layout, per test (names carry a random tag, so runs never collide; the bridge name stays under Linux's 15
characters)::

    root namespace (pytest, its clients)
      bridge odk<tag>          10.A.B.1/24      <- the test's clients reach every host through it
        |-- veth odk<tag>h1 === eth in namespace odk-<pid>-<tag>-zk   10.A.B.11/24
        |-- veth odk<tag>h2 === eth in namespace odk-<pid>-<tag>-b1   10.A.B.12/24
        `-- ...

A and B are random, picked so that 10.A.B.0/24 overlaps no address or route the machine has; every
interface and namespace is made here and removed by `Network.close()` (the fixture calls it also when the
test fails). A crashed run's leftovers are removed at the next start: namespaces carry their owner's pid in
their name, the bridge and veths in their interface alias, and those whose owner is gone are deleted (the
processes still running in such a namespace, started by that run, are killed first).

Processes run on a host with `Host.command_prefix` (`ip netns exec NS ...`; `ip` execs the command, so the
pid is the process's own and signals reach it directly) and listen on `Host.address`.

Cuts are routes, not firewall rules (iptables and nft are not needed): cutting host X from host Y adds
`blackhole Y/32` in X's namespace and `blackhole X/32` in Y's, so nothing passes between them in either
direction (X's own sends to Y fail at once with EINVAL, Y's packets die in Y), while both still reach, and
are reached from, every other host and the root namespace: a leader cut from ZooKeeper and from the other
brokers keeps talking to the test's producers, which is the split a real partition can make. Established
TCP connections are not reset: their packets are dropped until the cut heals and TCP retransmits.
"""

from __future__ import annotations

import ipaddress
import os
import random
import re
import secrets
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from typing import Iterable

from odradek.tools.zookeeper import ZooKeeperServer
from tests.cluster.conftest import Cluster

PREFIX = "odk"
ALIAS = "odradek-netns owner pid "
IP_TIMEOUT_S = 10.0
_NAMESPACE = re.compile(rf"^{PREFIX}-(\d+)-[0-9a-f]+-[\w.-]+$")


class NetnsError(RuntimeError):
    """An `ip` command failed (the message has its output)."""


def ip(*args: str, check: bool = True) -> str:
    """Run `ip ARGS`; its stdout. NetnsError when it fails and `check` is set."""
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=IP_TIMEOUT_S)
    if check and done.returncode != 0:
        raise NetnsError(f"ip {' '.join(args)}: exit {done.returncode}: {done.stderr.strip()}")
    return done.stdout


def netns_unavailable() -> str | None:
    """Why namespaces cannot be made here (not root, no iproute2, no kernel support), or None if they can:
    a probe namespace is created and removed."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "iproute2's `ip` is not installed"
    probe = f"{PREFIX}-{os.getpid()}-{secrets.token_hex(3)}-probe"
    try:
        ip("netns", "add", probe)
    except (NetnsError, OSError, subprocess.TimeoutExpired) as exc:
        return f"cannot create a network namespace: {exc}"
    ip("netns", "del", probe, check=False)
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _kill_namespace_processes(namespace: str) -> None:
    """SIGKILL what still runs in one of our namespaces (processes a test started there)."""
    for word in ip("netns", "pids", namespace, check=False).split():
        try:
            os.kill(int(word), signal.SIGKILL)
        except (ValueError, ProcessLookupError):
            pass


def remove_leftovers() -> list[str]:
    """Delete the namespaces, bridges and veths of earlier runs whose owner process is gone; their names."""
    removed = []
    for line in ip("netns", "list", check=False).splitlines():
        name = line.split()[0] if line.split() else ""
        match = _NAMESPACE.match(name)
        if match and not _alive(int(match.group(1))):
            _kill_namespace_processes(name)
            ip("netns", "del", name, check=False)
            removed.append(name)
    # `ip -o link` prints each interface on one line, its alias (if any) after "alias"
    for line in ip("-o", "link", "show", check=False).splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        name = parts[1].rstrip(":").split("@")[0]
        alias = re.search(rf"alias {re.escape(ALIAS)}(\d+)", line)
        if name.startswith(PREFIX) and alias and not _alive(int(alias.group(1))):
            ip("link", "del", name, check=False)
            removed.append(name)
    return removed


def _used_networks() -> list[ipaddress.IPv4Network]:
    nets = []
    for line in ip("-4", "-o", "addr", "show", check=False).splitlines():
        found = re.search(r"inet (\d+\.\d+\.\d+\.\d+/\d+)", line)
        if found:
            nets.append(ipaddress.ip_interface(found.group(1)).network)
    for line in ip("-4", "route", "show", "table", "all", check=False).splitlines():
        words = line.split()
        for word in words[:2]:
            try:
                nets.append(ipaddress.ip_network(word, strict=False))
                break
            except ValueError:
                continue
    return [n for n in nets if n.prefixlen > 0]  # a default route overlaps everything and matters not


def free_subnet(rng: random.Random | None = None, attempts: int = 200) -> ipaddress.IPv4Network:
    """A random 10.A.B.0/24 that overlaps no address or route of the machine."""
    rng = rng or random.Random()
    used = _used_networks()
    for _ in range(attempts):
        candidate = ipaddress.ip_network(f"10.{rng.randint(16, 254)}.{rng.randint(0, 255)}.0/24")
        if not any(candidate.overlaps(n) for n in used):
            return candidate
    raise NetnsError("no free 10.x.y.0/24 found")


@dataclass(frozen=True)
class Host:
    """One namespace on the bridge: a machine of its own for one process."""

    name: str
    namespace: str
    address: str

    @property
    def command_prefix(self) -> tuple[str, ...]:
        """Prepended to a command to run it on this host."""
        return ("ip", "netns", "exec", self.namespace)

    def run(self, *command: str) -> str:
        """Run a short command on this host (e.g. `ip route`); its stdout."""
        done = subprocess.run([*self.command_prefix, *command], capture_output=True, text=True,
                              timeout=IP_TIMEOUT_S)
        if done.returncode != 0:
            raise NetnsError(f"{self.name}: {' '.join(command)}: {done.stderr.strip()}")
        return done.stdout


@dataclass
class Network:
    """A bridge and hosts on it, with cuts between hosts. Build with `Network.create()`; `close()` removes
    everything. Not thread-safe: the test's thread owns it."""

    tag: str
    subnet: ipaddress.IPv4Network
    hosts: dict[str, Host] = field(default_factory=dict)
    cuts: set[frozenset[str]] = field(default_factory=set)
    _veths: list[str] = field(default_factory=list)
    _closed: bool = False

    @property
    def bridge(self) -> str:
        return f"{PREFIX}{self.tag}"

    @property
    def gateway(self) -> str:
        """The root namespace's address on the bridge: where the test's own connections come from."""
        return str(self.subnet.network_address + 1)

    @classmethod
    def create(cls) -> "Network":
        """Remove dead runs' leftovers, then make the bridge (up, with the gateway address)."""
        remove_leftovers()
        net = cls(secrets.token_hex(3), free_subnet())
        try:
            ip("link", "add", net.bridge, "type", "bridge")
            ip("link", "set", net.bridge, "alias", f"{ALIAS}{os.getpid()}")
            ip("addr", "add", f"{net.gateway}/{net.subnet.prefixlen}", "dev", net.bridge)
            ip("link", "set", net.bridge, "up")
        except BaseException:
            net.close()
            raise
        return net

    def add_host(self, name: str) -> Host:
        """A new namespace with a veth into the bridge, loopback up, at the next address (.11, .12, ...)."""
        index = len(self.hosts) + 1
        host = Host(name, f"{PREFIX}-{os.getpid()}-{self.tag}-{name}", str(self.subnet.network_address + 10 + index))
        outside, inside = f"{self.bridge}h{index}", f"{self.bridge}n{index}"
        ip("netns", "add", host.namespace)
        self.hosts[name] = host
        ip("link", "add", outside, "type", "veth", "peer", "name", inside)
        self._veths.append(outside)
        ip("link", "set", outside, "alias", f"{ALIAS}{os.getpid()}")
        ip("link", "set", outside, "master", self.bridge, "up")
        ip("link", "set", inside, "netns", host.namespace)
        ns = ("-n", host.namespace)
        ip(*ns, "addr", "add", f"{host.address}/{self.subnet.prefixlen}", "dev", inside)
        ip(*ns, "link", "set", inside, "up")
        ip(*ns, "link", "set", "lo", "up")
        return host

    # -- cuts -------------------------------------------------------------------------------------------

    def cut(self, a: Host, b: Host) -> None:
        """Nothing passes between `a` and `b` (both directions) until healed; idempotent."""
        key = frozenset((a.name, b.name))
        if a == b or key in self.cuts:
            return
        ip("-n", a.namespace, "route", "add", "blackhole", f"{b.address}/32")
        ip("-n", b.namespace, "route", "add", "blackhole", f"{a.address}/32")
        self.cuts.add(key)

    def heal(self, a: Host, b: Host) -> None:
        key = frozenset((a.name, b.name))
        if key not in self.cuts:
            return
        ip("-n", a.namespace, "route", "del", "blackhole", f"{b.address}/32", check=False)
        ip("-n", b.namespace, "route", "del", "blackhole", f"{a.address}/32", check=False)
        self.cuts.discard(key)

    def isolate(self, host: Host, others: Iterable[Host] | None = None) -> None:
        """Cut `host` from `others` (default: every other host); the root namespace still reaches it."""
        for other in (self.hosts.values() if others is None else others):
            if other != host:
                self.cut(host, other)

    def heal_all(self) -> None:
        for key in list(self.cuts):
            a, b = (self.hosts[name] for name in sorted(key))
            self.heal(a, b)

    def is_cut(self, a: Host, b: Host) -> bool:
        return frozenset((a.name, b.name)) in self.cuts

    # -- teardown ---------------------------------------------------------------------------------------

    def close(self) -> None:
        """Remove every namespace (killing what still runs there), veth and the bridge; idempotent."""
        if self._closed:
            return
        self._closed = True
        for host in self.hosts.values():
            _kill_namespace_processes(host.namespace)
        deadline = time.monotonic() + 5.0
        for host in self.hosts.values():
            while ip("netns", "pids", host.namespace, check=False).strip() and time.monotonic() < deadline:
                time.sleep(0.05)
            ip("netns", "del", host.namespace, check=False)
        for veth in self._veths:  # gone with their peers' namespaces, unless a process held one open
            ip("link", "del", veth, check=False)
        ip("link", "del", self.bridge, check=False)


@dataclass
class NetnsCluster:
    """A cluster (tests/cluster/conftest.py's `Cluster`) whose ZooKeeper and brokers each run on a host of
    their own on `network`: `host(1)` is broker 1's, `host("zk")` ZooKeeper's."""

    cluster: Cluster
    network: Network
    zookeeper: ZooKeeperServer
    hosts: dict[int | str, Host]

    def host(self, node: int | str) -> Host:
        return self.hosts[node]

    def isolate(self, node: int | str, others: Iterable[int | str] | None = None) -> None:
        """Cut `node` from `others` (broker ids or "zk"; default: every other broker and ZooKeeper)."""
        names = [n for n in self.hosts if n != node] if others is None else list(others)
        self.network.isolate(self.hosts[node], [self.hosts[n] for n in names])

    def heal_all(self) -> None:
        self.network.heal_all()
