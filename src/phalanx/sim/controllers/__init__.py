"""Workload controllers of the simulated cluster (beside :mod:`phalanx.sim.controller`'s Job
controller): :mod:`.owner` creates the pods and gangs of a
:class:`~phalanx.api.specs.ControllerSpec`."""
