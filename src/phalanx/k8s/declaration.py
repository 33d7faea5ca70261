"""What a pod says about its gang, whichever API it speaks: one :class:`Declaration` each.

Design: every gang API that marks pods (a label, an annotation, a pod field) has one module in
:mod:`phalanx.k8s.apis` with a ``declaration(labels, annotations, path)`` function returning
a Declaration or None. :func:`phalanx.k8s.pods.convert_pod` collects them all; two that name
different gangs make the pod invalid, with a reason naming both. The live scheduler reads pods
through the same converter, so it sees the same gangs.
"""

from __future__ import annotations

from dataclasses import dataclass

from phalanx.api.specs import GangRef, GangSpec


@dataclass(frozen=True, slots=True)
class Declaration:
    """One API's view of a pod: the gang it joins (if any), role and queue.

    ``gang`` is set when the declaration itself defines the gang (pod-level APIs such as
    Koordinator, Kueue and YuniKorn, which have no PodGroup object); ``where`` names the key it
    came from (``label kueue.x-k8s.io/pod-group-name=train``) for messages.
    """

    where: str
    field: str
    ref: GangRef | None = None
    gang: GangSpec | None = None
    role: str = ""
    queue: str = ""
