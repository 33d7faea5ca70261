"""The seed example for a real cluster: a gang of four that binds only once three pods exist.

Design: :func:`example_gang` returns plain manifests — a Namespace, a scheduler-plugins
PodGroup with ``minMember: 3`` and a ``batch/v1`` Job with ``parallelism: 4`` whose pods ask
for ``schedulerName: phalanx`` and carry the ``scheduling.x-k8s.io/pod-group`` label. Requests
are tiny (10m CPU, 16Mi) so it runs on any cluster, kind included; each pod sleeps five
minutes and the Job then completes. ``phalanx manifests --example`` prints it; the README's
install section and the manifest tests use it; nothing here simulates a cluster (the examples
under ``phalanx/examples`` are simulator scenarios with their own Nodes).
"""

from __future__ import annotations

from typing import Any

from phalanx.live.resources import DEFAULT_SCHEDULER_NAME

EXAMPLE_NAMESPACE = "phalanx-demo"
EXAMPLE_IMAGE = "registry.k8s.io/e2e-test-images/busybox:1.36.1-1"
GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


def example_gang(
    namespace: str = EXAMPLE_NAMESPACE,
    scheduler_name: str = DEFAULT_SCHEDULER_NAME,
    *,
    name: str = "train",
    min_member: int = 3,
    parallelism: int = 4,
    seconds: int = 300,
) -> list[dict[str, Any]]:
    """Namespace, PodGroup and Job of the seed example, in apply order."""
    container = {
        "name": "worker",
        "image": EXAMPLE_IMAGE,
        "command": ["sleep", str(seconds)],
        "resources": {
            "requests": {"cpu": "10m", "memory": "16Mi"},
            "limits": {"memory": "16Mi"},
        },
    }
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {
            "apiVersion": "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"minMember": min_member},
        },
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "parallelism": parallelism,
                "completions": parallelism,
                "backoffLimit": 0,
                "template": {
                    "metadata": {"labels": {GROUP_LABEL: name}},
                    "spec": {
                        "schedulerName": scheduler_name,
                        "restartPolicy": "Never",
                        "terminationGracePeriodSeconds": 0,
                        "containers": [container],
                    },
                },
            },
        },
    ]
