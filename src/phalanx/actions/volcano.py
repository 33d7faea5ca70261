"""Volcano's ``preempt`` and ``reclaim`` with its gang plugin, for the ``volcano`` policy.

They model what Volcano does, to compare against, not to be used: a job is never taken below
``minAvailable`` (only surplus members or single-pod jobs are victims, as the gang plugin's
preemptable function allows), candidates by priority only, no minimal-set pruning (every
victim chosen until the preemptor fits is evicted), and reclaim only from queues over their
deserved share (the ``proportion`` plugin's ``overused``). Everything else is
:mod:`phalanx.actions.preempt` and :mod:`phalanx.actions.reclaim` with ``gang_aware`` off.
"""

from __future__ import annotations

from phalanx.actions.preempt import Preempt
from phalanx.actions.reclaim import Reclaim


class VolcanoPreempt(Preempt):
    name = "volcano-preempt"
    gang_aware = False


class VolcanoReclaim(Reclaim):
    name = "volcano-reclaim"
    gang_aware = False
