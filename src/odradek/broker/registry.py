"""The handler registry: one entry per API key, from which ApiVersions is derived.

Each handler module registers exactly one function with `@handler(api_key, min_version, max_version)`; the
range is what the handler really implements, and ApiVersions advertises exactly these ranges (a handler
registered with `advertised=False` answers without being advertised, as Kafka does with the telemetry APIs
when no metrics plugin is configured). Registering
a key twice raises at import, so two modules can never silently fight over an API.

A handler is `fn(ctx: RequestContext, request: dict)` returning the response body (the codec fills omitted
fields with their defaults), None for "send no response" (Produce with acks=0), or a coroutine that gives
one of those: an `async def` handler always waits; a plain one returns a coroutine only when this request
has to (Produce or OffsetCommit waiting for an fsync), so the common case costs no task. Protocol-level
failures belong in the response as Kafka error codes; an exception from a handler means the request was
unserviceable and the connection is closed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Union

if TYPE_CHECKING:
    from odradek.broker.context import RequestContext

Body = dict[str, Any]
HandlerFn = Callable[["RequestContext", Body], Union[Body, None, Awaitable[Union[Body, None]]]]


@dataclass(frozen=True)
class HandlerSpec:
    api_key: int
    min_version: int
    max_version: int
    fn: HandlerFn
    advertised: bool = True

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


HANDLERS: dict[int, HandlerSpec] = {}


def handler(api_key: int, min_version: int, max_version: int,
            advertised: bool = True) -> Callable[[HandlerFn], HandlerFn]:
    def register(fn: HandlerFn) -> HandlerFn:
        if api_key in HANDLERS:
            raise RuntimeError(f"api key {api_key} registered twice: {HANDLERS[api_key].fn.__module__} and {fn.__module__}")
        HANDLERS[api_key] = HandlerSpec(api_key, min_version, max_version, fn, advertised)
        return fn

    return register


def advertised_versions() -> list[tuple[int, int, int]]:
    """(api_key, min, max) for every advertised handler, sorted by key."""
    return [(s.api_key, s.min_version, s.max_version) for s in sorted(HANDLERS.values(), key=lambda s: s.api_key)
            if s.advertised]
