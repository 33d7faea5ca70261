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

from lightkube.config.kubeconfig import KubeConfig, SingleConfig
from lightkube.config.models import Cluster, User
from lightkube.core.exceptions import ConfigError as LightkubeConfigError

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
    """The ``context`` (default: current context) of the kubeconfig file at ``path``."""
    try:
        single = KubeConfig.from_file(path).get(context_name=context)
    except (LightkubeConfigError, OSError, KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"kubeconfig {path}: {exc}") from exc
    if single is None:  # pragma: no cover - lightkube raises instead when no context is set
        raise ConfigError(f"kubeconfig {path}: no context")
    return ClusterConfig(_with_user(single), f"kubeconfig {path}")


def in_cluster_config(service_account_dir: str | Path = SERVICE_ACCOUNT_DIR) -> ClusterConfig:
    """The pod's service account: token, CA and namespace files plus the service env vars."""
    try:
        single = KubeConfig.from_service_account(service_account=service_account_dir).get()
    except (LightkubeConfigError, OSError, KeyError) as exc:
        raise ConfigError(f"in-cluster configuration: {exc}") from exc
    assert single is not None
    return ClusterConfig(_with_user(single), "in-cluster")


def config_for_server(
    url: str, *, token: str | None = None, namespace: str | None = None
) -> ClusterConfig:
    """A plain server URL (``kubectl proxy``, tests): no TLS client auth, optional token."""
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
