"""Workload controllers' objects → :class:`~phalanx.api.specs.ControllerSpec`, one module per
API owner: ``apps/v1`` (:mod:`.apps`), Volcano's batch Job (:mod:`.volcano`), Kubeflow's
PyTorchJob and MPIJob (:mod:`.kubeflow`), JobSet (:mod:`.jobset`) and LeaderWorkerSet
(:mod:`.lws`). Each reads the object the way its controller does and says which pods and gangs
that controller would create; the simulator's owner controller creates them.
"""
