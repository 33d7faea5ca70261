"""The queue a controller object names by label, for every pod it makes.

Kueue reads ``kueue.x-k8s.io/queue-name`` (a LocalQueue) on the Job, JobSet or Kubeflow job it
admits, and KAI-Scheduler's pod grouper reads ``kai.scheduler/queue`` on the pods' top owner:
users of either put the label on the object they submit, not on its pod template. A queue the
pod template names itself comes first; a Kubeflow job's ``schedulingPolicy.queue`` too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from phalanx.api.specs import PodSpec
from phalanx.k8s.apis import kai, kueue


def owner_queue(labels: Mapping[str, str]) -> str:
    """The queue the object's ``labels`` name (Kueue's first), or ``""``."""
    return labels.get(kueue.QUEUE_NAME) or labels.get(kai.QUEUE_LABEL) or ""


def in_owner_queue(pod: PodSpec, labels: Mapping[str, str]) -> PodSpec:
    """``pod`` in the queue its controller object's ``labels`` name, unless it names one."""
    queue = owner_queue(labels)
    return pod if pod.queue or not queue else dataclasses.replace(pod, queue=queue)
