"""A cluster member's background steps (the election, watches, re-registration) that fail are logged once
with their reason and never left as "Task exception was never retrieved" (issue 37: an election task died
with an unretrieved SessionExpiredError after a long pause)."""

from __future__ import annotations

import asyncio
import gc
import logging
from types import SimpleNamespace

from odradek.cluster.member import ClusterMember
from odradek.cluster.zk import SessionExpiredError


def test_a_failed_background_step_is_retrieved_and_logged_once(caplog):
    reports: list[dict] = []

    async def elect() -> None:
        raise SessionExpiredError("session expired")

    async def broken() -> None:
        raise ValueError("a bug")

    async def body() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _, context: reports.append(context))
        member = SimpleNamespace(broker_id=7, _tasks=set())
        member._settled = lambda task: ClusterMember._settled(member, task)
        for coro in (elect(), broken()):
            ClusterMember._spawn(member, coro)
        await asyncio.sleep(0.01)
        assert member._tasks == set()

    with caplog.at_level(logging.INFO, logger="odradek.cluster.zk"):
        asyncio.run(body())
    gc.collect()  # an unretrieved task exception is reported when the task is collected
    lines = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "odradek.cluster.zk"]
    infos = [m for level, m in lines if level == logging.INFO]
    errors = [m for level, m in lines if level == logging.ERROR]
    assert len(infos) == 1 and "elect stopped: ZooKeeper SessionExpiredError" in infos[0]
    assert len(errors) == 1 and "broken failed" in errors[0]
    assert reports == [], "no task exception left unretrieved"
