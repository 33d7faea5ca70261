"""An async Kubernetes REST client that speaks plain dicts.

Why lightkube for configuration, and aiohttp for HTTP: phalanx needs two things from client
libraries — configuration loading (kubeconfig, exec plugins, in-cluster token rotation, TLS)
and a fast async HTTP stack — and *nothing* from object models: the hot path (informer lists
and watches of thousands of pods, a bind per pod) must stay plain ``json.loads`` dicts, because
model deserialisation costs 4–17× that, and phalanx's converters (:mod:`phalanx.k8s`) take
dicts anyway. lightkube loads the configuration (it ships type hints, so ``mypy --strict``
sees types) and gives its connection parameters: the base URL, the TLS context (CA and client
certificate) and an ``httpx.Auth``. The requests themselves go through one
``aiohttp.ClientSession`` (keep-alive connection pool, C HTTP parser): against the API test
server a bind costs about 0.19 ms of client CPU through it and 0.94 ms through
``httpx.AsyncClient``, whose pool scans (and polls) every idle connection per request.
The ``httpx.Auth`` still decides the ``Authorization`` header (:class:`_AuthHeader`): it is
asked once, and again after a 401, as httpx itself would (lightkube re-reads a rotated token
file or re-runs an exec plugin on a 401). Writes (every verb but ``GET``: binds, Events,
status patches — several per pod bound) go through :class:`~phalanx.live.http1.Http1Pool`
instead, a lean keep-alive HTTP/1.1 client on the same TLS context: about 0.08 ms of CPU a
request against 0.2 ms through aiohttp; reads, lists and watches stay on aiohttp, and so do
writes when the environment names a proxy for the server.

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

import asyncio
import json
import logging
import ssl
import time
from collections.abc import AsyncGenerator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar

import aiohttp
import httpx2 as httpx
from lightkube.config.client_adapter import ConnectionParams

from phalanx.live.config import ClusterConfig
from phalanx.live.errors import ApiError, ConfigError, TransportError
from phalanx.live.http1 import ConnectFailed, Http1Pool, proxied
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

    def failed(self, exc: BaseException) -> None:
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


#: A connection could not be made (refused, no route, DNS, connect timeout).
_CONNECT_ERRORS = (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError)
#: The connection could not be made, broke, or timed out.
_TRANSPORT_ERRORS = (aiohttp.ClientError, TimeoutError, OSError)


class _AuthHeader:
    """The ``Authorization`` header an ``httpx.Auth`` (lightkube's) puts on a request.

    Asked once and kept; after a 401, the auth flow is driven with that answer (as httpx
    does), so an auth that can renew its credentials (lightkube re-reads a rotated token file,
    re-runs an exec plugin) gives the new header, and one that cannot gives none. Requests
    answered 401 together renew it once."""

    def __init__(self, auth: httpx.Auth | None, url: str) -> None:
        self.auth = auth
        self.url = url
        self.value: str | None = None
        self.known = auth is None
        self._renewing = asyncio.Lock()

    async def header(self) -> str | None:
        if not self.known and self.auth is not None:
            flow = self.auth.async_auth_flow(httpx.Request("GET", self.url))
            request = await flow.__anext__()
            self.value = request.headers.get("Authorization")
            self.known = True
        return self.value

    async def renewed(self, used: str | None) -> bool:
        """After a 401 to a request sent with header ``used``: ask the auth flow again;
        whether there is a new header."""
        if self.auth is None:
            return False
        async with self._renewing:
            if self.value != used:
                return True  # renewed meanwhile, for another request
            flow = self.auth.async_auth_flow(httpx.Request("GET", self.url))
            request = await flow.__anext__()
            try:
                request = await flow.asend(httpx.Response(401, request=request))
            except StopAsyncIteration:
                return False
            self.value = request.headers.get("Authorization")
            return self.value != used


class KubeClient:
    """Async REST access to one cluster; use as ``async with KubeClient(config) as client``."""

    def __init__(
        self,
        config: ClusterConfig,
        *,
        timeout: float = 30.0,
        max_connections: int = 100,
        trust_env: bool = True,
        lean_writes: bool = True,
    ) -> None:
        self.config = config
        self.timeout = timeout
        self.reachability = Reachability(config.server, config.source)
        params = ConnectionParams(timeout=httpx.Timeout(timeout), trust_env=trust_env)
        try:
            kwargs = params.httpx_params(config.single)
        except Exception as exc:  # lightkube raises ConfigError, ssl.SSLError, OSError...
            raise ConfigError(f"{config.source}: {exc}") from exc
        self._base = str(kwargs["base_url"]).rstrip("/")
        self._ssl = kwargs["verify"] if self._base.startswith("https:") else False
        self._auth = _AuthHeader(kwargs.get("auth"), self._base + "/")
        self._trust_env = trust_env
        self._max_connections = max_connections
        self._timeout = aiohttp.ClientTimeout(
            total=None, connect=timeout, sock_connect=timeout, sock_read=timeout
        )
        self._session: aiohttp.ClientSession | None = None
        self._writes: Http1Pool | None = None
        if lean_writes and not (trust_env and proxied(self._base)):
            context = self._ssl if isinstance(self._ssl, ssl.SSLContext) else None
            self._writes = Http1Pool(self._base, context, max_idle=max_connections)

    #: What every request accepts (aiohttp's session adds it itself).
    _accept: ClassVar[dict[str, str]] = {"Accept": "application/json", "User-Agent": "phalanx"}

    @property
    def _http(self) -> aiohttp.ClientSession:
        """The connection pool (made on first use: aiohttp wants a running loop)."""
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(
                    limit=self._max_connections, limit_per_host=0, ssl=self._ssl
                ),
                timeout=self._timeout,
                trust_env=self._trust_env,
                headers={"Accept": "application/json"},
                skip_auto_headers=("Content-Type",),
            )
        return self._session

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._writes is not None:
            self._writes.close()
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _transport_error(self, label: str, exc: BaseException) -> TransportError:
        if isinstance(exc, (*_CONNECT_ERRORS, ConnectFailed)):
            self.reachability.failed(exc)
        return TransportError(f"{label}: {type(exc).__name__}: {exc}")

    async def _headers(self, content_type: str | None) -> dict[str, str]:
        headers = {} if content_type is None else {"Content-Type": content_type}
        authorization = await self._auth.header()
        if authorization is not None:
            headers["Authorization"] = authorization
        return headers

    # ------------------------------------------------------------------ raw
    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        answer: bool = True,
        timeout: float | None = None,
    ) -> Obj:
        """One request; the JSON answer as a dict, or ApiError/TransportError. ``answer=False``:
        a success's body is not decoded (``{}``; a scheduler's writes seldom read it).
        ``timeout``: seconds for this request, if less than the client's."""
        content = None if body is None else json.dumps(body).encode()
        return await self.send(
            method,
            path,
            content,
            params=params,
            content_type=content_type,
            answer=answer,
            timeout=timeout,
        )

    async def send(
        self,
        method: str,
        path: str,
        content: bytes | None = None,
        *,
        params: Mapping[str, str] | None = None,
        content_type: str = "application/json",
        answer: bool = True,
        timeout: float | None = None,
    ) -> Obj:
        """As :meth:`request`, with the body already serialised (e.g. a bind's)."""
        label = f"{method} {path}"
        url = self._base + path
        seconds = self.timeout if timeout is None else min(timeout, self.timeout)
        for attempt in range(2):
            headers = await self._headers(None if content is None else content_type)
            try:
                if self._writes is not None and method != "GET":
                    status, reply = await self._writes.request(
                        method, path, {**self._accept, **headers}, content, params, seconds
                    )
                else:
                    async with (
                        asyncio.timeout(None if timeout is None else seconds),
                        self._http.request(
                            method, url, params=params, data=content, headers=headers
                        ) as response,
                    ):
                        status, reply = response.status, await response.read()
            except _TRANSPORT_ERRORS as exc:
                raise self._transport_error(label, exc) from exc
            self.reachability.answered()
            used = headers.get("Authorization")
            if status == 401 and not attempt and await self._auth.renewed(used):
                continue  # new credentials (a rotated token): once more
            break
        if status >= 400:
            raise ApiError.from_response(status, reply, request=label)
        return _decode(reply, label) if answer else {}

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

    async def create(
        self, resource: Resource, obj: Obj, namespace: str | None = None, *, answer: bool = True
    ) -> Obj:
        """POST; the namespace defaults to the object's own ``metadata.namespace``."""
        if resource.namespaced and namespace is None:
            namespace = (obj.get("metadata") or {}).get("namespace") or "default"
        return await self.request("POST", resource.path(namespace), body=obj, answer=answer)

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
        timeout = aiohttp.ClientTimeout(
            total=None,
            connect=self.timeout,
            sock_connect=self.timeout,
            sock_read=timeout_seconds + WATCH_READ_GRACE,
        )
        headers = await self._headers(None)
        try:
            async with self._http.get(
                self._base + path, params=params, headers=headers, timeout=timeout
            ) as response:
                self.reachability.answered()
                if response.status >= 400:
                    content = await response.read()
                    if response.status == 401:  # the informer's next watch has new credentials
                        await self._auth.renewed(headers.get("Authorization"))
                    raise ApiError.from_response(response.status, content, request=label)
                async for line in _lines(response.content):
                    yield _watch_event(line, label)
        except _TRANSPORT_ERRORS as exc:
            raise self._transport_error(label, exc) from exc


async def _lines(stream: aiohttp.StreamReader) -> AsyncGenerator[bytes, None]:
    """The non-blank lines of a stream, however long (``readline`` caps a line's length)."""
    rest = b""
    async for chunk in stream.iter_any():
        lines = (rest + chunk).split(b"\n")
        rest = lines.pop()
        for line in lines:
            if line.strip():
                yield line
    if rest.strip():
        yield rest


def _watch_event(line: bytes, label: str) -> WatchEvent:
    event = _decode(line, label)
    kind = event.get("type")
    obj = event.get("object")
    if not isinstance(kind, str) or not isinstance(obj, dict):
        raise ApiError(0, f"malformed watch event {line[:200]!r}", request=label)
    if kind == "ERROR":
        raise ApiError.from_status(obj, code=500, request=label)
    return WatchEvent(kind, obj)
