"""The namespace harness itself (netns.py): a cut separates exactly the two hosts it names, in both directions,
while the root namespace still reaches both; healing restores it; closing leaves nothing behind."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from tests.faults.netns import Host, Network, ip
from tests.interop.helpers import wait_until

PORT = 7070
# accepts connections until killed (run on a host with its command prefix)
LISTENER = ("import socket\ns = socket.create_server(({address!r}, {port}))\n"
            "while True:\n    s.accept()[0].close()\n")
CONNECT = ("import socket, sys\ntry:\n    socket.create_connection(({address!r}, {port}), timeout=1.0).close()\n"
           "except OSError:\n    sys.exit(1)\n")


def reaches(source: Host | None, target: Host) -> bool:
    """Whether a TCP connection from `source` (None: the root namespace) to `target`'s listener succeeds."""
    if source is None:
        try:
            socket.create_connection((target.address, PORT), timeout=1.0).close()
            return True
        except OSError:
            return False
    code = CONNECT.format(address=target.address, port=PORT)
    return subprocess.run([*source.command_prefix, sys.executable, "-c", code], timeout=10).returncode == 0


@pytest.mark.timeout(60)
def test_cuts_separate_exactly_two_hosts_both_ways(network: Network) -> None:
    hosts = [network.add_host(name) for name in ("a", "b", "c")]
    listeners = [subprocess.Popen([*h.command_prefix, sys.executable, "-c",
                                   LISTENER.format(address=h.address, port=PORT)]) for h in hosts]
    try:
        a, b, c = hosts
        wait_until(lambda: all(reaches(None, h) for h in hosts), timeout=15, message="every listener reachable")
        assert reaches(a, b) and reaches(b, a) and reaches(a, c)

        network.cut(a, b)
        assert not reaches(a, b) and not reaches(b, a)
        assert reaches(a, c) and reaches(c, b) and reaches(None, a) and reaches(None, b)

        network.isolate(c)
        assert not reaches(c, a) and not reaches(b, c) and reaches(None, c)

        network.heal_all()
        assert not network.cuts
        assert reaches(a, b) and reaches(b, a) and reaches(c, a) and reaches(b, c)
    finally:
        for listener in listeners:
            listener.kill()
            listener.wait()


@pytest.mark.timeout(60)
def test_close_removes_every_namespace_and_interface(network: Network) -> None:
    other = Network.create()
    try:
        host = other.add_host("x")
        other.add_host("y")
        other.cut(other.hosts["x"], other.hosts["y"])
        sleeper = subprocess.Popen([*host.command_prefix, "sleep", "60"])  # still running at close: killed
        # in the namespace before the close (`ip netns exec` has joined it): otherwise, on a loaded machine,
        # the close could run between ip's open of the namespace and its setns, and the sleep outlive it
        wait_until(lambda: str(sleeper.pid) in ip("netns", "pids", host.namespace, check=False).split(),
                   timeout=10, message="the sleeper in its namespace")
    finally:
        other.close()
    assert sleeper.wait(10) is not None
    assert not [line for line in ip("netns", "list").splitlines() if other.tag in line]
    assert other.bridge not in ip("-o", "link", "show")
