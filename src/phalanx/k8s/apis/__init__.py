"""One module per gang API that marks pods: Koordinator, Kueue, YuniKorn and KAI-Scheduler.

Each reads its own labels and annotations into a :class:`~phalanx.k8s.declaration.Declaration`
(and, for KAI, its PodGroup object into a :class:`~phalanx.api.specs.GangSpec`); nothing else in
phalanx knows their key names.
"""
