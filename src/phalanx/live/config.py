"""Where the API server is and how to authenticate: ``--kubeconfig PATH`` or in-cluster.

Design: lightkube's configuration loader does the work (kubeconfig parsing with contexts,
relative certificate paths, ``*-data`` fields, bearer tokens, ``exec`` credential plugins,
basic auth; in-cluster service-account token — re-read on 401, so rotated tokens work — CA
file and ``KUBERNETES_SERVICE_HOST``/``PORT``). :class:`ClusterConfig` wraps its
``SingleConfig`` so the rest of phalanx never imports lightkube.

Resolution order of :func:`load_config`: an explicit kubeconfig path; else the in-cluster
service account when ``KUBERNETES_SERVICE_HOST`` is set; else the first existing file of
``$KUBECONFIG`` (a ``:``-separated list; files are *not* merged, unlike kubectl); else
``~/.kube/config``. Not supported by lightkube: ``auth-provider`` users (the long-removed
gcp/azure/oidc plugins; use ``exec``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from lightkube.config.kubeconfig import KubeConfig, SingleConfig
from lightkube.config.models import Cluster, User
from lightkube.core.exceptions import ConfigError as LightkubeConfigError

from phalanx.api.errors import InputError
from phalanx.k8s.yamlio import load_one, read_text
from phalanx.live.errors import ConfigError

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
DEFAULT_KUBECONFIG = Path("~/.kube/config")


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    """One resolved cluster + user + default namespace."""

    single: SingleConfig
    source: str  # "kubeconfig PATH", "in-cluster", "server URL": for log lines

    @property
    def server(self) -> str:
        return self.single.cluster.server

    @property
    def namespace(self) -> str:
        """The context's (or service account's) namespace; ``default`` when unset."""
        return self.single.namespace


def _with_user(single: SingleConfig) -> SingleConfig:
    # lightkube asserts a user exists when building the client; a context may have none.
    return single if single.user is not None else single._replace(user=User())


def kubeconfig_config(path: str | Path, *, context: str | None = None) -> ClusterConfig:
    """The ``context`` (default: current context) of the kubeconfig file at ``path``.

    The file is read with phalanx's YAML reader (duplicate keys, depth, encoding checked) and
    its shape checked (:func:`_check_kubeconfig`) before lightkube sees it, so a broken file is
    one line naming the file and the field, never a lightkube traceback."""
    where = f"kubeconfig {path}"
    try:
        data = load_one(read_text(str(path)), str(path))
    except InputError as exc:
        raise ConfigError(f"{where}: {exc.message}") from None
    _check_kubeconfig(data, where)
    try:
        single = KubeConfig.from_dict(data, fname=path).get(context_name=context)
    except KeyError as exc:
        raise ConfigError(f"{where}: the context names {exc} but no entry has that name") from None
    except (LightkubeConfigError, OSError, TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: {_short(str(exc) or type(exc).__name__)}") from None
    if single is None:  # pragma: no cover - lightkube raises instead when no context is set
        raise ConfigError(f"{where}: no context")
    check_server(single.cluster.server, f"{where}: cluster {single.context.cluster}: server")
    return ClusterConfig(_with_user(single), where)


def _short(text: str, limit: int = 120) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _check_kubeconfig(data: object, where: str) -> None:
    """A map with ``clusters``/``contexts``/``users`` lists of ``{name, KIND: map}`` items."""
    if not isinstance(data, Mapping):
        what = "empty" if data is None else f"a {type(data).__name__}, not a map"
        raise ConfigError(f"{where}: not a kubeconfig (the file is {what})")
    for key, item_key, required in (
        ("clusters", "cluster", True),
        ("contexts", "context", True),
        ("users", "user", False),
    ):
        items = data.get(key)
        if items is None and not required:
            continue
        if not isinstance(items, list):
            raise ConfigError(f"{where}: {key}: must be a list")
        for i, item in enumerate(items):
            field = f"{key}[{i}]"
            if not isinstance(item, Mapping):
                raise ConfigError(f"{where}: {field}: must be a map")
            if not isinstance(item.get("name"), str):
                raise ConfigError(f"{where}: {field}.name: must be a string")
            if not isinstance(item.get(item_key), Mapping):
                raise ConfigError(f"{where}: {field}.{item_key}: must be a map")
    current = data.get("current-context")
    if current is not None and not isinstance(current, str):
        raise ConfigError(f"{where}: current-context: must be a string")


def check_server(url: str, where: str) -> None:
    """A server URL must be ``http(s)://HOST[:PORT][/PATH]``: anything else is a configuration
    error found at start, not a connection retried forever."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ConfigError(f"{where}: not a URL {_short(url, 80)!r}: {exc}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            f"{where}: not an http(s) URL with a host: {_short(url, 80)!r}"
            " (expected e.g. https://10.0.0.1:6443)"
        )
    if port == 0:
        raise ConfigError(f"{where}: port 0 in {_short(url, 80)!r}")


def in_cluster_config(service_account_dir: str | Path = SERVICE_ACCOUNT_DIR) -> ClusterConfig:
    """The pod's service account: token, CA and namespace files plus the service env vars."""
    try:
        single = KubeConfig.from_service_account(service_account=service_account_dir).get()
    except (LightkubeConfigError, OSError, KeyError) as exc:
        raise ConfigError(f"in-cluster configuration: {exc}") from exc
    assert single is not None
    check_server(single.cluster.server, "in-cluster configuration: server")
    return ClusterConfig(_with_user(single), "in-cluster")


def config_for_server(
    url: str, *, token: str | None = None, namespace: str | None = None
) -> ClusterConfig:
    """A plain server URL (``kubectl proxy``, tests): no TLS client auth, optional token."""
    check_server(url, "server")
    config = KubeConfig.from_one(
        cluster=Cluster(server=url), user=User(token=token), namespace=namespace
    )
    single = config.get()
    assert single is not None
    return ClusterConfig(single, f"server {url}")


def load_config(
    kubeconfig: str | Path | None = None,
    *,
    context: str | None = None,
    service_account_dir: str | Path = SERVICE_ACCOUNT_DIR,
    environ: Mapping[str, str] | None = None,
) -> ClusterConfig:
    """Resolve the configuration in the order the module docstring gives."""
    env = os.environ if environ is None else environ
    if kubeconfig is not None:
        return kubeconfig_config(kubeconfig, context=context)
    if env.get("KUBERNETES_SERVICE_HOST"):
        return in_cluster_config(service_account_dir)
    candidates = [Path(p) for p in env.get("KUBECONFIG", "").split(os.pathsep) if p]
    candidates.append(DEFAULT_KUBECONFIG)
    for candidate in candidates:
        if candidate.expanduser().is_file():
            return kubeconfig_config(candidate.expanduser(), context=context)
    raise ConfigError(
        "no cluster configuration: pass --kubeconfig PATH, run in a pod, set KUBECONFIG, "
        "or create ~/.kube/config"
    )
