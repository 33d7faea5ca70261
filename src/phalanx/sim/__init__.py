"""The simulator: the engine on a virtual clock, fed by manifests or traces.

File map: ``events`` (the heap), ``quota`` (ResourceQuota admission), ``controller`` (the Job
controller), ``metrics`` (what a run measured), ``prepare`` (workload checks and the resource
index), ``simulator`` (the loop), ``gcpause`` (bulk steps without the cyclic collector).
"""
