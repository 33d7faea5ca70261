"""The HTTP face of the fake API server: routing, watch streaming, faults, latency, request log.

Routing follows the Kubernetes REST layout: ``/api/v1/...`` for the core group,
``/apis/{group}/{version}/...`` otherwise, then ``[namespaces/{ns}/]{plural}[/{name}[/{sub}]]``.
A group/version nobody serves answers ``404 page not found`` as plain text; an unknown resource
in a served group/version answers a JSON ``Status`` 404; every other error is a ``v1 Status``
with the HTTP code.

Watch (``?watch=1|true|True``): without ``resourceVersion`` (or with ``0``) the current objects
arrive as synthetic ADDED events first; with ``resourceVersion=N`` the retained changes after N
are replayed, or an ERROR event carrying a 410 ``Status`` is sent when N is older than the
retained window — both over a 200 response, as the real watch cache does. With
``allowWatchBookmarks=true`` a BOOKMARK (only ``metadata.resourceVersion``) is sent whenever the
watch has been idle for ``bookmark_interval`` seconds, on :meth:`FakeApiServer.send_bookmarks`,
and just before ``timeoutSeconds`` ends the stream.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web

from .eviction import evict
from .registry import PODS, ResourceInfo
from .selectors import SelectorError, parse_field_selector, parse_label_selector
from .store import STOP, ApiFailure, Obj, Store, Watcher, bad_request

_TRUE = ("1", "true", "True")
VERSION = {
    "major": "1",
    "minor": "35",
    "gitVersion": "v1.35.0-phalanx-fake",
    "platform": "linux/amd64",
}


@dataclass
class FaultRule:
    """Fail the next ``times`` requests whose method and path match, with ``status``."""

    method: str
    path: re.Pattern[str]
    status: int
    times: int
    reason: str
    message: str
    watch: bool | None = None  # None: watches and other requests alike
    hits: int = 0

    def matches(self, method: str, path: str, watch: bool) -> bool:
        return (
            self.hits < self.times
            and self.method in ("*", method)
            and self.path.search(path) is not None
            and self.watch in (None, watch)
        )


@dataclass
class LatencyRule:
    method: str
    path: re.Pattern[str]
    seconds: float
    watch: bool | None = None

    def matches(self, method: str, path: str, watch: bool) -> bool:
        return (
            self.method in ("*", method)
            and self.path.search(path) is not None
            and self.watch in (None, watch)
        )


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    query: dict[str, str]
    authorization: str | None

    @property
    def watch(self) -> bool:
        return self.query.get("watch") in _TRUE


_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    409: "Conflict",
    410: "Expired",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def _json(body: Any, status: int = 200) -> web.Response:
    return web.Response(
        body=json.dumps(body).encode(), status=status, content_type="application/json"
    )


def _failure(failure: ApiFailure) -> web.Response:
    return _json(failure.status(), failure.code)


def _page_not_found() -> web.Response:
    return web.Response(text="404 page not found\n", status=404, content_type="text/plain")


def _split_api_version(api_version: str) -> tuple[str, str]:
    group, _, version = api_version.rpartition("/")
    return group, version


class FakeApiServer:
    """An in-memory Kubernetes API server on 127.0.0.1 (a random free port).

    Use as ``async with FakeApiServer(crds=ALL_CRDS) as server: ... server.url ...``.
    """

    def __init__(
        self,
        crds: tuple[ResourceInfo, ...] | list[ResourceInfo] = (),
        *,
        history: int = 1000,
        bookmark_interval: float = 1.0,
        watch_timeout: float = 1800.0,
        token: str | None = None,
        host: str = "127.0.0.1",
        request_log: int = 10_000,
        port: int = 0,
        eviction: bool = True,
    ) -> None:
        """``eviction=False``: ``pods/eviction`` answers 404, as on a server without the
        Eviction API (a client must fall back to DELETE)."""
        self.store = Store(history=history)
        self.eviction = eviction
        for info in crds:
            self.store.register(info)
        self.bookmark_interval = bookmark_interval
        self.watch_timeout = watch_timeout
        self.token = token
        self.host = host
        self.requests: deque[RecordedRequest] = deque(maxlen=request_log)
        self.faults: list[FaultRule] = []
        self.latency: list[LatencyRule] = []
        self._gone_pending = 0
        self._runner: web.AppRunner | None = None
        self._port = 0
        self._wanted_port = port  # 0: any free port

    # ------------------------------------------------------------------ lifecycle
    @property
    def url(self) -> str:
        if not self._port:
            raise RuntimeError("the server is not running")
        return f"http://{self.host}:{self._port}"

    async def start(self) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(
            app, handler_cancellation=True, access_log=None, shutdown_timeout=0.5
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self._wanted_port)
        await site.start()
        server = site._server  # aiohttp keeps the listening socket here
        assert server is not None
        self._port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]

    async def stop(self) -> None:
        self.drop_watches()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> FakeApiServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def kubeconfig(
        self, path: str | Path, *, token: str | None = None, namespace: str = "default"
    ) -> Path:
        """Write a kubeconfig file pointing at this server (bearer ``token`` if given)."""
        user: dict[str, Any] = {"token": token} if token else {}
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "fake",
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": user}],
            "contexts": [
                {
                    "name": "fake",
                    "context": {"cluster": "fake", "user": "fake", "namespace": namespace},
                }
            ],
        }
        target = Path(path)
        target.write_text(json.dumps(config))  # JSON is YAML
        return target

    # ------------------------------------------------------------------ resources
    def register(self, info: ResourceInfo) -> None:
        self.store.register(info)

    def unregister(self, info: ResourceInfo) -> None:
        self.store.unregister(info)

    def _info(self, api_version: str, plural: str) -> ResourceInfo:
        group, version = _split_api_version(api_version)
        info = self.store.lookup(group, version, plural)
        if info is None:
            raise KeyError(f"{api_version} {plural} is not served")
        return info

    def put(self, api_version: str, plural: str, obj: Obj) -> Obj:
        """Store ``obj`` as is (status kept, no admission), emitting a watch event."""
        return self.store.put(self._info(api_version, plural), obj)

    def get(
        self, api_version: str, plural: str, name: str, namespace: str | None = None
    ) -> Obj | None:
        info = self._info(api_version, plural)
        return self.store.objects[info.key].get(
            ((namespace or "") if info.namespaced else "", name)
        )

    def remove(self, api_version: str, plural: str, name: str, namespace: str | None = None) -> Obj:
        return self.store.delete(self._info(api_version, plural), namespace, name)

    def objects(self, api_version: str, plural: str) -> list[Obj]:
        return list(self.store.objects[self._info(api_version, plural).key].values())

    # ------------------------------------------------------------------ faults
    def fail(
        self,
        method: str = "*",
        path: str = ".*",
        status: int = 500,
        *,
        times: int = 1,
        reason: str | None = None,
        message: str | None = None,
        watch: bool | None = None,
    ) -> FaultRule:
        """The next ``times`` requests matching (``method``, ``path`` regex) get ``status``.

        ``watch=True``/``False`` limits the rule to watch / non-watch requests.
        """
        rule = FaultRule(
            method.upper(),
            re.compile(path),
            status,
            times,
            reason or _REASONS.get(status, "Unknown"),
            message or f"injected failure ({status})",
            watch,
        )
        self.faults.append(rule)
        return rule

    def clear_faults(self) -> None:
        self.faults.clear()
        self._gone_pending = 0

    def force_gone(self, times: int = 1) -> None:
        """The next ``times`` watches get an ERROR event with a 410 Status, then end."""
        self._gone_pending += times

    def compact(self) -> None:
        """Forget all history: a watch from an older resourceVersion gets 410."""
        self.store.compact()

    def drop_watches(self, *, abort: bool = False) -> int:
        """End every open watch: cleanly (end of stream) or by aborting the connection."""
        watchers = list(self.store.all_watchers())
        for watcher in watchers:
            watcher.queue.put_nowait(("ABORT", {}) if abort else STOP)
        return len(watchers)

    def send_bookmarks(self) -> int:
        """Queue a BOOKMARK on every open watch that asked for bookmarks."""
        watchers = list(self.store.all_watchers())
        for watcher in watchers:
            watcher.queue.put_nowait(("BOOKMARK", {"rv": self.store.rv}))
        return len(watchers)

    @property
    def open_watches(self) -> int:
        return sum(1 for _ in self.store.all_watchers())

    def add_latency(
        self, seconds: float, method: str = "*", path: str = ".*", *, watch: bool | None = None
    ) -> LatencyRule:
        """Delay matching requests by ``seconds`` before they are served."""
        rule = LatencyRule(method.upper(), re.compile(path), seconds, watch)
        self.latency.append(rule)
        return rule

    def clear_latency(self) -> None:
        self.latency.clear()

    def count(self, method: str = "*", path: str = ".*", *, watch: bool | None = None) -> int:
        """How many recorded requests match (method, path regex, watch or not)."""
        pattern = re.compile(path)
        return sum(
            1
            for r in self.requests
            if method.upper() in ("*", r.method)
            and pattern.search(r.path)
            and (watch is None or r.watch == watch)
        )

    # ------------------------------------------------------------------ HTTP
    async def _handle(self, request: web.Request) -> web.StreamResponse:
        method, path = request.method, request.path
        record = RecordedRequest(
            method, path, dict(request.query), request.headers.get("Authorization")
        )
        self.requests.append(record)
        for rule in self.latency:
            if rule.matches(method, path, record.watch):
                await asyncio.sleep(rule.seconds)
        if (
            self.token is not None
            and request.headers.get("Authorization") != f"Bearer {self.token}"
        ):
            return _failure(ApiFailure(401, "Unauthorized", "Unauthorized"))
        for rule in self.faults:
            if rule.matches(method, path, record.watch):
                rule.hits += 1
                return _failure(ApiFailure(rule.status, rule.reason, rule.message))
        try:
            return await self._route(request)
        except ApiFailure as failure:
            return _failure(failure)

    async def _route(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        if path in ("/version", "/version/"):
            return _json(VERSION)
        if path in ("/healthz", "/readyz", "/livez"):
            return web.Response(text="ok")
        segments = [s for s in path.split("/") if s]
        if not segments or segments[0] not in ("api", "apis"):
            return _page_not_found()
        served = self.store.group_versions()
        if segments[0] == "api":
            if len(segments) == 1:
                return _json(
                    {
                        "kind": "APIVersions",
                        "versions": ["v1"],
                        "serverAddressByClientCIDRs": [
                            {
                                "clientCIDR": "0.0.0.0/0",
                                "serverAddress": f"{self.host}:{self._port}",
                            }
                        ],
                    }
                )
            group, version, rest = "", segments[1], segments[2:]
        else:
            if len(segments) == 1:
                return _json(self._group_list(served))
            group = segments[1]
            if group not in served or group == "":
                return _page_not_found()
            if len(segments) == 2:
                return _json(self._group(group, served[group]))
            version, rest = segments[2], segments[3:]
        if version not in served.get(group, []):
            return _page_not_found()
        if not rest:
            return _json(self._resource_list(group, version))
        return await self._resource(request, group, version, rest)

    def _group(self, group: str, versions: list[str]) -> Obj:
        entries = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        return {
            "kind": "APIGroup",
            "apiVersion": "v1",
            "name": group,
            "versions": entries,
            "preferredVersion": entries[0],
        }

    def _group_list(self, served: dict[str, list[str]]) -> Obj:
        groups = [self._group(g, vs) for g, vs in sorted(served.items()) if g]
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}

    def _resource_list(self, group: str, version: str) -> Obj:
        resources: list[Obj] = []
        for info in self.store.in_group_version(group, version):
            resources.extend(info.discovery())
        return {
            "kind": "APIResourceList",
            "apiVersion": "v1",
            "groupVersion": f"{group}/{version}" if group else version,
            "resources": resources,
        }

    async def _body(self, request: web.Request) -> Any:
        raw = await request.read()
        if not raw:
            if request.method == "DELETE":
                return None
            raise bad_request("the request body is empty")
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise bad_request(f"the request body is not JSON: {exc}") from None

    async def _resource(
        self, request: web.Request, group: str, version: str, rest: list[str]
    ) -> web.StreamResponse:
        namespace: str | None = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            candidate = self.store.lookup(group, version, rest[2])
            if candidate is not None and candidate.namespaced:
                namespace, rest = rest[1], rest[2:]
        info = self.store.lookup(group, version, rest[0])
        if info is None or len(rest) > 3:
            return _failure(
                ApiFailure(404, "NotFound", "the server could not find the requested resource")
            )
        name = rest[1] if len(rest) >= 2 else None
        sub = rest[2] if len(rest) == 3 else None
        method = request.method
        query = request.query
        if info.namespaced and namespace is None and (name is not None or method != "GET"):
            return _failure(
                ApiFailure(404, "NotFound", "the server could not find the requested resource")
            )
        if sub is not None and (
            sub not in info.subresources or (sub == "eviction" and not self.eviction)
        ):
            return _failure(
                ApiFailure(404, "NotFound", "the server could not find the requested resource")
            )
        if info.plural == "bindings" and info.group == "":
            if method != "POST" or name is not None:
                raise ApiFailure(405, "MethodNotAllowed", "only create is allowed on bindings")
            assert namespace is not None
            return _json(self.store.bind(namespace, None, await self._body(request)), 201)
        if name is None:
            if method == "GET":
                labels, fields = self._selectors(info, query)
                if query.get("watch") in _TRUE:
                    return await self._watch(request, info, namespace, labels, fields)
                try:
                    limit = int(query.get("limit") or 0)
                except ValueError:
                    raise bad_request("limit must be an integer") from None
                items, rv, token = self.store.list(
                    info, namespace, labels, fields, limit, query.get("continue")
                )
                meta: Obj = {"resourceVersion": rv}
                if token:
                    meta["continue"] = token
                if not info.custom:  # the real server drops kind/apiVersion of built-in items
                    items = [
                        {k: v for k, v in o.items() if k not in ("kind", "apiVersion")}
                        for o in items
                    ]
                return _json(
                    {
                        "kind": f"{info.kind}List",
                        "apiVersion": info.api_version,
                        "metadata": meta,
                        "items": items,
                    }
                )
            if method == "POST":
                return _json(self.store.create(info, namespace, await self._body(request)), 201)
            raise ApiFailure(405, "MethodNotAllowed", f"{method} is not allowed on a collection")
        if sub == "binding":
            if method != "POST" or info.key != PODS.key:
                raise ApiFailure(405, "MethodNotAllowed", "only POST is allowed on pods/binding")
            assert namespace is not None
            return _json(self.store.bind(namespace, name, await self._body(request)), 201)
        if sub == "eviction":
            if method != "POST":
                raise ApiFailure(405, "MethodNotAllowed", "only POST is allowed on pods/eviction")
            assert namespace is not None
            return _json(evict(self.store, namespace, name, await self._body(request)), 201)
        if method == "GET":
            return _json(self.store.get(info, namespace, name))
        if method == "PUT":
            return _json(self.store.replace(info, namespace, name, await self._body(request), sub))
        if method == "PATCH":
            content_type = request.headers.get("Content-Type", "").split(";")[0].strip()
            body = await self._body(request)
            return _json(self.store.patch(info, namespace, name, content_type, body, sub))
        if method == "DELETE" and sub is None:
            return _json(self.store.delete(info, namespace, name, await self._body(request)))
        raise ApiFailure(405, "MethodNotAllowed", f"{method} is not allowed here")

    def _selectors(self, info: ResourceInfo, query: Any) -> tuple[Any, Any]:
        try:
            return (
                parse_label_selector(query.get("labelSelector")),
                parse_field_selector(query.get("fieldSelector"), info.selectable_fields),
            )
        except SelectorError as exc:
            raise bad_request(str(exc)) from None

    # ------------------------------------------------------------------ watch
    async def _watch(
        self,
        request: web.Request,
        info: ResourceInfo,
        namespace: str | None,
        labels: Any,
        fields: Any,
    ) -> web.StreamResponse:
        query = request.query
        try:
            timeout = float(query.get("timeoutSeconds") or self.watch_timeout)
        except ValueError:
            raise bad_request("timeoutSeconds must be a number") from None
        bookmarks = query.get("allowWatchBookmarks") in _TRUE
        response = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()

        async def send(kind: str, obj: Obj) -> None:
            await response.write(json.dumps({"type": kind, "object": obj}).encode() + b"\n")

        def bookmark(rv: int) -> Obj:
            return {
                "kind": info.kind,
                "apiVersion": info.api_version,
                "metadata": {"resourceVersion": str(rv)},
            }

        if self._gone_pending > 0:
            self._gone_pending -= 1
            await response.prepare(request)
            rv = query.get("resourceVersion") or "0"
            await send(
                "ERROR", ApiFailure(410, "Expired", f"too old resource version: {rv}").status()
            )
            await response.write_eof()
            return response
        try:
            initial, watcher = self.store.watch(
                info, namespace, labels, fields, query.get("resourceVersion")
            )
        except ApiFailure as failure:
            if failure.code != 410:
                raise
            await response.prepare(request)
            await send("ERROR", failure.status())
            await response.write_eof()
            return response
        return await self._stream(
            request, response, watcher, initial, timeout, bookmarks, send, bookmark
        )

    async def _stream(
        self,
        request: web.Request,
        response: web.StreamResponse,
        watcher: Watcher,
        initial: list[tuple[str, Obj]],
        timeout: float,
        bookmarks: bool,
        send: Any,
        bookmark: Any,
    ) -> web.StreamResponse:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            await response.prepare(request)
            for kind, obj in initial:
                await send(kind, obj)
            while True:
                remaining = deadline - loop.time()
                if remaining <= 0:
                    if bookmarks:
                        await send("BOOKMARK", bookmark(self.store.rv))
                    break
                wait = min(remaining, self.bookmark_interval) if bookmarks else remaining
                try:
                    kind, obj = await asyncio.wait_for(watcher.queue.get(), wait)
                except TimeoutError:
                    if bookmarks and deadline - loop.time() > 0:
                        await send("BOOKMARK", bookmark(self.store.rv))
                    continue
                if kind == "STOP":
                    break
                if kind == "ABORT":
                    if request.transport is not None:
                        request.transport.abort()
                    return response
                if kind == "BOOKMARK":
                    if bookmarks:
                        await send("BOOKMARK", bookmark(obj["rv"]))
                    continue
                await send(kind, obj)
            await response.write_eof()
        except (ConnectionResetError, ConnectionError):
            pass
        finally:
            self.store.unwatch(watcher)
        return response
