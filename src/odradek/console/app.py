"""The console's web application: a JSON API under /api/ and the front end (static/), on Starlette.

Every call into confluent-kafka blocks, so each runs in the console's own thread pool (`Console.call`),
never on the event loop. A background task samples end offsets and group lag every `sample_interval`
seconds for the sparklines and lag charts.

API (JSON in and out; errors are {"error": message} with a 4xx/5xx status):

    GET    /api/health
    GET    /api/overview                       cluster, brokers, counts, throughput history
    GET    /api/topics                         ?internal=1 to include __consumer_offsets, ...
    POST   /api/topics                         {"name", "partitions", "replication_factor", "configs": {}}
    GET    /api/topics/{topic}                 partitions (leader, replicas, ISR, low/high), throughput
    DELETE /api/topics/{topic}
    GET    /api/topics/{topic}/configs
    GET    /api/topics/{topic}/messages        ?start=beginning|end|offset|timestamp &offset= &timestamp= (ms)
                                               &partition= &limit= &key= &value= (filters)
                                               &positions=P:O,P:O (the live tail: `next` of the last answer)
    POST   /api/topics/{topic}/messages        {"key", "value", "headers": [[k, v], ...], "partition"}
    GET    /api/groups
    GET    /api/groups/{group}                 members, assignments, committed offsets, lag, lag history
    POST   /api/groups/{group}/reset           {"topic" (optional), "to": earliest|latest|offset, "offset"}
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from odradek.console.kafka import ConsoleError, Kafka, Sampler

STATIC_DIR = Path(__file__).parent / "static"


class Console:
    def __init__(self, kafka: Kafka, sample_interval: float = 5.0, workers: int = 8) -> None:
        self.kafka = kafka
        self.sampler = Sampler(kafka)
        self.sample_interval = sample_interval
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="console-kafka")

    async def call(self, fn: Callable, *args: Any, **kwargs: Any) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.pool, functools.partial(fn, *args, **kwargs))

    async def sample_forever(self) -> None:
        while True:
            await self.call(self.sampler.sample)
            await asyncio.sleep(self.sample_interval)


def _int(value: str | None, name: str) -> int | None:
    if value is None or value == "":
        return None
    try:
        return int(value)
    except ValueError:
        raise ConsoleError(f"{name} must be an integer, got {value!r}") from None


def _positions(value: str | None) -> dict[int, int] | None:
    if not value:
        return None
    out = {}
    for item in value.split(","):
        p, sep, o = item.partition(":")
        if not sep:
            raise ConsoleError(f"positions: expected PARTITION:OFFSET, got {item!r}")
        out[_int(p, "partition")] = _int(o, "offset")
    return out


async def _json_body(request: Request) -> dict:
    try:
        body = await request.json()
    except ValueError:
        raise ConsoleError("the request body must be JSON") from None
    except RecursionError:
        raise ConsoleError("the request body is JSON nested too deeply") from None
    if not isinstance(body, dict):
        raise ConsoleError("the request body must be a JSON object")
    return body


def create_app(console: Console) -> Starlette:
    kafka = console.kafka
    call = console.call

    def api(handler: Callable) -> Callable:
        @functools.wraps(handler)
        async def wrapped(request: Request) -> Response:
            try:
                result = await handler(request)
            except ConsoleError as exc:
                return JSONResponse({"error": str(exc)}, status_code=exc.status)
            return result if isinstance(result, Response) else JSONResponse(result)
        return wrapped

    @api
    async def health(request: Request):
        return {"ok": True, "bootstrap": kafka.bootstrap}

    @api
    async def overview(request: Request):
        data = await call(kafka.overview)
        data["throughput"] = console.sampler.throughput_series()
        data["sample_interval"] = console.sample_interval
        return data

    @api
    async def topics(request: Request):
        rows = await call(kafka.topics, request.query_params.get("internal") in ("1", "true"))
        rates = console.sampler.throughput_series()["topics"]
        for row in rows:
            row["throughput"] = rates.get(row["name"], [])[-30:]
        return rows

    @api
    async def create_topic(request: Request):
        body = await _json_body(request)
        name = str(body.get("name", "")).strip()
        partitions = _int(str(body.get("partitions", 1)), "partitions") or 1
        replication = _int(str(body.get("replication_factor", -1)), "replication_factor") or -1
        configs = {str(k): str(v) for k, v in (body.get("configs") or {}).items()}
        await call(kafka.create_topic, name, partitions, replication, configs)
        return JSONResponse({"created": name}, status_code=201)

    @api
    async def topic(request: Request):
        name = request.path_params["topic"]
        data = await call(kafka.topic, name)
        data["throughput"] = console.sampler.throughput_series()["topics"].get(name, [])
        return data

    @api
    async def delete_topic(request: Request):
        name = request.path_params["topic"]
        await call(kafka.delete_topic, name)
        return {"deleted": name}

    @api
    async def topic_configs(request: Request):
        return await call(kafka.topic_configs, request.path_params["topic"])

    @api
    async def messages(request: Request):
        q = request.query_params
        return await call(kafka.browse, request.path_params["topic"], partition=_int(q.get("partition"), "partition"),
                          start=q.get("start", "end"), offset=_int(q.get("offset"), "offset"),
                          timestamp_ms=_int(q.get("timestamp"), "timestamp"),
                          limit=_int(q.get("limit"), "limit") or 50, key_filter=q.get("key", ""),
                          value_filter=q.get("value", ""), positions=_positions(q.get("positions")))

    @api
    async def produce(request: Request):
        body = await _json_body(request)
        headers = []
        for item in body.get("headers") or []:
            if isinstance(item, dict):
                item = [item.get("key"), item.get("value")]
            if not isinstance(item, (list, tuple)) or len(item) != 2 or not item[0]:
                raise ConsoleError("headers: expected a list of [key, value]")
            headers.append((str(item[0]), "" if item[1] is None else str(item[1])))
        key = body.get("key")
        value = body.get("value")
        return await call(kafka.produce, request.path_params["topic"], None if key in (None, "") else str(key),
                          None if value is None else str(value), headers,
                          _int(None if body.get("partition") in (None, "") else str(body["partition"]), "partition"))

    @api
    async def groups(request: Request):
        rows = await call(kafka.groups)
        for row in rows:
            series = console.sampler.lag_series(row["group"])["total"]
            row["lag"] = series[-1]["v"] if series else None
            row["lag_history"] = series[-30:]
        return rows

    @api
    async def group(request: Request):
        name = request.path_params["group"]
        data = await call(kafka.group, name)
        data["lag_history"] = console.sampler.lag_series(name)
        data["sample_interval"] = console.sample_interval
        return data

    @api
    async def reset_group(request: Request):
        body = await _json_body(request)
        plan = await call(kafka.reset_offsets, request.path_params["group"], body.get("topic") or None,
                          str(body.get("to", "")), _int(None if body.get("offset") in (None, "") else str(body["offset"]),
                                                         "offset"))
        return {"reset": plan}

    async def not_found(request: Request) -> Response:
        return JSONResponse({"error": f"no such API: {request.url.path}"}, status_code=404)

    async def index(request: Request) -> Response:
        return FileResponse(STATIC_DIR / "index.html", headers={"Cache-Control": "no-cache"})

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        task = asyncio.create_task(console.sample_forever())
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            console.pool.shutdown(wait=False, cancel_futures=True)

    routes = [
        Route("/api/health", health),
        Route("/api/overview", overview),
        Route("/api/topics", topics, methods=["GET"]),
        Route("/api/topics", create_topic, methods=["POST"]),
        Route("/api/topics/{topic}", topic, methods=["GET"]),
        Route("/api/topics/{topic}", delete_topic, methods=["DELETE"]),
        Route("/api/topics/{topic}/configs", topic_configs),
        Route("/api/topics/{topic}/messages", messages, methods=["GET"]),
        Route("/api/topics/{topic}/messages", produce, methods=["POST"]),
        Route("/api/groups", groups),
        Route("/api/groups/{group}", group),
        Route("/api/groups/{group}/reset", reset_group, methods=["POST"]),
        Route("/api/{rest:path}", not_found, methods=["GET", "POST", "DELETE", "PUT"]),
        Mount("/static", StaticFiles(directory=STATIC_DIR), name="static"),
        Route("/", index),
    ]
    return Starlette(routes=routes, lifespan=lifespan)
