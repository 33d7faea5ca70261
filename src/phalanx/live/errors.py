"""Errors of the live path: every failure a caller sees is a :class:`LiveError`.

Design: an HTTP error answer becomes an :class:`ApiError` carrying the status code and, when
the body is a Kubernetes ``Status``, its ``reason`` and ``message`` — whether the code came as an
HTTP status or inside a watch ERROR event (a 410 arrives either way). Connection failures and
time-outs become :class:`TransportError` (the HTTP library's exception is the ``__cause__``),
so callers need not import the HTTP library.
"""

from __future__ import annotations

import json
from typing import Any


class LiveError(Exception):
    """Base of every live-path error."""


class ConfigError(LiveError):
    """No usable cluster configuration (kubeconfig missing or broken, not in a cluster)."""


class TransportError(LiveError):
    """The API server could not be reached, or the connection broke or timed out."""


class ApiError(LiveError):
    """The API server answered with an error ``status`` (HTTP code or watch ERROR event)."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        reason: str = "",
        body: dict[str, Any] | None = None,
        request: str = "",
    ) -> None:
        self.status = status
        self.reason = reason
        self.message = message
        self.body = body
        self.request = request
        where = f"{request}: " if request else ""
        because = f" ({reason})" if reason else ""
        super().__init__(f"{where}{status}{because} {message}".rstrip())

    @classmethod
    def from_status(cls, status: dict[str, Any], *, code: int = 0, request: str = "") -> ApiError:
        """From a ``v1 Status`` object; ``code`` is the fallback when it carries none."""
        raw_code = status.get("code")
        number = raw_code if isinstance(raw_code, int) and raw_code else code
        return cls(
            number,
            str(status.get("message") or ""),
            reason=str(status.get("reason") or ""),
            body=status,
            request=request,
        )

    @classmethod
    def from_response(cls, code: int, content: bytes, *, request: str = "") -> ApiError:
        """From an HTTP error answer, whose body may be a Status or plain text."""
        try:
            decoded = json.loads(content)
        except ValueError:
            decoded = None
        if isinstance(decoded, dict) and decoded.get("kind") == "Status":
            error = cls.from_status(decoded, code=code, request=request)
            error.status = code  # the HTTP code wins over the body's
            return error
        text = content.decode("utf-8", "replace").strip()[:500]
        return cls(code, text, request=request)

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def forbidden(self) -> bool:
        """403: the credentials may not do this (RBAC)."""
        return self.status == 403

    @property
    def conflict(self) -> bool:
        """409: AlreadyExists on create, Conflict on a stale resourceVersion or a bound pod."""
        return self.status == 409

    @property
    def gone(self) -> bool:
        """410: the resourceVersion is older than the server keeps; relist."""
        return self.status == 410
