"""ZooKeeperServer against the real server: znodes through kazoo, sessions, restarts, stops, failures."""

from __future__ import annotations

import socket
import struct
import subprocess
import sys
import time
from contextlib import contextmanager
from typing import Iterator

import pytest

from odradek.tools.zookeeper import (CLASSPATH_ENV, ZooKeeperError, ZooKeeperServer, four_letter_word,
                                     zookeeper_unavailable)
from tests.interop.helpers import recv_exact, wait_until

kazoo_client = pytest.importorskip("kazoo.client")
from kazoo.exceptions import BadVersionError, NodeExistsError  # noqa: E402
from kazoo.protocol.states import KazooState  # noqa: E402


@contextmanager
def kazoo(zk: ZooKeeperServer, session_timeout: float = 10.0) -> Iterator["kazoo_client.KazooClient"]:
    client = kazoo_client.KazooClient(hosts=zk.connect_string, timeout=session_timeout)
    client.start(timeout=10)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def negotiated_session_timeout(zk: ZooKeeperServer, requested_ms: int) -> int:
    """Open a session by hand and return the timeout the server grants (ConnectRequest/ConnectResponse:
    protocolVersion, lastZxidSeen, timeOut, sessionId, passwd / protocolVersion, timeOut, ...)."""
    request = struct.pack(">iqiqi", 0, 0, requested_ms, 0, 16) + bytes(16) + b"\x00"
    with socket.create_connection((zk.host, zk.port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(request)) + request)
        (size,) = struct.unpack(">i", recv_exact(sock, 4))
        _protocol, timeout_ms = struct.unpack_from(">ii", recv_exact(sock, size))
    return timeout_ms


def test_start_serves_znodes_with_conditional_writes(zookeeper: ZooKeeperServer):
    assert zookeeper.is_running()
    assert zookeeper.connect_string == f"127.0.0.1:{zookeeper.port}" and zookeeper.port > 0
    assert four_letter_word(zookeeper.host, zookeeper.port, "ruok") == "imok"
    assert "Mode: standalone" in four_letter_word(zookeeper.host, zookeeper.port, "srvr")
    with kazoo(zookeeper) as zk:
        zk.ensure_path("/odradek/brokers/ids")
        zk.create("/odradek/controller", b'{"brokerid":1}')
        with pytest.raises(NodeExistsError):
            zk.create("/odradek/controller", b'{"brokerid":2}')
        data, stat = zk.get("/odradek/controller")
        assert data == b'{"brokerid":1}' and stat.version == 0
        zk.set("/odradek/controller", b'{"brokerid":3}', version=stat.version)
        with pytest.raises(BadVersionError):  # a write on a stale version loses
            zk.set("/odradek/controller", b'{"brokerid":4}', version=stat.version)
        assert zk.get("/odradek/controller")[0] == b'{"brokerid":3}'
        assert sorted(zk.get_children("/odradek")) == ["brokers", "controller"]


def test_session_timeouts_from_1_to_30_seconds_are_granted(zookeeper: ZooKeeperServer):
    assert negotiated_session_timeout(zookeeper, 1000) == 1000
    assert negotiated_session_timeout(zookeeper, 6000) == 6000
    assert negotiated_session_timeout(zookeeper, 30000) == 30000
    assert negotiated_session_timeout(zookeeper, 200) == 1000  # clamped to minSessionTimeout
    assert negotiated_session_timeout(zookeeper, 60000) == 30000  # and to maxSessionTimeout


def test_ephemeral_node_goes_when_its_session_closes(zookeeper: ZooKeeperServer):
    with kazoo(zookeeper) as watcher:
        with kazoo(zookeeper) as owner:
            owner.create("/ids/1", b"broker 1", ephemeral=True, makepath=True)
            assert watcher.exists("/ids/1") is not None
        wait_until(lambda: watcher.exists("/ids/1") is None, timeout=5, message="the ephemeral node to go")
        assert watcher.exists("/ids") is not None  # its persistent parent stays


KILLED_OWNER = """
import sys, time
from kazoo.client import KazooClient
zk = KazooClient(hosts=sys.argv[1], timeout=2.0)
zk.start(timeout=10)
zk.create("/ids/7", b"", ephemeral=True, makepath=True)
print("registered", flush=True)
time.sleep(60)
"""


