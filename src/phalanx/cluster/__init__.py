"""Run-time cluster state: a columnar node table, pods and gangs with their status.

File map: ``resources`` (per-cluster resource index), ``labels`` (vectorised label and taint
matching), ``nodes`` (the NodeTable), ``devices`` (GPU devices of a node), ``workloads``
(PodInfo, GangInfo, statuses), ``state`` (ClusterState: the authoritative table plus all pods
and gangs), ``fragmentation`` (FGD's GPU fragmentation measure: a measure, not a plugin, so
the simulator, the packing experiment and the ``fgd`` plugin share it).

Invariant: ``requested[n]`` equals the sum of the requests of the pods placed on node ``n``
(allocated in a session, bound, or running); ``requested <= allocatable`` everywhere.
"""
