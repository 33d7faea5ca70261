"""An async Kubernetes REST client that speaks plain dicts.

Why lightkube (and not kubernetes_asyncio): phalanx needs two things from a client library —
configuration loading (kubeconfig, exec plugins, in-cluster token rotation, TLS) and an async
HTTP stack — and *nothing* from its object models: the hot path (informer lists and watches of
thousands of pods) must stay plain ``json.loads`` dicts, because model deserialisation costs
4–17× that, and phalanx's converters (:mod:`phalanx.k8s`) take dicts anyway. lightkube ships
type hints (``py.typed``; kubernetes_asyncio has none, so ``mypy --strict`` would see ``Any``
everywhere), its configuration layer builds a ready ``httpx2.AsyncClient`` (auth, TLS,
base URL), and it has the fastest models should a caller ever want one. Everything here
therefore uses lightkube's connection parameters and that HTTP client directly.

Binding (kubernetes-client/python#547): ``POST pods/NAME/binding`` answers a ``v1 Status``
while the OpenAPI spec promises a ``Binding``, so typed clients raise *after* the bind
succeeded. Nothing here deserialises into a model, so :func:`phalanx.live.writes.bind` just
reads the Status dict.

Design: one :class:`KubeClient` per process (a connection pool; watches each hold one
connection). Every method takes a :class:`~phalanx.live.resources.Resource` and returns dicts.
Errors are :class:`~phalanx.live.errors.ApiError` (with the HTTP or Status code) or
:class:`~phalanx.live.errors.TransportError`. :meth:`KubeClient.watch` turns a watch ERROR
event into an ApiError too, so a 410 looks the same whether the server sent it as an HTTP
status or inside the stream. Lists are paged (``limit``/``continue``, as client-go's pager); an
expired continue token (410) falls back to one unpaged list.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import httpx2 as httpx
from lightkube.config.client_adapter import ConnectionParams

from phalanx.live.config import ClusterConfig
from phalanx.live.errors import ApiError, ConfigError, TransportError
from phalanx.live.resources import Resource

logger = logging.getLogger(__name__)

Obj = dict[str, Any]

#: How long past ``timeoutSeconds`` a silent watch connection is considered dead.
WATCH_READ_GRACE = 30.0
DEFAULT_PAGE_SIZE = 500


class PatchType(StrEnum):
    MERGE = "application/merge-patch+json"
    #: Built-in kinds only: a CRD answers 415 Unsupported Media Type.
    STRATEGIC = "application/strategic-merge-patch+json"
    JSON = "application/json-patch+json"


@dataclass(frozen=True, slots=True)
class ObjectList:
    items: list[Obj]
    #: The list's snapshot revision: start a watch here to miss nothing.
    resource_version: str


@dataclass(frozen=True, slots=True)
class WatchEvent:
    type: str  # ADDED, MODIFIED, DELETED, BOOKMARK
    object: Obj

    @property
    def resource_version(self) -> str:
        meta = self.object.get("metadata") or {}
        return str(meta.get("resourceVersion") or "")


def _decode(content: bytes, request: str) -> Obj:
    if not content:
        return {}
    try:
        value = json.loads(content)
    except ValueError as exc:
        raise ApiError(0, f"response is not JSON: {exc}", request=request) from exc
    if not isinstance(value, dict):
        raise ApiError(0, "response is not a JSON object", request=request)
    return value


def _selectors(label_selector: str | None, field_selector: str | None) -> dict[str, str]:
    params: dict[str, str] = {}
    if label_selector:
        params["labelSelector"] = label_selector
    if field_selector:
        params["fieldSelector"] = field_selector
    return params


def label_selector(labels: Mapping[str, str]) -> str:
    """``{"a": "b", "c": "d"}`` → ``"a=b,c=d"`` (equality terms, ANDed)."""
    return ",".join(f"{key}={value}" for key, value in labels.items())


class Reachability:
    """Whether the API server answers, as every request of one client sees it.

    A connection that cannot be made (refused, no route, DNS, connect timeout) marks the server
    *unreachable*; any answer, even an error status, marks it *reachable*. Only a change is
    logged — one line when it goes, one when it comes back — so eight informers retrying with
    backoff do not log a line per attempt."""

    def __init__(self, server: str, source: str) -> None:
        self.server = server
        self.source = source
        self.down_since: float | None = None
        self.failures = 0

    @property
    def up(self) -> bool:
        return self.down_since is None

    def failed(self, exc: httpx.TransportError) -> None:
        self.failures += 1
        if self.down_since is None:
            self.down_since = time.monotonic()
            logger.warning(
                "API server %s (%s) is unreachable (%s: %s); retrying with backoff",
                self.server,
                self.source,
                type(exc).__name__,
                exc,
            )

    def answered(self) -> None:
        if self.down_since is not None:
            logger.warning(
                "API server %s is reachable again after %.1fs (%d failed attempts)",
                self.server,
                time.monotonic() - self.down_since,
                self.failures,
            )
            self.down_since = None
            self.failures = 0


_CONNECT_ERRORS = (httpx.ConnectError, httpx.ConnectTimeout)


class KubeClient:
    """Async REST access to one cluster; use as ``async with KubeClient(config) as client``."""

    def __init__(
        self,
        config: ClusterConfig,
        *,
        timeout: float = 30.0,
        max_connections: int = 100,
        trust_env: bool = True,
    ) -> None:
        self.config = config
        self.timeout = timeout
        self.reachability = Reachability(config.server, config.source)
        params = ConnectionParams(timeout=httpx.Timeout(timeout), trust_env=trust_env)
        try:
            kwargs = params.httpx_params(config.single)
        except Exception as exc:  # lightkube raises ConfigError, ssl.SSLError, OSError...
            raise ConfigError(f"{config.source}: {exc}") from exc
        self._http = httpx.AsyncClient(
            **kwargs,
            limits=httpx.Limits(
                max_connections=max_connections, max_keepalive_connections=max_connections
            ),
        )

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    def _transport_error(self, label: str, exc: httpx.TransportError) -> TransportError:
        if isinstance(exc, _CONNECT_ERRORS):
            self.reachability.failed(exc)
        return TransportError(f"{label}: {type(exc).__name__}: {exc}")

    # ------------------------------------------------------------------ raw
    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> Obj:
        """One request; the JSON answer as a dict, or ApiError/TransportError."""
        label = f"{method} {path}"
        headers = {"Accept": "application/json"}
        content: bytes | None = None
        if body is not None:
            content = json.dumps(body).encode()
            headers["Content-Type"] = content_type
        try:
            response = await self._http.request(
                method, path, params=dict(params or {}), content=content, headers=headers
            )
        except httpx.TransportError as exc:
            raise self._transport_error(label, exc) from exc
        self.reachability.answered()
        if response.status_code >= 400:
            raise ApiError.from_response(response.status_code, response.content, request=label)
        return _decode(response.content, label)

    # ------------------------------------------------------------------ verbs
    async def get(self, resource: Resource, name: str, namespace: str | None = None) -> Obj:
        return await self.request("GET", resource.path(namespace, name))

    async def list(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = DEFAULT_PAGE_SIZE,
    ) -> ObjectList:
        """Every matching object, paged; items get ``apiVersion``/``kind`` filled in.

        (The API server omits them on the items of built-in lists; phalanx's converters and
        any later ``kind`` dispatch want them.)
        """
        path = resource.path(namespace)
        base = _selectors(label_selector, field_selector)
        items: list[Obj] = []
        resource_version = ""
        token: str | None = None
        limit = page_size
        while True:
            params = dict(base)
            if limit:
                params["limit"] = str(limit)
            if token:
                params["continue"] = token
            try:
                page = await self.request("GET", path, params=params)
            except ApiError as exc:
                if not (exc.gone and token):
                    raise
                items, resource_version, token, limit = [], "", None, 0  # expired: list anew
                continue
            page_items = page.get("items") or []
            for item in page_items:
                item.setdefault("apiVersion", resource.api_version)
                item.setdefault("kind", resource.kind)
            items.extend(page_items)
            meta = page.get("metadata") or {}
            if not resource_version:
                resource_version = str(meta.get("resourceVersion") or "")
            token = meta.get("continue") or None
            if not token:
                return ObjectList(items, resource_version)

    async def create(self, resource: Resource, obj: Obj, namespace: str | None = None) -> Obj:
        """POST; the namespace defaults to the object's own ``metadata.namespace``."""
        if resource.namespaced and namespace is None:
            namespace = (obj.get("metadata") or {}).get("namespace") or "default"
        return await self.request("POST", resource.path(namespace), body=obj)

    async def replace(
        self,
        resource: Resource,
        obj: Obj,
        namespace: str | None = None,
        *,
        subresource: str | None = None,
    ) -> Obj:
        """PUT the whole object; its ``metadata.resourceVersion`` makes it conditional (409)."""
        meta = obj.get("metadata") or {}
        if resource.namespaced and namespace is None:
            namespace = meta.get("namespace") or "default"
        path = resource.path(namespace, str(meta.get("name") or ""), subresource)
        return await self.request("PUT", path, body=obj)

    async def patch(
        self,
        resource: Resource,
        name: str,
        patch: Any,
        namespace: str | None = None,
        *,
        patch_type: PatchType = PatchType.MERGE,
        subresource: str | None = None,
    ) -> Obj:
        path = resource.path(namespace, name, subresource)
        return await self.request("PATCH", path, body=patch, content_type=patch_type)

    async def delete(
        self,
        resource: Resource,
        name: str,
        namespace: str | None = None,
        *,
        uid: str | None = None,
    ) -> Obj:
        """DELETE; with ``uid``, only that incarnation of the object (409 otherwise)."""
        body = None
        if uid is not None:
            body = {
                "kind": "DeleteOptions",
                "apiVersion": "v1",
                "preconditions": {"uid": uid},
            }
        return await self.request("DELETE", resource.path(namespace, name), body=body)

    async def served(self, resource: Resource) -> bool:
        """Whether the server serves ``resource`` (discovery of its group/version)."""
        try:
            listing = await self.request("GET", resource.prefix)
        except ApiError as exc:
            if exc.not_found:
                return False
            raise
        return any(r.get("name") == resource.plural for r in listing.get("resources") or [])

    # ------------------------------------------------------------------ watch
    async def watch(
        self,
        resource: Resource,
        namespace: str | None = None,
        *,
        resource_version: str | None = None,
        timeout_seconds: int = 300,
        bookmarks: bool = True,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> AsyncGenerator[WatchEvent, None]:
        """Stream events until the server ends the watch (``timeout_seconds``) or fails.

        An ERROR event raises ApiError with its Status code (410 = relist). Close the iterator
        (``contextlib.aclosing``) to hang up early.
        """
        path = resource.path(namespace)
        label = f"WATCH {path}"
        params = _selectors(label_selector, field_selector)
        params["watch"] = "true"
        params["timeoutSeconds"] = str(timeout_seconds)
        if bookmarks:
            params["allowWatchBookmarks"] = "true"
        if resource_version:
            params["resourceVersion"] = resource_version
        timeout = httpx.Timeout(self.timeout, read=timeout_seconds + WATCH_READ_GRACE)
        try:
            async with self._http.stream(
                "GET",
                path,
                params=params,
                headers={"Accept": "application/json"},
                timeout=timeout,
            ) as response:
                self.reachability.answered()
                if response.status_code >= 400:
                    content = await response.aread()
                    raise ApiError.from_response(response.status_code, content, request=label)
                async for line in response.aiter_lines():
                    if not line.strip():
                        continue
                    event = _decode(line.encode(), label)
                    kind = event.get("type")
                    obj = event.get("object")
                    if not isinstance(kind, str) or not isinstance(obj, dict):
                        raise ApiError(0, f"malformed watch event {line[:200]!r}", request=label)
                    if kind == "ERROR":
                        raise ApiError.from_status(obj, code=500, request=label)
                    yield WatchEvent(kind, obj)
        except httpx.TransportError as exc:
            raise self._transport_error(label, exc) from exc