def test_ephemeral_node_of_a_killed_client_goes_after_its_session_timeout(zookeeper: ZooKeeperServer):
    owner = subprocess.Popen([sys.executable, "-c", KILLED_OWNER, zookeeper.connect_string],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert owner.stdout is not None and owner.stdout.readline().strip() == "registered"
        owner.kill()
        owner.wait(10)
        killed_at = time.monotonic()
        with kazoo(zookeeper) as watcher:
            assert watcher.exists("/ids/7") is not None  # the session outlives its connection...
            wait_until(lambda: watcher.exists("/ids/7") is None, timeout=10, message="the session to expire")
        assert time.monotonic() - killed_at >= 1.0  # ...until its 2 s timeout (checked once a 0.5 s tick)
    finally:
        owner.kill()
        owner.wait(10)


def test_restart_keeps_port_data_and_sessions(zookeeper: ZooKeeperServer):
    port = zookeeper.port
    with kazoo(zookeeper) as zk:
        zk.create("/topics/t1", b'{"partitions":{"0":[1,2]}}', makepath=True)
        session_id = zk.client_id[0]
        zookeeper.restart()
        assert zookeeper.port == port and zookeeper.is_running()
        # the client reconnects to the same address and its session survives a quick server restart
        wait_until(lambda: zk.state == KazooState.CONNECTED and zk.exists("/topics/t1") is not None,
                   timeout=15, message="the client to reconnect")
        assert zk.client_id[0] == session_id
    with kazoo(zookeeper) as zk:
        assert zk.get("/topics/t1")[0] == b'{"partitions":{"0":[1,2]}}'


def test_kill_keeps_acknowledged_writes(zookeeper: ZooKeeperServer):
    with kazoo(zookeeper) as zk:
        for i in range(20):
            zk.create(f"/seq/n{i:02d}", str(i).encode(), makepath=True)
    zookeeper.kill()
    assert not zookeeper.is_running()
    zookeeper.start()
    with kazoo(zookeeper) as zk:
        assert len(zk.get_children("/seq")) == 20
        assert zk.get("/seq/n19")[0] == b"19"


def test_stop_frees_the_port(zookeeper: ZooKeeperServer):
    port = zookeeper.port
    assert zookeeper.stop() is not None
    assert not zookeeper.is_running()
    assert zookeeper.stop() is None  # a second stop is a no-op
    assert four_letter_word("127.0.0.1", port, "ruok") == ""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        # connections the server closed leave TIME_WAIT entries on its port, which SO_REUSEADDR passes over;
        # a socket still listening there does not (CI failed once on TIME_WAIT alone)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))  # raises if the server still held it
        s.listen()


def test_context_manager_starts_and_stops(zookeeper_factory):
    server = zookeeper_factory(tick_time_ms=200)
    with server as zk:
        assert zk is server and zk.is_running()
        assert "tickTime=200" in four_letter_word(zk.host, zk.port, "conf").splitlines()
    assert not server.is_running()


def test_start_on_a_port_in_use_fails_with_the_servers_log(zookeeper_factory):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        server = zookeeper_factory(port=taken.getsockname()[1])
        with pytest.raises(ZooKeeperError, match="Address already in use"):
            server.start(timeout=30)
    assert not server.is_running()


def test_start_on_the_port_of_another_server_is_not_mistaken_for_ready(zookeeper, zookeeper_factory):
    # the other server answers ruok on that port; only this one's data directory counts
    with pytest.raises(ZooKeeperError, match="Address already in use"):
        zookeeper_factory(port=zookeeper.port).start(timeout=30)
    assert zookeeper.is_running()


def test_missing_classpath_is_reported(monkeypatch, tmp_path):
    monkeypatch.setenv(CLASSPATH_ENV, str(tmp_path / "no-such-zookeeper.jar"))
    reason = zookeeper_unavailable()
    assert reason is not None and ("no-such-zookeeper.jar" in reason or "java" in reason)
    with pytest.raises(ZooKeeperError, match="cannot start ZooKeeper"):
        ZooKeeperServer(tmp_path / "zk").start(timeout=5)


def test_ensemble_of_three_survives_one_server_and_takes_it_back(tmp_path):
    """A quorum on loopback: each member serves the same znodes, writes go on with one member (the leader)
    dead, and the member started again catches up and serves them."""
    from odradek.tools.zookeeper import ZooKeeperEnsemble

    if zookeeper_unavailable() is not None:
        pytest.skip(zookeeper_unavailable())
    with ZooKeeperEnsemble(tmp_path / "ensemble", size=3) as ensemble:
        modes = sorted(server.mode() for server in ensemble.servers)
        assert modes == ["follower", "follower", "leader"]
        assert len(ensemble.connect_string.split(",")) == 3
        for server in ensemble.servers:
            assert "myid" in {p.name for p in server.data_dir.iterdir()}
        leader = ensemble.leader()
        assert leader is not None
        others = [s for s in ensemble.servers if s is not leader]
        with kazoo(others[0]) as client:
            client.create("/before", b"1")
        leader.kill()
        with kazoo(others[1]) as client:  # a new leader is elected from the two left
            wait_until(lambda: client.exists("/before") is not None, timeout=30, message="the znode on another member")
            client.create("/during", b"2")
        leader.start()
        with kazoo(leader) as client:
            assert client.get("/during")[0] == b"2"
        assert sorted(server.mode() for server in ensemble.servers) == ["follower", "follower", "leader"]
    assert not any(server.is_running() for server in ensemble.servers)
