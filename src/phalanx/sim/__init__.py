"""The simulator: the engine on a virtual clock, fed by manifests or traces.

File map: ``events`` (the heap), ``quota`` (ResourceQuota admission), ``controller`` (the Job
controller), ``metrics`` (what a run measured), ``prepare`` (workload checks and the resource
index), ``simulator`` (the loop).

Bulk steps (a Job's pods created, a cycle) run with the cyclic garbage collector paused
(``traces._gangs.paused_gc``): with a million pods its full collections, which walk every
object each time a quarter more exist, took a quarter of the CPU; reference counting still frees
what is not cyclic, and a step's cyclic garbage is collected after it.
"""
